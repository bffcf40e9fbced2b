//! `espalier bench remote-model`: seed 000's remote method on model queries — the six Train
//! Benchmark queries and the GraBaTs singleton query, one request each, under K concurrent
//! clients (see `espalier_bench::remote::model`). This command builds the two databases and
//! checks every query's in-process result against an independent computation before any
//! client starts.

use std::path::Path;

use espalier_bench::remote::grabats;
use espalier_bench::remote::model::{self, ModelDatabase, ModelQuery};
use espalier_bench::remote::{Config, Stop};
use espalier_instruction::{Engine, Reply};
use espalier_trainbenchmark::queries::{matches_of, sql_matches, sqlite_of};
use espalier_trainbenchmark::{Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

use crate::bench_remote::ClientOptions;
use crate::dump::bar;
use crate::Global;

/// Largest Train Benchmark size (the generator's scale factor) this command builds.
const MAX_SIZE: u32 = 4096;

/// Options of `espalier bench remote-model`.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteModelArgs {
    /// CI size: K = 1, 4; 20 invocations per point; Train Benchmark size 1; 500 GraBaTs types.
    /// Other options given override it.
    #[arg(long)]
    pub quick: bool,
    /// The clients, how they reach the server, and where the data goes.
    #[command(flatten)]
    pub clients: ClientOptions,
    /// Queries, comma-separated: PosLength, SwitchMonitored, RouteSensor, SwitchSet,
    /// ConnectedSegments, SemaphoreNeighbor, singleton (GraBaTs). Default: all seven.
    #[arg(long = "query", value_name = "LIST", value_delimiter = ',')]
    pub queries: Vec<String>,
    /// Train Benchmark size of the repair model (seed 000 used 32: 49,334 elements).
    #[arg(long, value_name = "N")]
    pub size: Option<u32>,
    /// Type declarations in the generated GraBaTs model (default 20000; --quick 500).
    #[arg(long, value_name = "N")]
    pub grabats_types: Option<usize>,
    /// Seed of the GraBaTs model (the Train Benchmark's generator has its own fixed seeds).
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Also write box plots of the timings to FILE as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

/// The GraBaTs query's name in `--query` and in the report (`grabats:singleton`).
const SINGLETON: &str = "singleton";

/// The client-side configuration these options describe.
fn config(args: &RemoteModelArgs) -> Result<Config, String> {
    let mut c = if args.quick { Config::quick() } else { Config::full() };
    c.stop = Stop::Requests(if args.quick { 20 } else { 1000 });
    args.clients.apply(&mut c)?;
    c.seed = args.seed;
    c.postgres = false;
    c.progress = true;
    Ok(c)
}

/// The queries asked for: the Train Benchmark's, and whether the singleton query is.
fn chosen(args: &RemoteModelArgs) -> Result<(Vec<Query>, bool), String> {
    if args.queries.iter().all(|q| q.trim().is_empty()) {
        return Ok((Query::ALL.to_vec(), true));
    }
    let mut tb = Vec::new();
    let mut singleton = false;
    for q in args.queries.iter().map(|q| q.trim()).filter(|q| !q.is_empty()) {
        if q.eq_ignore_ascii_case(SINGLETON) {
            singleton = true;
        } else if let Some(query) = Query::parse(q) {
            tb.push(query);
        } else {
            let names: Vec<&str> = Query::ALL.iter().map(|x| x.name()).collect();
            return Err(format!("--query: unknown query {q:?}; expected {} or {SINGLETON}", names.join(", ")));
        }
    }
    Ok((tb, singleton))
}

/// Builds the Train Benchmark's repair model of `size` in `dir` and checks each query's matches
/// in process against SQL over SQLite.
fn trainbenchmark(dir: &Path, size: u32, queries: &[Query]) -> Result<ModelDatabase, String> {
    let progress = bar(None, "{spinner} building the Train Benchmark model: {msg} {elapsed}");
    progress.set_message(format!("size {size}"));
    let model = espalier_trainbenchmark::generate(Scenario::Repair, size);
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = espalier_trainbenchmark::create(dir, &model, options).map_err(|e| format!("Train Benchmark: {e}"))?;
    progress.set_message("checking every query against SQLite");
    let conn = sqlite_of(&model.tables()).map_err(|e| format!("Train Benchmark: SQLite: {e}"))?;
    let mut out = Vec::new();
    for &q in queries {
        // The result every reply is compared with, checked against SQL: one run in process.
        let query = ModelQuery::new(&engine, &format!("tb:{}", q.name()), q.pattern()).map_err(|e| e.to_string())?;
        let ours = matches_of(Reply::Query(query.expected.clone()))
            .map_err(|e| format!("Train Benchmark {}: {e}", q.name()))?;
        let sql = sql_matches(&conn, q).map_err(|e| format!("Train Benchmark {}: SQLite: {e}", q.name()))?;
        if ours != sql {
            return Err(format!(
                "Train Benchmark {}: Espalier finds {} matches in process and SQLite {}; not run",
                q.name(),
                ours.len(),
                sql.len()
            ));
        }
        out.push(query);
    }
    progress.finish_and_clear();
    Ok(ModelDatabase {
        name: format!("Train Benchmark (repair, size {size})"),
        engine,
        queries: out.into_iter().map(Into::into).collect(),
    })
}

/// Generates the GraBaTs model of `types` type declarations in `dir` and checks the singleton
/// query's result in process against counting the model.
fn grabats_database(dir: &Path, types: usize, seed: u64) -> Result<ModelDatabase, String> {
    let model = grabats::Model::generate(types, seed).map_err(|e| e.to_string())?;
    let packages = model.packages.len() as u64;
    let progress = bar(Some(packages), "{spinner} building the GraBaTs model: {bar:30} {pos}/{len} packages {elapsed}");
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(dir, grabats::SCHEMA, options).map_err(|e| format!("GraBaTs: {e}"))?;
    model.fill(&engine, &mut |done| progress.set_position(done as u64)).map_err(|e| e.to_string())?;
    progress.finish_and_clear();
    let query = ModelQuery::new(&engine, &format!("grabats:{SINGLETON}"), grabats::QUERY).map_err(|e| e.to_string())?;
    grabats::check(&model, &query.expected).map_err(|e| e.to_string())?;
    let name =
        format!("GraBaTs ({} types, {} methods, {} singletons)", model.types(), model.methods(), model.singletons());
    Ok(ModelDatabase { name, engine, queries: vec![query.into()] })
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with
/// `--json`). Fails if something cannot be built, if an in-process result disagrees with its
/// independent check, or — after printing the report — if any reply was wrong.
pub fn run(args: &RemoteModelArgs, global: &Global) -> Result<(), String> {
    let config = config(args)?;
    let (tb_queries, singleton) = chosen(args)?;
    let size = args.size.unwrap_or(if args.quick { 1 } else { 32 });
    if size == 0 || size > MAX_SIZE {
        return Err(format!("--size: {size} is not between 1 and {MAX_SIZE}"));
    }
    let types = args.grabats_types.unwrap_or(if args.quick { 500 } else { 20_000 });
    let base = config.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("espalier-bench-remote-model-")
        .tempdir_in(&base)
        .map_err(|e| format!("making a temporary directory in {}: {e}", base.display()))?;
    let _cleanup = espalier_bench::interrupt::on_interrupt(tmp.path().to_path_buf(), None);
    let mut databases = Vec::new();
    if !tb_queries.is_empty() {
        databases.push(trainbenchmark(&tmp.path().join("trainbenchmark"), size, &tb_queries)?);
    }
    if singleton {
        databases.push(grabats_database(&tmp.path().join("grabats"), types, args.seed)?);
    }
    for d in &databases {
        eprintln!("{}: {} queries, each checked in process", d.name, d.queries.len());
    }
    let report = model::run(&config, databases).map_err(|e| e.to_string())?;
    crate::output::write_svg(args.svg.as_deref(), || report.chart_svg())?;
    crate::output::write_svg(args.clients.throughput_svg.as_deref(), || report.throughput_svg())?;
    crate::output::print_report(global.json, || report.to_json(), || report.to_markdown())?;
    let wrong = report.wrong();
    if wrong > 0 {
        return Err(format!(
            "{wrong} wrong replies (see the report): the server answered something else than the engine"
        ));
    }
    Ok(())
}
