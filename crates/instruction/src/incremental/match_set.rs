//! The matches a registered query keeps: each match's nodes and row under a small id, and per
//! top variable the ids of the matches that bind each node.
//!
//! Why ids. A refresh looks up every match a seed binds, and settles each one it finds again;
//! keyed by their nodes (a vector each), those sets cloned, hashed and compared vectors (a
//! third of a SwitchSet refresh). By id, only the lookup of a found match hashes its nodes.

use std::collections::hash_map::Entry;

use espalier_data::{NodeId, NodeRef};

use crate::run::pattern::fast_hash::{FastMap, FastSet};

/// A match is its top variables' nodes, in `MatchPlan::top` order.
pub(super) type MatchKey = Vec<NodeRef>;

/// A match's place in the set; a freed place is reused.
pub(super) type MatchId = usize;

/// The matches, their rows and the index from nodes to matches.
#[derive(Debug)]
pub(super) struct MatchSet {
    /// By id: the match's nodes and row; `None` where a match went.
    slots: Vec<Option<(MatchKey, Vec<serde_json::Value>)>>,
    /// Ids of the `None` slots.
    free: Vec<MatchId>,
    /// The id of each match by its nodes.
    ids: FastMap<MatchKey, MatchId>,
    /// Per top variable: node record id → the matches binding it there.
    by_var: Vec<FastMap<NodeId, FastSet<MatchId>>>,
}

impl MatchSet {
    /// No matches, for a plan with `tops` top variables.
    pub(super) fn new(tops: usize) -> MatchSet {
        MatchSet {
            slots: Vec::new(),
            free: Vec::new(),
            ids: FastMap::default(),
            by_var: vec![FastMap::default(); tops],
        }
    }

    /// How many matches there are.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Every match's id.
    pub(super) fn all(&self) -> Vec<MatchId> {
        self.ids.values().copied().collect()
    }

    /// Every match's row, in no particular order.
    pub(super) fn rows(&self) -> impl Iterator<Item = &[serde_json::Value]> + '_ {
        self.slots.iter().flatten().map(|(_, row)| row.as_slice())
    }

    /// The id of the match with these nodes.
    pub(super) fn id_of(&self, key: &MatchKey) -> Option<MatchId> {
        self.ids.get(key).copied()
    }

    /// Whether a match binds top variable `top` to node `id`.
    pub(super) fn binds(&self, top: usize, id: NodeId) -> bool {
        self.by_var[top].contains_key(&id)
    }

    /// The matches binding top variable `top` to node `id`.
    pub(super) fn bound(&self, top: usize, id: NodeId) -> impl Iterator<Item = MatchId> + '_ {
        self.by_var[top].get(&id).into_iter().flatten().copied()
    }

    /// The nodes of match `id` (one that is in the set).
    pub(super) fn key(&self, id: MatchId) -> &MatchKey {
        &self.slot(id).0
    }

    /// The row of match `id` (one that is in the set).
    pub(super) fn row(&self, id: MatchId) -> &[serde_json::Value] {
        &self.slot(id).1
    }

    fn slot(&self, id: MatchId) -> &(MatchKey, Vec<serde_json::Value>) {
        self.slots[id].as_ref().expect("an id given out and not yet removed")
    }

    /// Adds a match that is not in the set; its id.
    pub(super) fn insert(&mut self, key: MatchKey, row: Vec<serde_json::Value>) -> MatchId {
        debug_assert!(!self.ids.contains_key(&key), "a match is added once");
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        for (top, node) in key.iter().enumerate() {
            self.by_var[top].entry(node.id).or_default().insert(id);
        }
        self.ids.insert(key.clone(), id);
        self.slots[id] = Some((key, row));
        id
    }

    /// Gives match `id` a new row; the old one.
    pub(super) fn replace_row(&mut self, id: MatchId, row: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
        let slot = self.slots[id].as_mut().expect("an id given out and not yet removed");
        std::mem::replace(&mut slot.1, row)
    }

    /// Removes match `id`; its nodes and row.
    pub(super) fn remove(&mut self, id: MatchId) -> (MatchKey, Vec<serde_json::Value>) {
        let (key, row) = self.slots[id].take().expect("an id given out and not yet removed");
        self.free.push(id);
        self.ids.remove(&key);
        for (top, node) in key.iter().enumerate() {
            // One lookup for the node, whether its set empties or not.
            if let Entry::Occupied(mut bound) = self.by_var[top].entry(node.id) {
                bound.get_mut().remove(&id);
                if bound.get().is_empty() {
                    bound.remove();
                }
            }
        }
        (key, row)
    }
}

#[cfg(test)]
mod tests {
    use espalier_data::{NodeId, NodeRef};
    use espalier_schema::NodeTypeId;
    use serde_json::json;

    use super::MatchSet;

    fn node(row: u32) -> NodeRef {
        let ty = NodeTypeId::new(1);
        NodeRef { id: NodeId::new(ty, row), ty }
    }

    #[test]
    fn a_match_is_found_by_its_nodes_and_by_each_node_it_binds() {
        let mut set = MatchSet::new(2);
        let a = set.insert(vec![node(1), node(10)], vec![json!(1)]);
        let b = set.insert(vec![node(1), node(11)], vec![json!(2)]);
        assert_eq!(set.len(), 2);
        assert_eq!(set.id_of(&vec![node(1), node(11)]), Some(b));
        let mut bound: Vec<_> = set.bound(0, node(1).id).collect();
        bound.sort_unstable();
        assert_eq!(bound, [a, b]);
        assert_eq!(set.bound(1, node(10).id).collect::<Vec<_>>(), [a]);
        assert!(!set.binds(1, node(1).id), "a node binds only the variables it was matched to");
        assert_eq!(set.key(b), &vec![node(1), node(11)]);
        assert_eq!(set.replace_row(b, vec![json!(3)]), vec![json!(2)]);
        assert_eq!(set.row(b), [json!(3)]);
    }

    #[test]
    fn a_removed_match_leaves_no_trace_and_its_id_is_reused() {
        let mut set = MatchSet::new(2);
        let a = set.insert(vec![node(1), node(10)], vec![json!(1)]);
        let b = set.insert(vec![node(2), node(10)], vec![json!(2)]);
        assert_eq!(set.remove(a), (vec![node(1), node(10)], vec![json!(1)]));
        assert_eq!(set.len(), 1);
        assert_eq!(set.id_of(&vec![node(1), node(10)]), None);
        assert!(!set.binds(0, node(1).id), "a node no match binds is forgotten");
        assert_eq!(set.bound(1, node(10).id).collect::<Vec<_>>(), [b], "the other match still binds the shared node");
        assert_eq!(set.all(), [b]);
        let c = set.insert(vec![node(3), node(12)], vec![json!(3)]);
        assert_eq!(c, a, "a freed slot is given out again");
        let mut rows: Vec<_> = set.rows().map(<[_]>::to_vec).collect();
        rows.sort_by_key(|r| r[0].as_i64());
        assert_eq!(rows, [vec![json!(2)], vec![json!(3)]]);
    }
}
