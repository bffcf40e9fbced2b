//! What a checked plan reads, for callers outside this crate that serve reads of their own
//! around the engine (the server's `get`, node subscriptions and query subscriptions): the
//! node a `get` reaches, and the part of the tree a collection query's result depends on.

use std::collections::HashMap;

use espalier_data::{Graph, NodePath, NodeRef, PathStep};
use espalier_schema::{PropertyKind, Schema};

use crate::plan::{Plan, PlanKind, QueryPlan, StepPlan};
use crate::run::{Bindings, Nav, ParamValue};
use crate::InstructionError;

type Result<T> = std::result::Result<T, InstructionError>;

/// The part of the tree a collection query's rows and columns depend on: a change outside it
/// cannot change the query's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryScope {
    /// The subtree of this node, and the node's own creation or removal.
    Subtree(NodePath),
    /// The entries of one collection of a node (and, within them, entries added or removed),
    /// and the node's own creation or removal.
    Collection {
        /// The node that holds the collection.
        node: NodePath,
        /// The collection's name.
        collection: String,
    },
    /// Anywhere: the query follows references, whose targets may be anywhere.
    Everything,
}

impl Plan {
    /// For a `get`: the node its path reaches in `graph`, with `params` for its `$name` keys
    /// (an error if an entry on the way is missing or a state is not selected), by the same
    /// walk as the engine's reads and writes. `None` for every other plan.
    pub fn get_node(&self, graph: Graph<'_>, params: &HashMap<String, ParamValue>) -> Option<Result<NodeRef>> {
        match &self.kind {
            PlanKind::Get { path, .. } => Some(Nav { graph }.walk(path, &mut Bindings { params, cancel: None })),
            _ => None,
        }
    }

    /// For a collection query: the part of the tree its result depends on, found in `graph`
    /// (its context node's path is walked now, with `params`). `None` for every other plan.
    pub fn query_scope(&self, graph: Graph<'_>, params: &HashMap<String, ParamValue>) -> Option<Result<QueryScope>> {
        match &self.kind {
            PlanKind::Query(q) => Some(scope(q, graph, params)),
            _ => None,
        }
    }
}

fn has_reference(steps: &[StepPlan]) -> bool {
    steps.iter().any(|s| matches!(s, StepPlan::Reference { .. }))
}

/// The subtree of the query's start node, or everything if it follows references (their
/// targets may be anywhere), narrowed by [`narrow`].
fn scope(q: &QueryPlan, graph: Graph<'_>, params: &HashMap<String, ParamValue>) -> Result<QueryScope> {
    let follows_references =
        has_reference(&q.path) || has_reference(&q.select) || q.projections.iter().any(|p| has_reference(&p.path));
    if follows_references {
        return Ok(QueryScope::Everything);
    }
    let node = Nav { graph }.walk(&q.path, &mut Bindings { params, cancel: None })?;
    Ok(narrow(graph.schema, graph.path(node)?, &q.select))
}

/// The narrowest scope of a query's rows: down the select path's group and state steps to its
/// first collection (the rows are in its entries), else the context node's subtree.
fn narrow(schema: &Schema, mut node: NodePath, select: &[StepPlan]) -> QueryScope {
    for step in select {
        match step {
            StepPlan::Group(p) => node.0.push(PathStep::Group(schema.property(*p).name.clone())),
            StepPlan::State { property, state, .. } => {
                let PropertyKind::StateGroup { states } = &schema.property(*property).kind else {
                    return QueryScope::Subtree(node);
                };
                let Some(s) = states.get(*state as usize) else { return QueryScope::Subtree(node) };
                node.0.push(PathStep::State {
                    stategroup: schema.property(*property).name.clone(),
                    state: s.name.clone(),
                });
            }
            StepPlan::Entry { property, .. } => {
                return QueryScope::Collection { node, collection: schema.property(*property).name.clone() };
            }
            StepPlan::Reference { .. } => return QueryScope::Everything,
        }
    }
    QueryScope::Subtree(node)
}
