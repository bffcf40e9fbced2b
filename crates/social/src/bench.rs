//! The in-process run: Espalier beside SQLite on the same network, each query invoked as
//! many times as the paper's appendix says (or `invocations`), the two systems one after the
//! other on each draw, and every answer cross-checked (the run fails on the first
//! disagreement). Espalier runs with durability none and SQLite with WAL and
//! `synchronous = OFF`, as the OO7 run; reads only, so neither writes during the timings.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_bench::progress;
use espalier_bench::stats::Summary;
use espalier_transaction::{DatabaseOptions, Durability};
use indicatif::ProgressBar;
use rusqlite::Connection;
use serde::Serialize;

use crate::espalier::{answer, results, SocialEspalier, Via};
use crate::model::{DegreeStats, Network, Size};
use crate::queries::{draws, Query};
use crate::sqlite::{self, SocialSqlite};
use espalier_bench::graph_peer::GraphPeer;

/// Most invocations (timed or untimed) of one query a run may ask for: the draws are made
/// before the run and held in memory.
pub const MAX_INVOCATIONS: usize = 1_000_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The network's size.
    pub size: Size,
    /// The generator's seed (and the draws').
    pub seed: u64,
    /// Invocations per query; `None`: the paper's (2000, 200 or 20) at paper size, a
    /// twentieth of them (at least 5) at tiny size.
    pub invocations: Option<usize>,
    /// Untimed invocations per query and system before the timed ones.
    pub warmup: usize,
    /// Only these queries (all when empty).
    pub only: Vec<Query>,
    /// Where the temporary databases go (the system's temp directory when `None`).
    pub dir: Option<PathBuf>,
    /// Progress bars on stderr.
    pub progress: bool,
    /// The embedded graph peers to run the graph queries on ([`crate::peers`]).
    pub peers: Vec<GraphPeer>,
    /// The peers directory, with their drivers installed (`peers/` after `scripts/peers-setup`).
    pub peers_dir: PathBuf,
    /// Fail when a peer asked for is not installed (otherwise the report says it did not run).
    pub require_peers: bool,
}

impl Config {
    /// CI size: the tiny network, a few invocations each.
    pub fn quick() -> Config {
        Config {
            size: Size::Tiny,
            seed: crate::SEED,
            invocations: None,
            warmup: 2,
            only: Vec::new(),
            dir: None,
            progress: false,
            peers: Vec::new(),
            peers_dir: PathBuf::from("peers"),
            require_peers: false,
        }
    }

    /// The invocations of `q` this run makes.
    pub fn invocations_of(&self, q: Query) -> usize {
        match (self.invocations, self.size) {
            (Some(n), _) => n.max(1),
            (None, Size::Paper) => q.paper_invocations(),
            (None, Size::Tiny) => (q.paper_invocations() / 20).max(5),
        }
    }

    /// The queries this run makes.
    pub fn queries(&self) -> Vec<Query> {
        if self.only.is_empty() {
            Query::ALL.to_vec()
        } else {
            Query::ALL.into_iter().filter(|q| self.only.contains(q)).collect()
        }
    }
}

/// A run that could not be made, or found the systems disagreeing.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

fn err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError(format!("{what}: {e}"))
}

/// The in-process report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The network's size.
    pub size: Size,
    /// The generator's seed.
    pub seed: u64,
    /// People, messages, activities, addresses, groups, organisations.
    pub counts: Counts,
    /// Friends per person.
    pub degrees: DegreeStats,
    /// Generating the network, in ms.
    pub generate_ms: f64,
    /// Loading it into Espalier, in ms.
    pub load_espalier_ms: f64,
    /// Loading it into SQLite (with ANALYZE), in ms.
    pub load_sqlite_ms: f64,
    /// One row per query (and per declared command).
    pub ops: Vec<OpReport>,
    /// The embedded graph peers asked for: their timings of the graph queries, or why they did
    /// not run.
    pub peers: Vec<PeerReport>,
}

/// A graph peer's run of the graph queries.
#[derive(Debug, Clone, Serialize)]
pub struct PeerReport {
    /// `kuzu` or `neo4j`.
    pub system: String,
    /// The version it reported (None if it did not run).
    pub version: Option<String>,
    /// Loading the tables, in ms (None if it did not run).
    pub load_ms: Option<f64>,
    /// Why it did not run.
    pub unavailable: Option<String>,
    /// Each query's time per invocation, and Espalier's speedup over it.
    pub queries: Vec<PeerQueryReport>,
}

/// One query on a graph peer.
#[derive(Debug, Clone, Serialize)]
pub struct PeerQueryReport {
    /// The query's name.
    pub query: String,
    /// Timed invocations (the shortest path's leave out draws of one person twice).
    pub invocations: usize,
    /// The peer's time per invocation.
    pub timings: Summary,
    /// The peer's median over Espalier's: above 1, Espalier is faster.
    pub ratio: f64,
}

/// The network's counts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Counts {
    /// People.
    pub people: usize,
    /// Messages.
    pub messages: usize,
    /// Activities.
    pub activities: usize,
    /// Addresses.
    pub addresses: usize,
    /// Groups.
    pub groups: usize,
    /// Organisations.
    pub organisations: usize,
}

impl Counts {
    /// The counts of `net`.
    pub fn of(net: &Network) -> Counts {
        Counts {
            people: net.people.len(),
            messages: net.messages.len(),
            activities: net.activity_count(),
            addresses: net.addresses.len(),
            groups: net.groups.len(),
            organisations: net.organisations.len(),
        }
    }
}

/// One query's timings in both systems.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// The query's name; a declared command's is followed by ` (command)`.
    pub query: String,
    /// Timed invocations.
    pub invocations: usize,
    /// Rows per invocation, on average (the same in both systems).
    pub mean_rows: f64,
    /// Espalier's time per invocation.
    pub espalier: Summary,
    /// SQLite's time per invocation.
    pub sqlite: Summary,
    /// SQLite's median over Espalier's: above 1, Espalier is faster.
    pub ratio: f64,
}

fn bar(show: bool, len: u64) -> ProgressBar {
    progress::bar(show, len, "", progress::STEPS)
}

/// Opens (or creates) the SQLite file as the benchmark uses it.
pub fn open_sqlite(path: &Path) -> Result<Connection, BenchError> {
    espalier_bench::peers::sqlite::open_benchmark_file(path).map_err(BenchError)
}

/// The database options of the in-process run.
pub fn options() -> DatabaseOptions {
    DatabaseOptions { durability: Durability::None, ..Default::default() }
}

/// The seed of `q`'s draws: the run's seed and the query, so each query has its own.
pub fn draw_seed(seed: u64, q: Query) -> u64 {
    seed ^ (q as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Both systems built on one network: what the in-process run and the remote one share.
pub struct Built {
    /// The network.
    pub net: Network,
    /// It in Espalier.
    pub espalier: SocialEspalier,
    /// It in SQLite.
    pub sqlite: Connection,
    /// Generating, loading Espalier, loading SQLite (ms).
    pub times: (f64, f64, f64),
}

/// Generates the network of `size` from `seed` and loads it into Espalier and SQLite under
/// `dir`.
pub fn build(size: Size, seed: u64, dir: &Path) -> Result<Built, BenchError> {
    let t = Instant::now();
    let net = crate::generate(size, seed).map_err(|e| err("generating", e))?;
    let generate_ms = ms(t.elapsed());
    let t = Instant::now();
    let engine = crate::create(&dir.join("espalier"), &net, options()).map_err(|e| err("loading Espalier", e))?;
    let espalier = SocialEspalier::new(engine).map_err(|e| err("checking the queries", e))?;
    let load_espalier_ms = ms(t.elapsed());
    let t = Instant::now();
    let mut conn = open_sqlite(&dir.join("sqlite.db"))?;
    sqlite::load(&mut conn, &net).map_err(|e| err("loading SQLite", e))?;
    let load_sqlite_ms = ms(t.elapsed());
    check_counts(&net, &espalier, &conn)?;
    Ok(Built { net, espalier, sqlite: conn, times: (generate_ms, load_espalier_ms, load_sqlite_ms) })
}

/// What is counted in both databases: (name, Espalier pattern, SQL).
const COUNTS: [(&str, &str, &str); 8] = [
    ("people", "collection match x in . 'People' select 'n' -> count ( )", "SELECT COUNT(*) FROM person"),
    ("messages", "collection match x in . 'Messages' select 'n' -> count ( )", "SELECT COUNT(*) FROM message"),
    (
        "activities",
        "collection match x in . 'People' . 'Activities' select 'n' -> count ( )",
        "SELECT COUNT(*) FROM activity",
    ),
    ("addresses", "collection match x in . 'Addresses' select 'n' -> count ( )", "SELECT COUNT(*) FROM address"),
    ("groups", "collection match x in . 'Groups' select 'n' -> count ( )", "SELECT COUNT(*) FROM grp"),
    (
        "organisations",
        "collection match x in . 'Organisations' select 'n' -> count ( )",
        "SELECT COUNT(*) FROM organisation",
    ),
    (
        "friendship entries",
        "collection match x in . 'People' f in x > 'Friends' select 'n' -> count ( )",
        "SELECT COUNT(*) FROM friend",
    ),
    (
        "group memberships",
        "collection match x in . 'People' g in x > 'Groups' select 'n' -> count ( )",
        "SELECT COUNT(*) FROM member",
    ),
];

/// Fails unless both databases hold exactly what the generator made: the paper's counts (for
/// the size), friendship entries and memberships.
pub fn check_counts(net: &Network, espalier: &SocialEspalier, conn: &Connection) -> Result<(), BenchError> {
    let p = net.params;
    let friendships: usize = net.people.iter().map(|x| x.friends.len()).sum();
    let memberships: usize = net.people.iter().map(|x| x.groups.len()).sum();
    let wanted = [p.people, p.messages, p.activities, p.addresses, p.groups, p.organisations, friendships, memberships];
    for ((name, pattern, sql), want) in COUNTS.into_iter().zip(wanted) {
        let ours = match espalier.engine().execute_text(pattern, &Default::default()) {
            Ok(espalier_instruction::Reply::Query(q)) => {
                q.rows.first().and_then(|r| r.values.first()).and_then(serde_json::Value::as_u64)
            }
            Ok(_) => None,
            Err(e) => return Err(err(&format!("counting {name} in Espalier"), e)),
        };
        let theirs: i64 =
            conn.query_row(sql, [], |r| r.get(0)).map_err(|e| err(&format!("counting {name} in SQLite"), e))?;
        if ours != Some(want as u64) || theirs != want as i64 {
            return Err(BenchError(format!(
                "count mismatch: {want} {name} generated, Espalier holds {ours:?}, SQLite {theirs}"
            )));
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs the benchmark; fails if a database cannot be built, a query fails, or the two systems
/// disagree on an answer — never for a slow one.
pub fn run(c: &Config) -> Result<Report, BenchError> {
    if c.invocations.unwrap_or(0) > MAX_INVOCATIONS || c.warmup > MAX_INVOCATIONS {
        return Err(BenchError(format!(
            "at most {MAX_INVOCATIONS} invocations and as many untimed ones per query (asked: {:?} and {})",
            c.invocations, c.warmup
        )));
    }
    let base = c.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("espalier-bench-social-")
        .tempdir_in(&base)
        .map_err(|e| err(&format!("making a temporary directory in {}", base.display()), e))?;
    let built = build(c.size, c.seed, tmp.path())?;
    let mut theirs = SocialSqlite::new(&built.sqlite).map_err(|e| err("preparing the SQL", e))?;
    let queries = c.queries();
    let pb = bar(c.progress, queries.iter().map(|q| c.invocations_of(*q) as u64).sum());
    let mut ops = Vec::new();
    let mut asked = Vec::new();
    for q in queries {
        pb.set_prefix(q.name());
        let n = c.invocations_of(q);
        let all = draws(&built.net, n + c.warmup, draw_seed(c.seed, q));
        // SQLite's rows of every draw, kept for the graph peers to be compared with.
        let for_peers = !c.peers.is_empty() && crate::peers::QUERIES.contains(&q);
        let mut sqlite_rows = Vec::with_capacity(if for_peers { all.len() } else { 0 });
        let (warm, timed) = all.split_at(c.warmup.min(all.len()));
        let vias: &[Via] = if q.command().is_some() { &[Via::Query, Via::Command] } else { &[Via::Query] };
        for d in warm {
            for &via in vias {
                built.espalier.run(q, via, d).map_err(|e| err("Espalier", e))?;
            }
            let want = theirs.run(q, d).map_err(|e| err("SQLite", e))?;
            if for_peers {
                sqlite_rows.push(want.rows);
            }
        }
        let mut ours: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); vias.len()];
        let mut sql = Vec::with_capacity(n);
        let mut rows = 0usize;
        for (i, d) in timed.iter().enumerate() {
            let t = Instant::now();
            let want = theirs.run(q, d).map_err(|e| err("SQLite", e))?;
            sql.push(t.elapsed());
            rows += want.rows.len();
            // The query and its command take turns going first: the second of two runs on
            // the same draw finds the caches warm.
            let mut order: Vec<(&Via, &mut Vec<Duration>)> = vias.iter().zip(ours.iter_mut()).collect();
            if i % 2 == 1 {
                order.reverse();
            }
            for (&via, times) in order {
                let t = Instant::now();
                let reply = built.espalier.run(q, via, d).map_err(|e| err("Espalier", e))?;
                times.push(t.elapsed());
                let got =
                    results(q, reply).and_then(|r| answer(q, d, &r, &built.net)).map_err(|e| err("Espalier", e))?;
                if got != want {
                    return Err(BenchError(format!(
                        "{} for {d:?}: Espalier answers {} rows (total {}), SQLite {} rows (total {}); first rows {:?} and {:?}",
                        q.name(),
                        got.rows.len(),
                        got.total,
                        want.rows.len(),
                        want.total,
                        got.rows.first(),
                        want.rows.first()
                    )));
                }
            }
            if for_peers {
                sqlite_rows.push(want.rows);
            }
            pb.inc(1);
        }
        if for_peers {
            asked.push((q, all, sqlite_rows));
        }
        if sql.is_empty() {
            continue;
        }
        let sqlite = Summary::of(&mut sql);
        for (&via, mut times) in vias.iter().zip(ours) {
            let espalier = Summary::of(&mut times);
            let query = if via == Via::Command { format!("{} (command)", q.name()) } else { q.name().to_string() };
            let ratio = if espalier.median_us > 0.0 { sqlite.median_us / espalier.median_us } else { f64::INFINITY };
            ops.push(OpReport {
                query,
                invocations: n,
                mean_rows: rows as f64 / n as f64,
                espalier,
                sqlite: sqlite.clone(),
                ratio,
            });
        }
    }
    pb.finish_and_clear();
    drop(theirs);
    let peers = run_peers(c, &built, tmp.path(), &asked, &ops)?;
    let (generate_ms, load_espalier_ms, load_sqlite_ms) = built.times;
    Ok(Report {
        size: c.size,
        seed: c.seed,
        counts: Counts::of(&built.net),
        degrees: built.net.degrees(),
        generate_ms,
        load_espalier_ms,
        load_sqlite_ms,
        ops,
        peers,
    })
}

/// Runs the graph queries on each peer asked for, with the same draws as Espalier and SQLite
/// (a shortest path from a person to themself left out: SQL's distance is 0, a graph
/// database's shortest path needs a first step); every invocation's rows must equal SQLite's
/// (`asked`: each query's draws with SQLite's rows for them, from the in-process run).
fn run_peers(
    c: &Config,
    built: &Built,
    dir: &Path,
    asked: &[(Query, Vec<crate::queries::Draw>, Vec<Vec<Vec<serde_json::Value>>>)],
    ops: &[OpReport],
) -> Result<Vec<PeerReport>, BenchError> {
    if c.peers.is_empty() || asked.is_empty() {
        return Ok(Vec::new());
    }
    let tables = dir.join("peers-csv");
    std::fs::create_dir_all(&tables).map_err(|e| err("making the peers' directory", e))?;
    let files = crate::peers::write_tables(&built.sqlite, &tables).map_err(BenchError)?;
    // Per query: its draws for the peers, the untimed ones first, and SQLite's rows for each.
    let mut kept = Vec::with_capacity(asked.len());
    for (q, all, rows) in asked {
        let untimed = c.warmup.min(all.len());
        let keep = |d: &crate::queries::Draw| crate::peers::runs(*q, d);
        let n_warm = all[..untimed].iter().filter(|d| keep(d)).count();
        let (draws, want): (Vec<_>, Vec<_>) =
            all.iter().zip(rows).filter(|(d, _)| keep(d)).map(|(d, r)| (d.clone(), r.clone())).unzip();
        kept.push((*q, n_warm, draws, want));
    }
    let mut out = Vec::with_capacity(c.peers.len());
    for &peer in &c.peers {
        let work = dir.join(format!("peer-{}", peer.name()));
        std::fs::create_dir_all(&work).map_err(|e| err("making the peers' directory", e))?;
        // The driver takes one untimed count for all queries: the least of them.
        let untimed = kept.iter().map(|k| k.1).min().unwrap_or(0);
        let list: Vec<(Query, &[crate::queries::Draw])> =
            kept.iter().map(|(q, n, d, _)| (*q, &d[n - untimed..])).collect();
        let pb = bar(c.progress, 1);
        pb.set_prefix(format!("peer {}", peer.name()));
        let result = crate::peers::run(peer, &c.peers_dir, &files, &work, &list, untimed);
        pb.finish_and_clear();
        let run = match result {
            Ok(run) => run,
            Err(e) => {
                let reason = e.skipped(c.require_peers).map_err(|e| err("peer", e))?;
                out.push(PeerReport {
                    system: peer.name().into(),
                    version: None,
                    load_ms: None,
                    unavailable: Some(reason),
                    queries: Vec::new(),
                });
                continue;
            }
        };
        let mut queries = Vec::with_capacity(run.queries.len());
        for (mut got, (q, n, draws, want)) in run.queries.into_iter().zip(&kept) {
            let skip = n - untimed;
            for (i, (rows, want)) in got.rows.iter().zip(&want[skip..]).enumerate() {
                if rows != want {
                    return Err(BenchError(format!(
                        "{} for {:?}: {} answers {} rows, SQLite {}; first rows {:?} and {:?}",
                        q.name(),
                        draws[skip + i],
                        run.version,
                        rows.len(),
                        want.len(),
                        rows.first(),
                        want.first()
                    )));
                }
            }
            if got.times.is_empty() {
                continue;
            }
            let invocations = got.times.len();
            let timings = Summary::of(&mut got.times);
            let ours = ops.iter().find(|o| o.query == q.name()).map(|o| o.espalier.median_us);
            let ratio = ours.filter(|m| *m > 0.0).map_or(f64::NAN, |m| timings.median_us / m);
            queries.push(PeerQueryReport { query: q.name().to_string(), invocations, timings, ratio });
        }
        out.push(PeerReport {
            system: peer.name().into(),
            version: Some(run.version),
            load_ms: Some(run.load_ms),
            unavailable: None,
            queries,
        });
    }
    Ok(out)
}

impl Report {
    /// The report as Markdown: the network, then one table row per query.
    pub fn to_markdown(&self) -> String {
        use espalier_bench::suite::report::us;
        use std::fmt::Write as _;
        let c = &self.counts;
        let d = &self.degrees;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Social network, {} size (seed {}): {} people, {} messages, {} activities, {} addresses, {} groups, \
             {} organisations; {} friendships, friends per person mean {:.1}, median {}, min {}, max {}, {:.0}% \
             under 65. Generated in {:.0} ms; loaded in {:.0} ms into Espalier (durability none), {:.0} ms into \
             SQLite (WAL, synchronous=OFF).\n",
            self.size.name(),
            self.seed,
            c.people,
            c.messages,
            c.activities,
            c.addresses,
            c.groups,
            c.organisations,
            d.friendships,
            d.mean,
            d.median,
            d.min,
            d.max,
            d.under_65 * 100.0,
            self.generate_ms,
            self.load_espalier_ms,
            self.load_sqlite_ms
        );
        out.push_str(
            "In process, one invocation at a time; medians per invocation in µs; ratio = SQLite / Espalier \
             (above 1, Espalier is faster). Every answer is cross-checked.\n\n",
        );
        out.push_str("| query | invocations | rows | Espalier | SQLite | ratio |\n|---|---:|---:|---:|---:|---:|\n");
        for r in &self.ops {
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} | {} | {:.2}× |",
                r.query,
                r.invocations,
                r.mean_rows,
                us(r.espalier.median_us),
                us(r.sqlite.median_us),
                r.ratio
            );
        }
        self.peers_markdown(&mut out);
        out
    }

    /// The graph peers' table: each graph query's median and the ratio to Espalier's.
    fn peers_markdown(&self, out: &mut String) {
        use espalier_bench::suite::report::us;
        use std::fmt::Write as _;
        for p in self.peers.iter().filter(|p| p.unavailable.is_some()) {
            let _ = writeln!(out, "\n{} did not run: {}", p.system, p.unavailable.as_deref().unwrap_or(""));
        }
        let ran: Vec<&PeerReport> = self.peers.iter().filter(|p| p.version.is_some()).collect();
        if ran.is_empty() {
            return;
        }
        out.push_str("\nThe graph queries on the embedded graph peers (every invocation's rows equal SQLite's):\n\n");
        out.push_str("| query | Espalier |");
        for p in &ran {
            let _ = write!(out, " {} | ratio |", p.version.as_deref().unwrap_or(&p.system));
        }
        out.push_str("\n|---|---:|");
        out.push_str(&"---:|---:|".repeat(ran.len()));
        out.push('\n');
        for r in self.ops.iter().filter(|r| !r.query.ends_with("(command)")) {
            let cells: Vec<String> = ran
                .iter()
                .filter_map(|p| p.queries.iter().find(|q| q.query == r.query))
                .map(|q| format!("{} | {:.2}×", us(q.timings.median_us), q.ratio))
                .collect();
            if cells.len() == ran.len() {
                let _ = writeln!(out, "| {} | {} | {} |", r.query, us(r.espalier.median_us), cells.join(" | "));
            }
        }
        for p in &ran {
            let _ = writeln!(
                out,
                "\n{} loaded the people, groups, friendships and memberships in {:.0} ms.",
                p.version.as_deref().unwrap_or(&p.system),
                p.load_ms.unwrap_or(f64::NAN)
            );
        }
        out.push_str(
            "\nMedians per invocation in µs; ratio = the peer's median / Espalier's (above 1, Espalier is faster). \
             The peers run Cypher through their embedded drivers (Python for Kùzu, Java for Neo4j), each \
             invocation one call.\n",
        );
    }

    /// Box plots per query (`espalier_bench::suite::chart`): one box per query and system.
    pub fn chart_svg(&self) -> String {
        use espalier_bench::suite::chart::{svg, Series};
        use espalier_bench::suite::report::InstructionResult;
        let result = |r: &OpReport, s: &Summary| InstructionResult::of_summary("hot", "social", &r.query, s);
        let ours: Vec<InstructionResult> = self.ops.iter().map(|r| result(r, &r.espalier)).collect();
        let theirs: Vec<InstructionResult> = self.ops.iter().map(|r| result(r, &r.sqlite)).collect();
        let series = [
            Series { label: "Espalier".into(), results: ours.iter().collect() },
            Series { label: "SQLite".into(), results: theirs.iter().collect() },
        ];
        svg(&series, &format!("Social network ({}): Espalier beside SQLite, in process", self.size.name()))
    }
}
