//! `espalier bench remote-model`: seed 000's remote method on model queries (Garcia-Dominguez
//! et al., §3.2, §4): each query is one request over the server (the coarse-grained API), sent
//! by K = 1, 2, 4, … 64 concurrent clients; with `--requests N` the clients share N
//! invocations (the seed's producer/consumer design: 1000), and the report gives each query's
//! median and coefficient of dispersion per K, and counts failed and **wrong** replies.
//!
//! Every reply is compared with the whole result the engine gives in process; and before the
//! run, that in-process result is checked against an independent count: the Train Benchmark's
//! queries against SQL over SQLite (done by the caller, which has the Train Benchmark crate),
//! the GraBaTs singletons against counting the generated model ([`super::grabats`]).

use std::collections::HashMap;
use std::time::Instant;

use espalier_instruction::{Engine, QueryResult, Reply};
use espalier_protocol::Params;

use super::data::{Call, DatasetKind, Expect, Operation, Prepared, ServedDatabase, Step};
use super::{bar, driver, load_average, machine, measure, Config, RemoteError, Report, Workload};

/// Most queries one database may carry.
pub const MAX_QUERIES: usize = 64;

/// A query of a model database, with the result every reply must equal.
#[derive(Debug, Clone)]
pub struct ModelQuery {
    /// The workload's name in the report: `tb:PosLength`, `grabats:singleton`, ….
    pub name: String,
    /// The instruction sent, one request per invocation.
    pub text: String,
    /// The whole result the engine gives in process.
    pub expected: QueryResult,
}

impl ModelQuery {
    /// Runs `text` on `engine` in process for the result the replies must equal.
    pub fn new(engine: &Engine, name: &str, text: &str) -> Result<ModelQuery, RemoteError> {
        let reply = engine.execute_text(text, &HashMap::new()).map_err(|e| RemoteError::espalier(name, e))?;
        let Reply::Query(expected) = reply else {
            return Err(RemoteError::Invalid(format!("{name}: expected rows, got {reply:?}")));
        };
        Ok(ModelQuery { name: name.to_string(), text: text.to_string(), expected })
    }
}

/// A workload of a model database: requests with parameters, each with the reply the engine
/// gives in process; the clients pick among them at random.
#[derive(Debug, Clone)]
pub struct ModelWorkload {
    /// The workload's name in the report.
    pub name: String,
    /// Its operations, one request each.
    pub ops: Vec<Operation>,
}

impl From<ModelQuery> for ModelWorkload {
    fn from(q: ModelQuery) -> ModelWorkload {
        let step =
            Step { call: Call::Execute { text: q.text, params: Params::new() }, expect: Expect::Rows(q.expected) };
        ModelWorkload { name: q.name, ops: vec![Operation { steps: vec![step] }] }
    }
}

impl ModelWorkload {
    /// `text` with each of `calls`' parameter values, each run on `engine` in process for the
    /// reply the server's must equal: rows, or a transaction's rows member by member.
    pub fn new(engine: &Engine, name: &str, text: &str, calls: Vec<Params>) -> Result<ModelWorkload, RemoteError> {
        let mut ops = Vec::with_capacity(calls.len());
        for params in calls {
            let values: HashMap<_, _> = params.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let reply = engine.execute_text(text, &values).map_err(|e| RemoteError::espalier(name, e))?;
            let expect = match reply {
                Reply::Query(q) => Expect::Rows(q),
                Reply::Transaction(list) => Expect::Replies(
                    list.into_iter()
                        .map(|r| match r {
                            Reply::Query(q) => Ok(q),
                            other => Err(RemoteError::Invalid(format!("{name}: a member answered {other:?}"))),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                other => return Err(RemoteError::Invalid(format!("{name}: expected rows, got {other:?}"))),
            };
            ops.push(Operation {
                steps: vec![Step { call: Call::Execute { text: text.to_string(), params }, expect }],
            });
        }
        if ops.is_empty() {
            return Err(RemoteError::Invalid(format!("{name}: no invocations")));
        }
        Ok(ModelWorkload { name: name.to_string(), ops })
    }
}

/// A database built by the caller and the workloads to run on it.
pub struct ModelDatabase {
    /// The data set's name, for progress messages: `trainbenchmark`, `grabats`.
    pub name: String,
    /// The database, built and checked.
    pub engine: Engine,
    /// Its queries.
    pub queries: Vec<ModelWorkload>,
}

/// Serves each database in turn and measures each of its queries at every client count,
/// transport and encoding of `config` (its `workloads` are replaced by the queries'; no
/// PostgreSQL runs). Fails only when something cannot be started; wrong replies are counted in
/// the report.
pub fn run(config: &Config, databases: Vec<ModelDatabase>) -> Result<Report, RemoteError> {
    let mut config = config.clone();
    config.postgres = false;
    config.workloads =
        databases.iter().flat_map(|d| d.queries.iter().map(|q| Workload::Model(q.name.clone()))).collect();
    config.validate()?;
    for d in &databases {
        if d.queries.len() > MAX_QUERIES {
            return Err(RemoteError::Invalid(format!("{}: more than {MAX_QUERIES} queries", d.name)));
        }
    }
    let started = Instant::now();
    let total = (config.workloads.len() * config.variants().len() * config.clients.len()) as u64;
    let pb = bar(config.progress, total);
    let load_before = load_average();
    let client_rt = driver::client_runtime(config.client_threads)?;
    let mut points = Vec::new();
    let mut verifications = Vec::new();
    for database in databases {
        pb.set_message(format!("serving the {} data", database.name));
        let server = ServedDatabase::serve(DatasetKind::Model, database.engine, &config)?;
        for query in database.queries {
            let workload = Workload::Model(query.name);
            let prepared = Prepared { ops: query.ops }.for_config(&config);
            let (p, v) = measure(&server, &workload, &prepared, &config, &client_rt, &pb)?;
            points.extend(p);
            verifications.extend(v);
        }
        server.stop()?;
    }
    drop(client_rt);
    pb.finish_and_clear();
    let versions = vec![("espalier".to_string(), format!("espalier {}", env!("CARGO_PKG_VERSION")))];
    let machine = machine(started, load_before, versions, Vec::new());
    Ok(Report::new(config, machine, points, Vec::new(), verifications))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{grabats, Stop};
    use espalier_transaction::{DatabaseOptions, Durability};

    fn database(dir: &std::path::Path) -> ModelDatabase {
        let model = grabats::Model::generate(100, 3).unwrap();
        let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
        let engine = Engine::create(dir, grabats::SCHEMA, options).unwrap();
        model.fill(&engine, &mut |_| {}).unwrap();
        let query = ModelQuery::new(&engine, "grabats:singleton", grabats::QUERY).unwrap();
        assert_eq!(query.expected.total, model.singletons() as u64);
        ModelDatabase { name: "grabats".into(), engine, queries: vec![query.into()] }
    }

    #[test]
    fn every_reply_is_checked_and_a_wrong_one_is_counted() {
        let mut config = Config::quick();
        config.clients = vec![1, 3];
        config.stop = Stop::Requests(12);
        config.progress = false;
        let dir = tempfile::tempdir().unwrap();
        let report = run(&config, vec![database(&dir.path().join("right"))]).unwrap();
        assert_eq!(report.points.len(), 2);
        assert!(report.points.iter().all(|p| p.workload == "grabats:singleton" && p.operations == 12));
        assert_eq!((report.wrong(), report.failed()), (0, 0));
        let markdown = report.to_markdown();
        assert!(markdown.contains("| grabats:singleton | "), "{markdown}");
        assert!(markdown.contains("coefficient of dispersion"), "{markdown}");
        assert_eq!(report.targets.len(), 1, "a model run has only the wrong-reply target");

        config.corrupt_expected = true;
        let report = run(&config, vec![database(&dir.path().join("wrong"))]).unwrap();
        let checked: u64 = report.points.iter().map(|p| p.checked).sum();
        assert!(checked >= 24);
        assert_eq!(report.wrong(), checked, "every reply differs from the altered result");
    }
}
