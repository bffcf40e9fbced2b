//! The queries over the server (the paper's §4–7): each query, and each of the three
//! declared commands (`cmd:<query>`), is a workload of `espalier bench remote-model`'s
//! method (`espalier_bench::remote::model`): K clients, one request per invocation, every
//! reply compared with the engine's in-process result — which is itself checked here against
//! SQLite before any client starts. The pools, with SQLite's answers, are also what Neo4j over
//! Bolt is sent and checked against ([`crate::bolt`]).

use espalier_bench::remote::model::{ModelDatabase, ModelWorkload};
use espalier_bench::remote::RemoteError;
use espalier_instruction::Engine;
use espalier_protocol::Params;
use rusqlite::Connection;

use crate::bench::draw_seed;
use crate::espalier::{answer, results, SocialEspalier, Via};
use crate::model::Network;
use crate::queries::{command_text, draws, Draw, Query};
use crate::sqlite::SocialSqlite;
use crate::Answer;

/// Distinct invocations per workload that the clients pick among, unless told otherwise.
pub const POOL: usize = 64;

/// Most distinct invocations per workload: each is run in process and held with its reply.
pub const MAX_POOL: usize = 100_000;

/// The prefix of a declared command's workload name.
pub const COMMAND_PREFIX: &str = "cmd:";

/// A query's pool: the invocations the clients pick among, each with SQLite's answer, which
/// Espalier's in-process answer equals.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The query.
    pub query: Query,
    /// Its draws, in the order of the workload's operations.
    pub draws: Vec<Draw>,
    /// SQLite's answer to each draw.
    pub answers: Vec<Answer>,
}

/// The workloads of `queries` on `engine`'s network `net` (also in `sqlite`): `pool` draws
/// each, every in-process answer checked against SQLite. Gives the engine back inside the
/// database to serve, and each query's pool with SQLite's answers.
pub fn database(
    espalier: SocialEspalier,
    net: &Network,
    sqlite: &Connection,
    queries: &[Query],
    pool: usize,
    seed: u64,
) -> Result<(ModelDatabase, Vec<Pool>), RemoteError> {
    if pool > MAX_POOL {
        return Err(RemoteError::Invalid(format!("--pool: {pool} is more than {MAX_POOL}")));
    }
    let mut theirs = SocialSqlite::new(sqlite).map_err(|e| RemoteError::Invalid(e.to_string()))?;
    let mut workloads = Vec::new();
    let mut pools = Vec::with_capacity(queries.len());
    for &q in queries {
        // Other draws than the in-process run's: the pool is checked here on its own.
        let pool_draws = draws(net, pool.max(1), draw_seed(seed, q).rotate_left(17));
        let mut vias = vec![Via::Query];
        if q.command().is_some() {
            vias.push(Via::Command);
        }
        let mut answers = Vec::with_capacity(pool_draws.len());
        for d in &pool_draws {
            let want = theirs.run(q, d).map_err(|e| RemoteError::Invalid(e.to_string()))?;
            for &via in &vias {
                let reply = espalier.run(q, via, d).map_err(|e| RemoteError::Invalid(e.to_string()))?;
                let got = results(q, reply)
                    .and_then(|r| answer(q, d, &r, net))
                    .map_err(|e| RemoteError::Invalid(e.to_string()))?;
                if got != want {
                    return Err(RemoteError::Invalid(format!(
                        "{} for {d:?}: Espalier answers {} rows in process, SQLite {}; not run",
                        q.name(),
                        got.rows.len(),
                        want.rows.len()
                    )));
                }
            }
            answers.push(want);
        }
        let calls: Vec<Params> = pool_draws.iter().map(|d| q.params(d).into_iter().collect()).collect();
        let engine: &Engine = espalier.engine();
        workloads.push(ModelWorkload::new(engine, q.name(), &q.text(), calls.clone())?);
        if let Some(name) = q.command() {
            let label = format!("{COMMAND_PREFIX}{}", q.name());
            workloads.push(ModelWorkload::new(engine, &label, &command_text(name), calls)?);
        }
        pools.push(Pool { query: q, draws: pool_draws, answers });
    }
    let database = ModelDatabase {
        name: format!("social network ({} people)", net.people.len()),
        engine: espalier.into_engine(),
        queries: workloads,
    };
    Ok((database, pools))
}
