//! The queries in Espalier, in process: each instruction checked once, run as often as the
//! benchmark asks; and each reply put in the form SQLite's answer has ([`Answer`]).

use std::collections::HashMap;

use espalier_instruction::parse::ParseOptions;
use espalier_instruction::plan::Plan;
use espalier_instruction::{parse_instruction, Engine, InstructionError, QueryResult, Reply};
use serde_json::{json, Value};

use crate::model::{person_key, Network};
use crate::queries::{command_text, Draw, Query};
use crate::Answer;

/// A query that failed or answered something malformed in Espalier.
#[derive(Debug, thiserror::Error)]
pub enum EspalierError {
    /// Checking or running the instruction failed.
    #[error("{query}: {source}")]
    Instruction {
        /// The query's name.
        query: &'static str,
        /// What failed.
        #[source]
        source: InstructionError,
    },
    /// The instruction did not parse.
    #[error("{query}: {source}")]
    Parse {
        /// The query's name.
        query: &'static str,
        /// The parse error.
        #[source]
        source: espalier_instruction::ParseError,
    },
    /// A reply of the wrong shape, or a path that is not a chain of friendships.
    #[error("{query}: {message}")]
    Reply {
        /// The query's name.
        query: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

type Result<T> = std::result::Result<T, EspalierError>;

/// How a query is sent: as its instruction, or as the command declared for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// The pattern query (or transaction of them) itself.
    Query,
    /// `command 'Name' ( 'person' -> $person )`.
    Command,
}

/// A social database in Espalier with every query checked.
pub struct SocialEspalier {
    engine: Engine,
    plans: HashMap<(Query, Via), Plan>,
}

impl SocialEspalier {
    /// Wraps an engine holding a social network; checks every query and command call once.
    pub fn new(engine: Engine) -> Result<SocialEspalier> {
        let mut plans = HashMap::new();
        for q in Query::ALL {
            let mut texts = vec![(Via::Query, q.text())];
            if let Some(name) = q.command() {
                texts.push((Via::Command, command_text(name)));
            }
            for (via, text) in texts {
                let instr = parse_instruction(&text, ParseOptions::CLIENT)
                    .map_err(|source| EspalierError::Parse { query: q.name(), source })?;
                let plan = engine
                    .check(&instr, Some(&text))
                    .map_err(|source| EspalierError::Instruction { query: q.name(), source })?;
                plans.insert((q, via), plan);
            }
        }
        Ok(SocialEspalier { engine, plans })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Gives the engine back (to serve or close the database).
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    /// Runs `q` for `d` as `via` says: Espalier's whole reply.
    pub fn run(&self, q: Query, via: Via, d: &Draw) -> Result<Reply> {
        let plan = self
            .plans
            .get(&(q, via))
            .ok_or_else(|| EspalierError::Reply { query: q.name(), message: "has no declared command".into() })?;
        self.engine
            .run(plan, &q.params(d), None)
            .map_err(|source| EspalierError::Instruction { query: q.name(), source })
    }
}

/// The query results of a reply: one for a query, one per member for a transaction.
pub fn results(q: Query, reply: Reply) -> Result<Vec<QueryResult>> {
    match reply {
        Reply::Query(r) => Ok(vec![r]),
        Reply::Transaction(list) => list
            .into_iter()
            .map(|r| match r {
                Reply::Query(r) => Ok(r),
                other => Err(EspalierError::Reply { query: q.name(), message: format!("a member answered {other:?}") }),
            })
            .collect(),
        other => Err(EspalierError::Reply { query: q.name(), message: format!("expected rows, got {other:?}") }),
    }
}

/// The answer in the form SQLite's has: rows and totals as they are, except the shortest
/// path, which becomes its number of hops once every hop is checked to be a friendship of
/// `net` from the person asked about to the other (SQL computes the distance).
pub fn answer(q: Query, d: &Draw, results: &[QueryResult], net: &Network) -> Result<Answer> {
    let mut a = Answer::default();
    for r in results {
        a.total += r.total;
        a.rows.extend(r.rows.iter().map(|row| row.values.clone()));
    }
    if q == Query::ShortestPath {
        a.rows = a.rows.iter().map(|row| hops(row, d, net).map(|n| vec![json!(n)])).collect::<Result<_>>()?;
    }
    Ok(a)
}

/// The number of hops of a path row, checked against the network.
fn hops(row: &[Value], d: &Draw, net: &Network) -> Result<usize> {
    let bad = |message: String| EspalierError::Reply { query: Query::ShortestPath.name(), message };
    let path = row.first().and_then(Value::as_array).ok_or_else(|| bad(format!("not a path: {row:?}")))?;
    let index: HashMap<String, usize> = path
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|k| k.strip_prefix('p').and_then(|n| n.parse().ok()).map(|n| (k.to_string(), n)))
        .collect();
    let ids: Vec<usize> = path
        .iter()
        .map(|v| v.as_str().and_then(|k| index.get(k).copied()).ok_or_else(|| bad(format!("not a person: {v}"))))
        .collect::<Result<_>>()?;
    if ids.first() != Some(&d.person) || ids.last() != Some(&d.other) {
        return Err(bad(format!(
            "the path {path:?} does not go from {} to {}",
            person_key(d.person),
            person_key(d.other)
        )));
    }
    for hop in ids.windows(2) {
        let (a, b) = (hop[0], hop[1]);
        if net.people.get(a).is_none_or(|p| p.friends.binary_search(&b).is_err()) {
            return Err(bad(format!("{} and {} are not friends", person_key(a), person_key(b))));
        }
    }
    Ok(ids.len().saturating_sub(1))
}
