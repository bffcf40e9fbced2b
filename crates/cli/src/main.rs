//! `espalier`: the command line of the Espalier database.
//!
//! Every subcommand is a small function over the library crates: `espalier-schema` (schema
//! check), `espalier-instruction` (exec, shell), `espalier-data` (export, import, check) and
//! `espalier-transaction` (open, create). See `docs/cli.md`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use espalier_transaction::{DatabaseOptions, Durability};

/// Queries, replies and change sets allocate a few small objects per row; mimalloc's
/// per-thread free lists cost less than glibc's: the 100-entry collection query of `espalier
/// bench core` took 11.2–11.3 µs instead of 19.1–19.2. Built without transparent huge pages
/// (`no_thp`): with them an idle server held 8.9 MB of anonymous memory instead of 2.4.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod backup;
#[cfg(feature = "peers")]
mod bench_cmd;
#[cfg(feature = "peers")]
mod bench_graph_peers;
#[cfg(feature = "peers")]
mod bench_mix;
#[cfg(feature = "peers")]
mod bench_oo7;
#[cfg(feature = "peers")]
mod bench_peers;
#[cfg(feature = "peers")]
mod bench_remote;
#[cfg(feature = "peers")]
mod bench_remote_model;
#[cfg(feature = "peers")]
mod bench_social;
mod bench_suite;
#[cfg(feature = "peers")]
mod bench_trainbenchmark;
mod complete;
mod csv;
mod db;
mod dump;
mod exec;
#[cfg(feature = "peers")]
mod import_trainbenchmark;
mod migrate;
mod output;
mod schema_cmd;
mod serve;
mod shell;

use output::Format;

/// Where the database lives unless `--db` or `ESPALIER_DB` says otherwise.
pub const DEFAULT_DB: &str = "./espalier.db";

#[derive(Debug, Parser)]
#[command(
    name = "espalier",
    version,
    about = "Espalier: a typed, rooted graph database",
    long_about = "Espalier keeps one tree of typed nodes, described by a schema in the \
Alan-Application notation, and answers instructions (updates, collection queries, get, commands \
and transactions) against it.\n\n\
Start with the demo:\n\n    \
espalier init --demo        # creates ./espalier.db with a small factory model and data\n    \
espalier shell              # type instructions; .help lists the shell commands\n\n\
The schema language is documented in docs/schema-language.md, the instructions in \
docs/instructions.md and this command line in docs/cli.md.",
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The database directory (the benchmarks build their own temporary ones and do not use it).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "ESPALIER_DB",
        hide_env_values = true,
        default_value = DEFAULT_DB,
        help_heading = "Global options"
    )]
    pub db: PathBuf,
    /// When commits reach the disk: `sync` fsyncs every commit (a reply means it is durable),
    /// `periodic` fsyncs every 100 ms in the background (power loss may lose the last 100 ms),
    /// `none` leaves it to the operating system. Also ESPALIER_DURABILITY. Default: `sync` for
    /// init, exec, shell, import, serve (or serve's `durability` in espalier.toml) and bench
    /// remote; `none` for bench run and bench peers (their --fsync is `sync`); bench core and
    /// bench trainbenchmark always run with `none`.
    #[arg(long, global = true, value_enum, value_name = "MODE", help_heading = "Global options")]
    pub durability: Option<DurabilityArg>,
    /// Where `--db` came from: the command line, ESPALIER_DB or the default (`serve` puts its
    /// configuration file between the last two).
    #[arg(skip)]
    pub db_source: Option<clap::parser::ValueSource>,
    /// ESPALIER_DURABILITY, read by `main` (a bad value is named with the variable).
    #[arg(skip)]
    pub durability_env: Option<DurabilityArg>,
    /// The in-memory bound, in MiB: a checkpoint starts whenever the table pages, key index
    /// nodes and texts written since the last one grew by this much, and what it wrote is then read from
    /// the checkpoint files, mapped (docs/storage.md, "Larger than memory"). Also
    /// ESPALIER_MEMORY_BOUND; `serve` also reads `memory_bound` in espalier.toml. Default: 256.
    #[arg(
        long,
        global = true,
        value_name = "MIB",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Global options"
    )]
    pub memory_bound: Option<u64>,
    /// ESPALIER_MEMORY_BOUND, read by `main` (a bad value is named with the variable).
    #[arg(skip)]
    pub memory_bound_env: Option<u64>,
    /// Machine-readable JSON output, where the subcommand has any (same as `--format json`).
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    Sync,
    Periodic,
    None,
}

impl DurabilityArg {
    pub fn name(self) -> &'static str {
        match self {
            DurabilityArg::Sync => "sync",
            DurabilityArg::Periodic => "periodic",
            DurabilityArg::None => "none",
        }
    }

    pub fn durability(self) -> Durability {
        match self {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Periodic => Durability::Periodic(Duration::from_millis(100)),
            DurabilityArg::None => Durability::None,
        }
    }
}

/// The environment variable of `--durability`.
pub const DURABILITY_ENV: &str = "ESPALIER_DURABILITY";
/// The environment variable of `--memory-bound`.
pub const MEMORY_BOUND_ENV: &str = "ESPALIER_MEMORY_BOUND";

impl Global {
    /// `--durability`, else ESPALIER_DURABILITY, if either is given.
    pub fn durability_given(&self) -> Option<DurabilityArg> {
        self.durability.or(self.durability_env)
    }

    /// `--memory-bound`, else ESPALIER_MEMORY_BOUND, in bytes, if either is given.
    pub fn memory_bytes_given(&self) -> Option<u64> {
        self.memory_bound.or(self.memory_bound_env).map(|mib| mib.saturating_mul(1 << 20))
    }

    /// The database options of the commands that keep a database: `sync` unless told otherwise,
    /// the in-memory bound if one is given.
    pub fn options(&self) -> DatabaseOptions {
        let durability = self.durability_given().unwrap_or(DurabilityArg::Sync).durability();
        let mut options = DatabaseOptions { durability, ..DatabaseOptions::default() };
        if let Some(bytes) = self.memory_bytes_given() {
            options.memory_bytes = bytes;
        }
        options
    }

    /// The durability of `bench run` and `bench peers`: `none` unless `--fsync` (which is
    /// `sync`), `--durability` or ESPALIER_DURABILITY says otherwise; `--fsync` with another
    /// `--durability` is refused.
    pub fn bench_durability(&self, fsync: bool) -> Result<DurabilityArg, String> {
        match (fsync, self.durability) {
            (true, Some(d)) if d != DurabilityArg::Sync => {
                Err(format!("--fsync means --durability sync; it contradicts --durability {}", d.name()))
            }
            (true, _) => Ok(DurabilityArg::Sync),
            (false, Some(d)) => Ok(d),
            (false, None) => Ok(self.durability_env.unwrap_or(DurabilityArg::None)),
        }
    }

    /// Reads ESPALIER_DURABILITY (a value clap does not see, so that a bad one is named with the
    /// variable).
    fn read_env(&mut self) -> Result<(), String> {
        if let Some(value) = std::env::var_os(MEMORY_BOUND_ENV) {
            let text = value.to_string_lossy();
            self.memory_bound_env = Some(
                text.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&m| m > 0)
                    .ok_or_else(|| format!("{MEMORY_BOUND_ENV}={text:?} is not a whole number of MiB above 0"))?,
            );
        }
        let Some(value) = std::env::var_os(DURABILITY_ENV) else { return Ok(()) };
        let text = value.to_string_lossy();
        self.durability_env = Some(
            DurabilityArg::from_str(text.trim(), true)
                .map_err(|_| format!("{DURABILITY_ENV}={text:?} is not one of sync, periodic, none"))?,
        );
        Ok(())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with schema files.
    #[command(subcommand)]
    Schema(SchemaCommand),

    /// Create a database from a schema (or the built-in demo).
    #[command(long_about = "Create a new database at --db (default ./espalier.db) from a schema file, \
or from the built-in demo schema with its demo data. An existing database is never overwritten. \
The database is built in a temporary directory next to the target and moved into place only \
when it is complete.\n\n\
Examples:\n\n    \
espalier init --demo\n    \
espalier --db shop.db init --schema shop.alan")]
    Init(InitArgs),

    /// Run one instruction (or a file of them) and print the reply.
    #[command(long_about = "Run one instruction against the database and print its reply: a table \
(or JSON) for a collection query, the node as JSON for `get`, and `done: version V, N changes` for \
a mutation, command or transaction. The instruction is text, or JSON if it starts with `{`; `-` \
reads it from standard input. With --file, every instruction in the file runs in order (a JSON \
file holds one instruction); the first failure stops the run.\n\n\
Parameters ($name in the instruction) are given with --param name=value.\n\n\
Exit status: 0 on success, 2 if the instruction failed (the message is `error[<code>]: ...` on \
standard error), 1 for other failures (no database, unreadable file).\n\n\
Examples:\n\n    \
espalier exec \"collection select . 'Orders' 'Qty' -> number : 'Quantity'\"\n    \
espalier exec \"get . 'Clients' : \\$c\" --param c=c1\n    \
espalier exec \"command 'pulse' ( 'machine' -> \\\"M1\\\" )\"\n    \
echo \"get\" | espalier exec - --format json")]
    Exec(ExecArgs),

    /// An interactive shell for instructions.
    #[command(long_about = "An interactive shell: type instructions and see their replies. An \
instruction may span several lines while its parentheses are open (or while a line ends with \
`\\`). Shell commands start with a dot: .help (or help), .schema, .describe, .format table|json, \
.param name=value, .quit (or quit). Tab completes instruction words, the schema's names ('Orders') and, \
after `:` in a path, the keys of the collection it names. History is kept in ~/.espalier_history (or \
$ESPALIER_HISTORY).\n\n\
When standard input is not a terminal, the shell reads instructions from it, runs them in order \
(errors are printed and the run goes on), and exits with status 2 if any failed.\n\n\
Examples:\n\n    \
espalier shell\n    \
espalier shell < script.alan")]
    Shell,

    /// Write the whole database as a JSON dump (or its collections as CSV files).
    #[command(long_about = "Write a consistent snapshot of the database (schema and data) as a \
JSON dump to FILE, or to standard output without FILE. The same data always gives the same \
bytes. A progress bar is shown on standard error when it is a terminal.\n\n\
With --csv DIR, writes DIR/COLLECTION.csv for each root collection instead (--collection \
NAME for some only): a header of `key` and the properties a CSV column holds, one entry per \
row.\n\n\
Examples:\n\n    \
espalier export backup.json\n    \
espalier --db shop.db export > shop.json\n    \
espalier export --csv data/")]
    Export(ExportArgs),

    /// Create a new database from a JSON dump (or add CSV files to the database).
    #[command(long_about = "Create a new database at --db from a dump written by `espalier export`: \
the database gets the dump's schema and all of its data, in one atomic write. The database is \
built in a temporary directory and moved into place only if the whole dump is valid, so a bad \
dump leaves nothing behind. An existing database is never overwritten.\n\n\
With --csv, entries are added to root collections of the existing database instead, one \
collection per file (named after it, or 'Collection'=FILE): a header of `key` and property \
names, one entry per row, references by key, states by name. Everything is checked first; the \
first problem is reported as file:line:column and nothing is imported; then all rows are written \
in one transaction.\n\n\
With --trainbenchmark, a new database of the Train Benchmark's railway schema is created from an \
official instance model: its EMF XMI file, or its CSV files by their common prefix. The CSV form \
has no containment; the importer rebuilds it from the ids as the benchmark's generator assigns \
them (docs/cli.md).\n\n\
Examples:\n\n    \
espalier --db copy.db import backup.json\n    \
espalier import --csv Customers.csv Products.csv 'Orders'=orders-2025.csv\n    \
espalier --db railway import --trainbenchmark ../shared/data/trainbenchmark/railway-repair-1.xmi\n    \
espalier --db railway import --trainbenchmark ../shared/data/trainbenchmark/railway-repair-1")]
    Import(ImportArgs),

    /// Write a consistent copy of a database, served or not, as a JSON dump.
    #[command(long_about = "Write a consistent copy of the database as a JSON dump to FILE (the \
format of `espalier export`; restore it with `espalier import`). The file is written next to FILE \
and renamed into place only when complete.\n\n\
With --server, the copy comes from a running `espalier serve` (GET /v1/backup, admin role): one \
snapshot, streamed while the server goes on serving; the dump holds every commit acknowledged \
before the backup began. A served database is locked by the server, so this is the way to back \
it up. Without --server, the database at --db is opened and copied here.\n\n\
Examples:\n\n    \
espalier backup --server 127.0.0.1:7420 nightly.json\n    \
ESPALIER_TOKEN=… espalier backup --server db.internal:7420 nightly.json\n    \
espalier --db shop.db backup shop.json")]
    Backup(BackupArgs),

    /// Change the schema of a database that holds data.
    #[command(long_about = "Change the database's schema to NEW_SCHEMA, keeping its data. The \
database is exported (one snapshot), every node is mapped to the new schema, and the result is \
imported into a new directory in one transaction that checks everything again; only then does \
the new directory replace the old one. Any refusal leaves the database as it was.\n\n\
Maps: properties and states kept by name; renamed ones (--rename OLD=NEW, repeatable); new \
properties (their kind's default: 0, \"\", the first state, empty collections); new states and \
collections. A property the new schema drops is refused if any node holds a value other than \
the default, unless --allow-loss NAME names it. Refused always: a property whose kind changes, \
a node in a state that is gone, a new reference on existing nodes.\n\n\
Examples:\n\n    \
espalier migrate shop-v2.alan\n    \
espalier migrate shop-v2.alan --rename 'Qty'='Quantity'\n    \
espalier migrate shop-v2.alan --allow-loss 'Notes'")]
    Migrate(MigrateArgs),

    /// Check the integrity of the database.
    #[command(long_about = "Read the whole database and check its integrity: records, entries, \
reverse links and interned strings agree with each other and with the schema. Prints a summary \
and every problem found. Exit status 0 if there are none, 1 otherwise.\n\n\
Example:\n\n    \
espalier check")]
    Check,

    /// Run benchmarks beside peer databases.
    #[command(subcommand)]
    Bench(BenchCommand),

    /// Serve the database over the network (WebSocket and HTTP on one port).
    #[command(long_about = "Serve the database at --db to network clients on one port: WebSocket \
sessions at /ws (pipelined requests, subscriptions with server push, JSON or MessagePack, optional \
zstd/deflate compression) and one-shot HTTP at /v1/execute, /v1/node, /v1/status, /v1/health. \
The protocol is docs/protocol.md; running and securing the server is docs/server.md.\n\n\
Without tokens the server listens on loopback only and every local client may do everything. \
With tokens (--token NAME:ROLE:SECRET or --tokens-file FILE; roles read, write, admin) every \
client must present one, and the server may listen on any address.\n\n\
Settings come from flags, ESPALIER_… environment variables and a TOML configuration file \
(--config FILE, ESPALIER_CONFIG, or ./espalier.toml if there is one), in that order of precedence, \
over the defaults; --print-config prints the effective settings and where each came from \
(docs/server.md has the table of keys, variables and flags).\n\n\
It prints `listening on ws://ADDR/ws and http://ADDR/v1/` on standard output once it accepts \
connections. Ctrl-C or SIGTERM (or an admin `shutdown` request) stops it gracefully: no new \
connections, requests in flight finish (up to --shutdown-grace-ms), the database is flushed.\n\n\
Examples:\n\n    \
espalier serve --demo                         # the demo database on 127.0.0.1:7420\n    \
espalier --db shop.db serve --port 9000\n    \
espalier serve --listen :0                    # any free port on 127.0.0.1\n    \
espalier serve --config /etc/espalier/espalier.toml --print-config\n    \
espalier serve --listen 0.0.0.0:7420 --tokens-file tokens.toml")]
    Serve(serve::ServeArgs),
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Core operations in-process beside SQLite on the same data.
    #[command(long_about = "Builds the same data in Espalier and in SQLite (file-backed, WAL, \
synchronous=OFF, matching Espalier's durability none) and times, per operation: key lookup, a \
one-property update commit, a two-hop reference navigation and a 100-entry collection query. \
Results are cross-checked (a mismatch fails the run); the report gives quartiles, p99 and the \
SQLite/Espalier ratio of medians, beside the machine's floor (memory latency, fsync).\n\n\
Examples:\n\n    \
espalier bench core --quick\n    \
espalier --json bench core > core.json")]
    #[cfg(feature = "peers")]
    Core(bench_cmd::CoreArgs),

    /// The Train Benchmark's six queries beside SQLite: batch, and re-checks after repairs.
    #[command(long_about = "Generates Train Benchmark railway models by the official generator's \
rules (size 1 is the official model of about 750 elements, size N about N times as large), loads each \
into Espalier and into SQLite (file-backed, WAL, synchronous=OFF, an index on every join column) and \
times the six queries (PosLength, SwitchMonitored, RouteSensor, SwitchSet, ConnectedSegments, \
SemaphoreNeighbor) in both: Espalier's pattern queries against SQL. Then, per query, repair rounds: \
fix a share (or, with --repair-count, a fixed number) of the matches in both systems, then re-check: \
by running the query again in both, and in Espalier also incrementally (the query is registered, and \
the repair's commit updates its matches from the change set). Every match set is cross-checked; a \
mismatch fails the run. The report gives medians, the SQLite/Espalier speedup per query, and the \
re-run/incremental ratio.\n\n\
Examples:\n\n    \
espalier bench trainbenchmark --quick\n    \
espalier bench trainbenchmark --size 1,8,32 --runs 50\n    \
espalier bench trainbenchmark --size 64 --repair-count 10\n    \
espalier --json bench trainbenchmark --scenario batch --size 64 > tb.json")]
    #[cfg(feature = "peers")]
    Trainbenchmark(bench_trainbenchmark::TrainBenchmarkArgs),

    /// OO7's traversals, queries and structural modifications beside SQLite, hot and cold.
    #[command(long_about = "Generates an OO7 database (Carey, DeWitt, Naughton 1993) by the paper's \
rules: a module with its manual and a seven-level assembly hierarchy (1 093 assemblies; each base \
assembly uses three private composite parts), a library of 500 composite parts each with a document \
and a graph of atomic parts (20 in small, 200 in medium) wired by --fanout connections each. Loads it \
into Espalier and into SQLite (file-backed, WAL, synchronous=OFF, an index on every lookup and join \
column) and times in both: the traversals T1 (raw), T6 (sparse), T2a-c and T3a-c (updating (x, y) or \
the indexed build date as they go), T8 and T9 (the manual), CU (cached update); the queries Q1 \
(lookup by id), Q2 and Q3 (1% and 10% date ranges), Q4 (path lookup from document titles), Q5 \
(single-level make), Q7 (scan), Q8 (join); and the structural insert and delete of five composite \
parts. T1 also runs as the paper's transaction variants: all runs in one read transaction (\"one\") \
and each in its own (\"many\").\n\n\
Hot runs: warm-up, then --runs timed runs, the systems alternating. Cold samples: both databases \
closed, their files dropped from the OS page cache (posix_fadvise), reopened, then one run each; \
this empties every cache of the process and, where the kernel honours the advice, the file pages, \
but not caches below the kernel (disk, VM host). Every answer is cross-checked, and the whole \
database's state after each update operation; a difference fails the run (exit 1). The report gives \
medians and the SQLite/Espalier speedup per operation and mode.\n\n\
Examples:\n\n    \
espalier bench oo7 --quick\n    \
espalier bench oo7 --size small --fanout 3 --runs 10\n    \
espalier bench oo7 --size medium --fanout 9 --runs 5 --cold 1\n    \
espalier bench oo7 --size medium --only Q8 --only Q8-coded --runs 3\n    \
espalier --json bench oo7 --size small > oo7.json")]
    #[cfg(feature = "peers")]
    Oo7(bench_oo7::Oo7Args),

    /// Seed 001's social network: the appendix's 18 queries beside SQLite, then over the
    /// server under K clients, as queries and as declared commands.
    #[command(
        long_about = "Generates the social network of Holzschuher & Peinl (2014) from a seed: 2,011 people with friends (mean 25, median 12, at least 1, at most 667, 90% under 65), 26,982 messages in inbox and sent collections, 25,365 activities, 2,000 addresses, 200 groups and 100 organisations (--size paper; tiny is 60 people, for CI). Loads it into Espalier and into SQLite and runs every query of the paper's appendix in both, one invocation at a time, the paper's number of times (2000, 200 or 20): group members, a person's groups, friend and group recommendations, friends of friends at 2 and 3 levels (not already friends), shortest path, inbox, message collections, profile, friends, activities, friends' newest activities, and the batches of ten. The three queries the paper made stored procedures also run as commands declared in the schema. Every answer is checked against SQLite's, and the counts against the generator's; a difference fails the run.\n\n\
Then, unless --no-remote, each query and command is served on a free 127.0.0.1 port and sent as one request by K = 1, 2, 4, … 64 clients (--clients), in each --encoding (msgpack, json) and for each of --compressions (none, deflate), every reply compared with the in-process result (bench remote-model's method). The report gives medians per query and system with the ratio, and per query and K the median, dispersion and throughput. Markdown on standard output (JSON with --json); box plots with --svg.\n\n\
Examples:\n\n    \
espalier bench social --quick\n    \
espalier bench social --size paper --no-remote\n    \
espalier bench social --size paper --clients 1,4,16,64 --encoding msgpack,json --svg social.svg\n    \
espalier --json bench social --query fof-3,shortest-path > social.json"
    )]
    #[cfg(feature = "peers")]
    Social(bench_social::SocialArgs),

    /// Run benchmark files: a model, an `initialize` part and `repeat` parts (suites B1–B7).
    #[command(long_about = "Runs benchmark files written in the benchmark language of the thesis \
(docs/benchmark-language.md; the suites B1-B7 of its appendix B are in benchmarks/). For each file: \
build the dataset its `initialize` part describes in a temporary database (durability none unless \
--fsync or --durability says otherwise; the same --seed gives the same data), then run every instruction of every `repeat` part \
N times after a warm-up, timing each run. The report gives per instruction: count, min, q1, median, \
q3, p99, max and mean in microseconds, the failures by error code, and per file the dataset's size \
on disk and the peak memory. Markdown on standard output (JSON with --json); --out, --markdown and \
--svg write files, each whole or not at all.\n\n\
Hot and cold: the timed runs are hot (the data file read into the page cache, then warm-up). \
--cold adds cold samples: before each, the database is closed, its file dropped from the OS page \
cache (posix_fadvise DONTNEED) and the database reopened; the report says whether the drop worked.\n\n\
Sizes: --scale multiplies the outermost collections (B7 is B6 scaled up), --nested-scale the \
nested ones, --repeat-scale the repetitions; `random N` keys scale with their collection. A benchmark whose \
`index` keys existing entries (\"once per entry\") runs at most once per entry of the scaled collection (a \
note says so); a literal key the scaled data lacks (B6's order \"5\" below --scale 0.06) is refused before \
anything is built.\n\n\
Exit status: 0 when every instruction had the outcome its file declares (success, unless `expect error` \
or `allow error` says otherwise); 2 when any had another (after the reports are written; \
--allow-unexpected makes it 0); 1 for other failures.\n\n\
Examples:\n\n    \
espalier bench run benchmarks/b1                      # every file of B1, Markdown report\n    \
espalier bench run benchmarks/b6/use_case.bench --cold --svg b6.svg\n    \
espalier bench run benchmarks/b7 --scale 7.25 --out b7.json   # about 8 GB, as in the thesis\n    \
espalier bench run benchmarks/b3 --scale 0.1 --nested-scale 0.1 --repeat-scale 0.1   # a quick look\n    \
espalier bench compare before.json after.json\n    \
espalier bench benchmarks/b1 --compare before.json       # `bench FILE` is short for `bench run FILE`")]
    Run(bench_suite::RunArgs),

    /// Put JSON reports of `bench run` side by side, with ratios of medians.
    #[command(long_about = "Reads two or more JSON reports written by `espalier bench run --out` \
(or by peers in the same format) and prints a Markdown table: the median of every instruction in \
each report and its ratio to the first report's median, matched by directory, name and mode (hot \
or cold). --svg draws the box plots of all reports side by side.\n\n\
Example:\n\n    \
espalier bench compare hdd.json ssd.json --svg compare.svg")]
    Compare(bench_suite::CompareArgs),

    /// B6 and B7 on Espalier, SQLite and PostgreSQL, loaded with the same data, cross-checked.
    #[command(long_about = "Builds the use-case data of the thesis (appendix B.6; B.7 is the same \
model, bigger) in Espalier, copies it into SQLite (file-backed, WAL) and into a PostgreSQL server \
that the command starts on a free 127.0.0.1 port and stops at the end, then runs each operation \
— search, overview_subcollection, task_start, get_big_items, many_references (B7: \
many_references, search, task_start) — on every system with the same parameters, each \
instruction translated to equivalent SQL. Every result is cross-checked: query rows must be \
equal, and after a mutation the touched node is read back from each system and compared; a \
difference fails the run. The report gives latency quartiles, p99, each peer's median over \
Espalier's, on-disk sizes and the targets of issue #3.\n\n\
The data are the benchmark files benchmarks/b6/use_case.bench and benchmarks/b7/big_use_case.bench, \
built as `espalier bench run` builds them (same --seed, --scale, --nested-scale). No system fsyncs \
on commit unless --fsync (then all do). PostgreSQL must be installed (initdb and pg_ctl on PATH \
or in /usr/lib/postgresql/*/bin); as root, the server runs as the postgres user.\n\n\
Examples:\n\n    \
espalier bench peers --suite b6\n    \
espalier bench peers --suite b7 --dir /var/tmp          # 6.1 million entries\n    \
espalier --json bench peers --suite b6 --systems espalier,sqlite --ops 200 > b6.json")]
    #[cfg(feature = "peers")]
    Peers(bench_peers::PeersArgs),

    /// The server under K concurrent clients (1, 2, 4, … 64), beside PostgreSQL's pgbench.
    #[command(long_about = "Starts an Espalier server on a free 127.0.0.1 port (in this process, in its \
own runtime) over the demo data with --rows more products and machines (and the B6 data for b6:<op> \
workloads), then, for each workload, transport, encoding and client count K: K clients, each on its \
own connection (or sharing --connections WebSocket sessions), run the workload in a closed loop for a \
warm-up and then a measured window. Every reply is checked against the reply the same request gives \
on the engine in process: the report counts failed replies (errors, broken connections) and wrong \
ones (seed 000's table 6), and after each write point checks that the machines' counters grew by \
exactly the acknowledged writes.\n\n\
Workloads: echo (ping: the same WebSocket stack minus the engine, or GET /v1/health over HTTP: the \
floor), get (one product node), query (the 100 lines of an order), command (the 'pulse' command, one \
write), update (a one-property update), b6:search, b6:overview_subcollection, b6:get_big_items, \
b6:many_references.\n\n\
PostgreSQL in the same run: a private server on 127.0.0.1 (settings paired with --durability: sync \
is fsync=on, synchronous_commit=on), pgbench -i, then pgbench select-only (-S) and a single-row \
UPDATE script at the same client counts (-c K -j min(K,2) -T seconds -M prepared, TCP). The report \
gives per point ops/s, latency min/q1/median/q3/p99/max, failed, wrong and the clients' and \
server's CPU, then ratios against PostgreSQL and against the echo floor, MessagePack against JSON, \
and issue #4's targets as met or missed. Markdown on standard output (JSON with --json); progress \
on standard error. Exit status 1 if any reply was wrong.\n\n\
Examples:\n\n    \
espalier bench remote --quick\n    \
espalier --durability none bench remote --encoding msgpack,json\n    \
espalier --durability sync bench remote --workload command,get --clients 1,16,64\n    \
espalier bench remote --transport ws,http --workload get --no-pg\n    \
espalier --json bench remote --workload b6:many_references --b6-scale 0.5 > remote.json")]
    #[cfg(feature = "peers")]
    Remote(bench_remote::RemoteArgs),

    /// Seed 000's method on model queries: the six Train Benchmark queries and the GraBaTs
    /// singleton query, one request each, under K concurrent clients.
    #[command(
        name = "remote-model",
        long_about = "Seed 000's remote method on model queries \
(Garcia-Dominguez et al., SoSyM 2017): builds the Train Benchmark's repair model (--size, 32 in the \
seed: 49,334 elements) and a generated Java model for the GraBaTs 2009 singleton query (--grabats-types; \
the contest's MoDisco models are not available here, so a seeded model of the same shape stands in), \
serves each on a free 127.0.0.1 port in this process, and sends each query as one request (a pattern \
query: the coarse-grained API) from K = 1, 2, 4, … 64 concurrent clients, which share --requests \
invocations per point (the seed's producer/consumer design, 1000) after a warm-up of a tenth.\n\n\
Before any client starts, every query's result on the engine in process is checked against an \
independent computation: the Train Benchmark's against SQL over SQLite, the singletons against \
counting the generated model; a disagreement stops the run. Every reply is then compared with that \
whole result: the report counts failed replies (errors, broken connections) and wrong ones (the \
seed's table 6 found a tool returning wrong results under load), and gives per query and K the \
median in ms and the coefficient of dispersion (the seed's tables 1–4), with throughput, quartiles \
and CPU per point. Markdown on standard output (JSON with --json); exit status 1 if any reply was \
wrong.\n\n\
Examples:\n\n    \
espalier bench remote-model --quick\n    \
espalier bench remote-model --query PosLength,singleton --clients 1,8,64\n    \
espalier bench remote-model --transport ws,http --size 32 --requests 1000\n    \
espalier --json bench remote-model --encoding msgpack,json > remote-model.json"
    )]
    #[cfg(feature = "peers")]
    RemoteModel(bench_remote_model::RemoteModelArgs),

    /// Seed 004's transactional mix: YCSB-style batches with and without transactions on
    /// Espalier's server, PostgreSQL (REPEATABLE READ) and SQLite, K = 1 … 64 clients.
    #[command(
        long_about = "Seed 004's evaluation of what transactions cost (CoherentPaaS D10.4, §3.5.3): a YCSB table (--size records of ten 100-byte fields) under batches of --ops operations — read, update, insert, scan of up to --scan records from a key, read-modify-write, in the --mix proportions (20% each) — that K clients run in a closed loop, once without transactions (each operation alone) and once with (each batch one transaction), on Espalier's server (a free 127.0.0.1 port), PostgreSQL at REPEATABLE READ (a private server) and SQLite (WAL, a connection per client). Aborted transactions are retried and counted. Every reply is checked, and after each point the table must have changed by exactly what was acknowledged. The report gives batches per second, latency quartiles, the throughput loss and latency increase of transactions (target: at most 10%) and Espalier beside its peers. Markdown on standard output (JSON with --json), --svg for a chart; exit status 1 on a wrong reply, a failed batch or a state mismatch.\n\n\
Examples:\n\n    \
espalier bench mix --quick\n    \
espalier bench mix --size 100000 --clients 1,4,16,64 --peers postgres,sqlite --svg mix.svg\n    \
espalier --durability none bench mix --peers none --mix 50,0,0,50,0\n    \
espalier --json bench mix --quick > mix.json"
    )]
    #[cfg(feature = "peers")]
    Mix(bench_mix::MixArgs),

    /// `espalier bench FILE|DIR… [OPTIONS]` is short for `espalier bench run FILE|DIR…`.
    #[command(external_subcommand)]
    File(Vec<OsString>),
}

#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Compile a schema file and summarise it, or show its errors.
    #[command(long_about = "Compile a schema file, including the bodies of its commands. On \
success print a summary (node types, records and their sizes, references, commands, indexes) \
and exit 0; on failure print each error as file:line:column with the source line and a caret \
under the offending text, and exit 1.\n\n\
Example:\n\n    \
espalier schema check demo/factory.alan")]
    Check {
        /// The schema file.
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct InitArgs {
    /// The schema file of the new database.
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Use the built-in demo schema (a small factory) and load its demo data.
    #[arg(long)]
    pub demo: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The instruction: text, JSON (starting with `{`), or `-` to read it from standard input.
    #[arg(value_name = "INSTRUCTION", required_unless_present = "file", conflicts_with = "file")]
    pub instruction: Option<String>,
    /// Run the instructions in this file, in order.
    #[arg(long, short, value_name = "F")]
    pub file: Option<PathBuf>,
    /// A parameter value, `name=value` (repeatable); the instruction refers to it as `$name`.
    #[arg(long = "param", short, value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// How to print replies.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Where to write the dump; standard output if absent.
    #[arg(conflicts_with = "csv")]
    pub file: Option<PathBuf>,
    /// Write CSV instead: one COLLECTION.csv per root collection into this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// With --csv: only this root collection (repeatable).
    #[arg(long = "collection", value_name = "NAME", requires = "csv")]
    pub collections: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The new schema.
    #[arg(value_name = "NEW_SCHEMA")]
    pub schema: PathBuf,
    /// Keep a property's or state's data under a new name: OLD=NEW (quotes optional).
    #[arg(long = "rename", value_name = "OLD=NEW")]
    pub renames: Vec<String>,
    /// Drop this property's values even where they are not the default.
    #[arg(long = "allow-loss", value_name = "NAME")]
    pub allow_loss: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Where to write the dump.
    pub file: PathBuf,
    /// Take the copy from this running server (HOST:PORT or http://HOST:PORT) instead of
    /// opening --db.
    #[arg(long, value_name = "ADDR")]
    pub server: Option<String>,
    /// The server's admin token secret (better in ESPALIER_TOKEN: flags are visible to other
    /// users of the machine).
    #[arg(long, value_name = "SECRET", env = "ESPALIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The dump to read (creates a new database).
    #[arg(required_unless_present_any = ["csv", "trainbenchmark"], conflicts_with_all = ["csv", "trainbenchmark"])]
    pub file: Option<PathBuf>,
    /// CSV files to add to the existing database, one root collection each: FILE is named
    /// after its collection (Clients.csv), or give 'Collection'=FILE. Repeatable.
    #[arg(long, value_name = "[COLLECTION=]FILE", num_args = 1.., conflicts_with = "trainbenchmark")]
    pub csv: Vec<String>,
    /// An official Train Benchmark model to create a new railway database from: its .xmi
    /// file, or the prefix of its CSV files (DIR/railway-repair-1 for
    /// DIR/railway-repair-1-Region.csv and the others).
    #[arg(long, value_name = "XMI|CSV-PREFIX")]
    pub trainbenchmark: Option<PathBuf>,
}

/// Why a subcommand did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// An instruction failed: `error[<code>]: message` (the text, if any, for a caret).
    Instruction(espalier_instruction::InstructionError, Option<String>),
    /// Anything else: the message, exit status 1.
    Other(String),
    /// Already reported; exit with this status.
    Exit(u8),
}

impl Failure {
    pub fn other(message: impl Into<String>) -> Failure {
        Failure::Other(message.into())
    }
}

impl From<espalier_instruction::InstructionError> for Failure {
    fn from(e: espalier_instruction::InstructionError) -> Failure {
        Failure::Instruction(e, None)
    }
}

/// A subcommand's exit status (0: success) as a result.
fn exit_code(status: Result<u8, String>) -> Result<(), Failure> {
    match status {
        Ok(0) => Ok(()),
        Ok(code) => Err(Failure::Exit(code)),
        Err(message) => Err(Failure::Other(message)),
    }
}

/// Parses the command line. `espalier bench FILE|DIR… [OPTIONS]` reaches clap as an unknown
/// bench subcommand (everything from FILE on, unparsed); it is parsed again as `espalier bench
/// run FILE|DIR… [OPTIONS]`, so that its options, the global ones included (`--json`, `--db`,
/// `--durability`), are read exactly as `bench run`'s, wherever they stand.
///
/// Usage errors and `--help` / `--version` are printed here; `Failure::Exit` carries the status.
fn parse(mut args: Vec<OsString>) -> Result<Cli, Failure> {
    let printed = |e: clap::Error| {
        let _ = e.print();
        // Usage errors exit 1 like every failure that is not an instruction's (clap would use 2,
        // which here means "the instruction failed").
        Failure::Exit(if e.use_stderr() { 1 } else { 0 })
    };
    let parsed = |args: &[OsString]| {
        let matches = Cli::command().try_get_matches_from(args).map_err(printed)?;
        let mut cli = Cli::from_arg_matches(&matches).map_err(printed)?;
        cli.global.db_source = matches.value_source("db");
        Ok(cli)
    };
    let cli = parsed(&args)?;
    let Some(Command::Bench(BenchCommand::File(tail))) = &cli.command else { return Ok(cli) };
    let first = tail.first().ok_or_else(|| Failure::other("no benchmark file given"))?;
    if !cfg!(feature = "peers") && PEER_COMMANDS.iter().any(|c| first == *c) {
        return Err(Failure::other(format!(
            "`espalier bench {}` runs beside SQLite or PostgreSQL, and this espalier was built without \
             their drivers (the `peers` feature, on in the default build: `cargo build --profile dist -p \
             espalier`, or README.md's install command without `--no-default-features`)",
            first.to_string_lossy()
        )));
    }
    if !std::path::Path::new(first).exists() {
        return Err(Failure::other(format!(
            "no bench command or file named {:?} (commands: core, trainbenchmark, oo7, social, run, compare, peers, remote, remote-model; \
             see `espalier bench --help`)",
            first.to_string_lossy()
        )));
    }
    // The unknown subcommand is the tail of the arguments: `run` goes in front of it.
    let at = args.len() - tail.len();
    args.insert(at, OsString::from("run"));
    parsed(&args)
}

/// The `bench` commands of the `peers` feature.
const PEER_COMMANDS: [&str; 7] = ["core", "trainbenchmark", "oo7", "social", "peers", "remote", "remote-model"];

fn main() -> ExitCode {
    let mut cli = match parse(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(Failure::Other(message)) => {
            eprintln!("error: {message}");
            return ExitCode::from(1);
        }
        Err(Failure::Exit(code)) => return ExitCode::from(code),
        Err(Failure::Instruction(..)) => unreachable!("parsing runs no instruction"),
    };
    if let Err(message) = cli.global.read_env() {
        eprintln!("error: {message}");
        return ExitCode::from(1);
    }
    let Some(command) = cli.command else {
        let mut cmd = Cli::command();
        // Printing help can only fail if stdout is closed; nothing to do about that.
        let _ = cmd.print_help();
        println!();
        return ExitCode::SUCCESS;
    };
    let g = &cli.global;
    let result = match command {
        Command::Schema(SchemaCommand::Check { file }) => schema_cmd::check(&file),
        Command::Init(args) => db::init(g, &args),
        Command::Exec(args) => exec::exec(g, &args),
        Command::Shell => shell::shell(g),
        Command::Export(args) => match &args.csv {
            Some(dir) => csv::export(g, dir, &args.collections),
            None => dump::export(g, &args),
        },
        Command::Import(args) => match (&args.file, &args.trainbenchmark) {
            (Some(file), _) => dump::import(g, file),
            #[cfg(feature = "peers")]
            (None, Some(model)) => import_trainbenchmark::import(g, model),
            #[cfg(not(feature = "peers"))]
            (None, Some(_)) => Err(Failure::other(
                "`espalier import --trainbenchmark` needs the Train Benchmark crate, and this espalier was built \
                 without it (the `peers` feature, on in the default build)",
            )),
            (None, None) => csv::import(g, &args.csv),
        },
        Command::Backup(args) => backup::run(g, &args),
        Command::Migrate(args) => migrate::run(g, &args),
        Command::Check => dump::check(g),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Core(args)) => bench_cmd::run_core(&args, g.json).map_err(Failure::Other),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Trainbenchmark(args)) => {
            bench_trainbenchmark::run_trainbenchmark(&args, g.json).map_err(Failure::Other)
        }
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Oo7(args)) => bench_oo7::run_oo7(&args, g.json).map_err(Failure::Other),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Social(args)) => bench_social::run(&args, g).map_err(Failure::Other),
        Command::Bench(BenchCommand::Run(args)) => exit_code(bench_suite::run(&args, g)),
        // `parse` made it `bench run FILE…`.
        Command::Bench(BenchCommand::File(_)) => unreachable!("bench FILE is parsed as bench run FILE"),
        Command::Bench(BenchCommand::Compare(args)) => exit_code(bench_suite::compare(&args, g.json)),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Peers(args)) => bench_peers::run(&args, g).map_err(Failure::Other),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Remote(args)) => bench_remote::run(&args, g).map_err(Failure::Other),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::RemoteModel(args)) => bench_remote_model::run(&args, g).map_err(Failure::Other),
        #[cfg(feature = "peers")]
        Command::Bench(BenchCommand::Mix(args)) => bench_mix::run(&args, g).map_err(Failure::Other),
        Command::Serve(args) => serve::serve(g, &args),
    };
    if result.is_err() {
        // A failure caused by Ctrl-C's cleanup is reported by the handler (status 130).
        espalier_bench::interrupt::settle_if_interrupted();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Instruction(e, source)) => {
            eprint!("{}", output::render_error(&e, source.as_deref()));
            ExitCode::from(2)
        }
        Err(Failure::Other(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Exit(code)) => ExitCode::from(code),
    }
}
