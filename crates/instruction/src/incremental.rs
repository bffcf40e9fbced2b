//! Incremental results: a registered pattern query keeps its matches, and after each commit
//! updates them from what the commit touched instead of running again.
//!
//! Why it is right. The executor learns everything from records, and what the commit did not
//! touch reads the same after it (the invariant of [`Touched`], kept per property: a record
//! whose `'Price'` was written reads the same in every other slot). So a match that a commit
//! ends or begins reads, on one of the paths its evaluation follows from a variable, something
//! touched: a property of a record, its entries of a collection, or the links into it; take
//! the first such read on that path. The steps before it read nothing touched, so they are
//! the same after the commit, and walking the path backwards from that record gets back to
//! the variable's node. Each such (variable, node) is a *seed*: the query runs again with
//! that variable bound first (a plan made at registration), and what it gives replaces the
//! seed's old matches. A record created is new in every property; a record deleted can only
//! end matches that bind it (its neighbours on a path were touched too: the holder lost an
//! entry, the referrer lost its target), and those are found by node.
//!
//! A collection that gained or lost an entry is touched as a collection (its owner's entry
//! count is no property a query reads). A path reads it where a step goes into the owner's
//! entries, and a seed comes from walking back from the owner as above. Where one
//! matrix step joins two top variables (`b in a > 'M'`, `a > 'M' == b`, or backwards), the
//! entry added or removed changes only the matches that bind `a` to its owner and `b` to its
//! target: that pair is the seed, evaluated with both bound (a plan made for the pair).
//!
//! Reads that a path does not describe — inside `exists ( … )`, inside or after a `repeat`,
//! along a shortest path, or a root path with links — make a commit that touches a record of
//! such a type run the query again whole (still right, not incremental).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use espalier_data::{Graph, NodeId, NodeRef, QueryDiff, Touched};
use espalier_schema::{NodeTypeId, PropertyId, Schema};
use espalier_transaction::Database;

use crate::plan::{
    reverse, Anchor, Block, MatchColumn, MatchCondition, MatchOp, MatchPlan, MatchStep, MatchStepKind, MatchTerm,
    MatchVar, UpFrom,
};
use crate::run::pattern::fast_hash::{FastMap, FastSet};
use crate::run::pattern::{Found, Matcher};
use crate::run::{Bindings, QueryResult, Row, MAX_PATTERN_ROWS};
use crate::{InstructionError, ParamValue};

type Result<T> = std::result::Result<T, InstructionError>;

/// Most queries registered at once on one database (each costs every commit some work).
pub const MAX_REGISTERED: usize = 1024;

mod match_set;

use match_set::{MatchId, MatchKey, MatchSet};

/// A way from a touched record back to a top variable: a node of type `ty` (in a record of
/// type `record`) on a path of variable `top`, and the steps from it back to the variable.
#[derive(Debug, Clone)]
struct Route {
    record: NodeTypeId,
    ty: NodeTypeId,
    top: usize,
    steps: Vec<MatchStep>,
    reads: Read,
}

/// What the path reads of a node on it: the step after it reads one property of its record
/// (a state, a reference; at the end of a term the term's property), or the links into it
/// along one reference or matrix (a step backwards), or its entries of one collection (a
/// step into them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Read {
    Slot(PropertyId),
    Links(PropertyId),
    Entries(PropertyId),
}

/// Two top variables joined by one step along matrix `property`: `owner` binds the node
/// holding the matrix, `target` the entry's target; `block` is their plan in
/// `MatchPlan::paired`.
#[derive(Debug, Clone, Copy)]
struct Pair {
    property: PropertyId,
    owner: usize,
    target: usize,
    block: usize,
}

/// What the paths of a plan read, found once at registration.
#[derive(Debug, Default)]
struct ReadMap {
    /// From nodes on a path back to its top variable.
    routes: Vec<Route>,
    /// Per top variable: what the first step of a path from it (or a term on it) reads of
    /// its own node (pairs aside).
    first: Vec<BTreeSet<Read>>,
    /// Top variables joined by one matrix step, with a plan for both bound.
    pairs: Vec<Pair>,
}

/// What to evaluate again after a commit: the matches binding one top variable (by its
/// position in `MatchPlan::top`) to a node, or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seed {
    One(usize, NodeId),
    /// (top, node), (top, node), and the pair's block.
    Two((usize, NodeId), (usize, NodeId), usize),
}

/// A registered query with its current matches.
#[derive(Debug)]
pub struct Registered {
    plan: MatchPlan,
    params: HashMap<String, ParamValue>,
    reads: ReadMap,
    /// Per top variable: the record type its nodes live in.
    var_records: Vec<NodeTypeId>,
    /// Record types whose touch makes the query run again whole.
    opaque: HashSet<NodeTypeId>,
    matches: MatchSet,
    /// With `distinct`: each row (keyed by its JSON text) and how many matches give it.
    distinct: Option<HashMap<String, (Vec<serde_json::Value>, usize)>>,
    /// The commit the matches are those of.
    version: u64,
    /// How the last commit's refresh went, and how long it took.
    last: Option<(std::time::Duration, RefreshStats)>,
}

/// What one refresh changed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RowChanges {
    /// Rows that are no longer in the result.
    pub removed: Vec<Vec<serde_json::Value>>,
    /// Rows that are new in the result.
    pub added: Vec<Vec<serde_json::Value>>,
}

impl RowChanges {
    /// Whether the refresh changed no row.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

/// Where a changed row goes among one refresh's changes, so that they come in an order that
/// does not depend on hashing: by its match's nodes, or with `distinct` (where a row is no one
/// match) by its JSON text, which that mode keeps anyway.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Match(MatchKey),
    Text(String),
}

/// The changes while a refresh makes them, each with its place.
#[derive(Debug, Default)]
struct Changing {
    removed: Vec<(Place, Vec<serde_json::Value>)>,
    added: Vec<(Place, Vec<serde_json::Value>)>,
}

impl Changing {
    fn into_sorted(mut self) -> RowChanges {
        // Stable: with `distinct` a row can leave and come back more than once in a commit.
        self.removed.sort_by(|a, b| a.0.cmp(&b.0));
        self.added.sort_by(|a, b| a.0.cmp(&b.0));
        RowChanges {
            removed: self.removed.into_iter().map(|(_, row)| row).collect(),
            added: self.added.into_iter().map(|(_, row)| row).collect(),
        }
    }
}

/// How a refresh went about it (for tests and the benchmark).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RefreshStats {
    /// How many places the query was evaluated again at (0 when run whole).
    pub seeds: usize,
    /// Whether the query was run again whole instead.
    pub whole: bool,
}

impl Registered {
    /// A checked pattern plan (from [`crate::plan::Checker::check_registered`]) that keeps a
    /// set of matches: no grouping, order, paging or explain.
    pub(crate) fn new(plan: MatchPlan, params: HashMap<String, ParamValue>, schema: &Schema) -> Result<Registered> {
        let refuse = |what: &str| {
            Err(InstructionError::value(format!(
                "a registered query keeps a set of matches and sends their changes, so it cannot {what}; \
                 register the plain match and group, order or page its rows where they arrive"
            )))
        };
        if plan.grouped {
            return refuse("aggregate (count, sum, min, max, avg)");
        }
        if !plan.order.is_empty() {
            return refuse("order its rows (`order by`)");
        }
        if plan.limit.is_some() || plan.offset > 0 {
            return refuse("page its rows (`limit`, `offset`)");
        }
        if plan.explain {
            return refuse("explain its plan");
        }
        assert_eq!(plan.seeded.len(), plan.top.len(), "registered plans are planned once per top variable");
        let mut reads = Reads {
            schema,
            vars: &plan.vars,
            paired: &plan.paired,
            map: ReadMap { first: vec![BTreeSet::new(); plan.top.len()], ..ReadMap::default() },
            opaque: BTreeSet::new(),
            all: false,
        };
        let position = |v: usize| plan.top.iter().position(|&t| t == v);
        reads.block(&plan.block, &position);
        for col in &plan.columns {
            match col {
                MatchColumn::Term(t) => reads.term(t, &position),
                MatchColumn::Shortest { body, .. } => reads.opaque_steps(body),
                _ => unreachable!("refused above: aggregates"),
            }
        }
        let var_records = plan
            .top
            .iter()
            .map(|&v| schema.record_of(plan.vars[v].ty).expect("checked: variables bind nodes that store something"))
            .collect();
        let opaque = reads.opaque.iter().filter_map(|&t| schema.record_of(t)).collect();
        let reads = reads.map;
        Ok(Registered {
            matches: MatchSet::new(plan.top.len()),
            distinct: plan.distinct.then(HashMap::new),
            plan,
            params,
            reads,
            var_records,
            opaque,
            version: 0,
            last: None,
        })
    }

    /// The version of the commit the matches are those of.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The last commit's refresh: how long it took and what it did.
    pub fn last_refresh(&self) -> Option<(std::time::Duration, RefreshStats)> {
        self.last
    }

    /// The column names of the rows.
    pub fn columns(&self) -> &[String] {
        &self.plan.aliases
    }

    /// How many matches there are now.
    pub fn len(&self) -> usize {
        self.matches.len()
    }

    /// Whether there are no matches.
    pub fn is_empty(&self) -> bool {
        self.matches.len() == 0
    }

    /// The rows now (one per match, or per distinct row), in no particular order.
    pub fn result(&self) -> QueryResult {
        let rows: Vec<Vec<serde_json::Value>> = self.rows().map(<[serde_json::Value]>::to_vec).collect();
        QueryResult {
            total: rows.len() as u64,
            columns: self.plan.aliases.clone(),
            rows: rows.into_iter().map(|values| Row { key: Vec::new(), values }).collect(),
        }
    }

    /// The rows of [`Registered::result`], in its order, borrowed: reading a large result
    /// (through [`Registry::with`]) copies nothing.
    pub fn rows(&self) -> impl Iterator<Item = &[serde_json::Value]> + '_ {
        let (distinct, matches) = match &self.distinct {
            Some(counts) => (Some(counts.values().map(|(row, _)| row.as_slice())), None),
            None => (None, Some(self.matches.rows())),
        };
        distinct.into_iter().flatten().chain(matches.into_iter().flatten())
    }

    /// Finds every match afresh (at registration, and when a commit touched what paths do
    /// not describe); the changes from the matches before.
    pub fn load(&mut self, graph: Graph<'_>, version: u64) -> Result<RowChanges> {
        let found = {
            let mut b = Bindings { params: &self.params, cancel: None };
            let m = Matcher::new(graph, &self.plan, &mut b)?;
            collect(&m, &self.plan.block, &[])?
        };
        let mut changes = Changing::default();
        let old = self.matches.all();
        self.settle(old, found, &mut changes);
        self.version = version;
        Ok(changes.into_sorted())
    }

    /// Replaces the matches `old` with `found` (those of `old` found again stay): first the
    /// matches that went, then those that came or changed.
    fn settle(&mut self, old: Vec<MatchId>, found: Vec<Found>, changes: &mut Changing) {
        let known: Vec<Option<MatchId>> = found.iter().map(|(k, _)| self.matches.id_of(k)).collect();
        let again: FastSet<MatchId> = known.iter().flatten().copied().collect();
        for id in old.into_iter().filter(|id| !again.contains(id)) {
            let (key, row) = self.matches.remove(id);
            self.row_left(&key, row, changes);
        }
        for ((key, row), id) in found.into_iter().zip(known) {
            // A match found twice in one evaluation was added by the first.
            match id.or_else(|| self.matches.id_of(&key)) {
                Some(id) if self.matches.row(id) == row.as_slice() => {}
                Some(id) => {
                    let old = self.matches.replace_row(id, row.clone());
                    self.row_left(&key, old, changes);
                    self.row_came(&key, row, changes);
                }
                None => {
                    self.row_came(&key, row.clone(), changes);
                    self.matches.insert(key, row);
                }
            }
        }
    }

    /// Brings the matches up to the commit `version`, which touched `touched`; `graph` reads
    /// that commit's data.
    pub fn refresh(&mut self, graph: Graph<'_>, version: u64, touched: &Touched) -> Result<(RowChanges, RefreshStats)> {
        if touched.all {
            return Ok((self.load(graph, version)?, RefreshStats { seeds: 0, whole: true }));
        }
        let mut b = Bindings { params: &self.params, cancel: None };
        let plan = &self.plan;
        let m = Matcher::new(graph, plan, &mut b)?;
        // Each touched record is looked up, and so are the nodes the routes walk back to:
        // sized for twice the touched lists, it seldom grows while the refresh runs.
        let listed = touched.records.len() + touched.slots.len() + touched.entries.len() + touched.links.len();
        let mut types = RecordTypes(FastMap::with_capacity_and_hasher(2 * listed, Default::default()));
        let Some(seeds) = self.seeds(&m, graph, touched, &mut types)? else {
            drop(m);
            return Ok((self.load(graph, version)?, RefreshStats { seeds: 0, whole: true }));
        };
        // A pair is evaluated with one of its nodes anyway when that node is a seed alone.
        let seeds: Vec<Seed> = seeds
            .iter()
            .filter(|s| match **s {
                Seed::One(..) => true,
                Seed::Two((a, x), (b, y), _) => !seeds.contains(&Seed::One(a, x)) && !seeds.contains(&Seed::One(b, y)),
            })
            .copied()
            .collect();
        let stats = RefreshStats { seeds: seeds.len(), whole: false };
        let mut changes = Changing::default();
        let mut updates: Vec<(Seed, Vec<Found>)> = Vec::with_capacity(seeds.len());
        for seed in seeds {
            let (ends, block) = match seed {
                Seed::One(top, id) => (vec![(top, id)], &plan.seeded[top].1),
                Seed::Two(a, b, block) => (vec![a, b], &plan.paired[block].1),
            };
            let mut bound = Vec::with_capacity(ends.len());
            for &(top, id) in &ends {
                if types.of(graph, id)? != Some(self.var_records[top]) {
                    break;
                }
                let var = plan.top[top];
                bound.push((var, NodeRef { id, ty: plan.vars[var].ty }));
            }
            // Every node of the seed still exists as its variable's type.
            let alive = bound.len() == ends.len();
            let found = if alive { collect(&m, block, &bound)? } else { Vec::new() };
            updates.push((seed, found));
        }
        drop(m);
        for (seed, found) in updates {
            let old = self.bound_by(seed);
            self.settle(old, found, &mut changes);
        }
        self.version = version;
        Ok((changes.into_sorted(), stats))
    }

    /// The matches a seed binds now.
    fn bound_by(&self, seed: Seed) -> Vec<MatchId> {
        match seed {
            Seed::One(top, id) => self.matches.bound(top, id).collect(),
            Seed::Two((a, x), (b, y), _) => {
                self.matches.bound(a, x).filter(|&m| self.matches.key(m)[b].id == y).collect()
            }
        }
    }

    /// The seeds to evaluate again after a commit that touched `touched`; `None` when it
    /// touched a type no route describes (run the query whole).
    fn seeds(
        &self,
        m: &Matcher<'_, '_>,
        graph: Graph<'_>,
        touched: &Touched,
        types: &mut RecordTypes,
    ) -> Result<Option<BTreeSet<Seed>>> {
        let mut seeds = BTreeSet::new();
        // `None`: created or deleted. The last: a matrix entry's target.
        let records = touched.records.iter().map(|&id| (id, None, NodeId::NONE));
        let slots = touched.slots.iter().map(|&(id, p)| (id, Some(Read::Slot(p)), NodeId::NONE));
        // Links into a record changed: only paths that go on backwards along them read that.
        let links = touched.links.iter().map(|&(id, p)| (id, Some(Read::Links(p)), NodeId::NONE));
        let entries = touched.entries.iter().map(|&(id, p, target)| (id, Some(Read::Entries(p)), target));
        for (id, read, target) in records.chain(slots).chain(links).chain(entries) {
            let Some(record) = types.of(graph, id)? else {
                if read.is_none() {
                    // Deleted: it can only end the matches that bind it.
                    for top in 0..self.plan.top.len() {
                        if self.matches.binds(top, id) {
                            seeds.insert(Seed::One(top, id));
                        }
                    }
                }
                continue; // written, then deleted: listed as deleted too
            };
            if self.opaque.contains(&record) {
                return Ok(None);
            }
            for (top, &r) in self.var_records.iter().enumerate() {
                // Created: a new node for the variable.
                if r == record && read.is_none_or(|read| self.reads.first[top].contains(&read)) {
                    seeds.insert(Seed::One(top, id));
                }
            }
            if let Some(Read::Entries(p)) = read {
                let pairs = self.reads.pairs.iter().filter(|pair| pair.property == p);
                for pair in pairs.filter(|pair| self.var_records[pair.owner] == record) {
                    assert!(target.is_some(), "a matrix entry has a target");
                    seeds.insert(Seed::Two((pair.owner, id), (pair.target, target), pair.block));
                }
            }
            // Created: every slot is new (its entries and the links into it come listed).
            let routes = self.reads.routes.iter().filter(|r| {
                r.record == record
                    && match read {
                        None => matches!(r.reads, Read::Slot(_)),
                        Some(read) => r.reads == read,
                    }
            });
            for route in routes {
                m.walk(NodeRef { id, ty: route.ty }, &route.steps, &mut |n| {
                    seeds.insert(Seed::One(route.top, n.id));
                })?;
            }
        }
        Ok(Some(seeds))
    }

    fn row_came(&mut self, key: &MatchKey, row: Vec<serde_json::Value>, changes: &mut Changing) {
        let Some(counts) = self.distinct.as_mut() else {
            changes.added.push((Place::Match(key.clone()), row));
            return;
        };
        let text = serde_json::Value::Array(row.clone()).to_string();
        let (_, n) = counts.entry(text.clone()).or_insert_with(|| (row.clone(), 0));
        *n += 1;
        if *n == 1 {
            changes.added.push((Place::Text(text), row));
        }
    }

    fn row_left(&mut self, key: &MatchKey, row: Vec<serde_json::Value>, changes: &mut Changing) {
        let Some(counts) = self.distinct.as_mut() else {
            changes.removed.push((Place::Match(key.clone()), row));
            return;
        };
        let text = serde_json::Value::Array(row).to_string();
        let (row, n) = counts.get_mut(&text).expect("a row that leaves came before");
        *n -= 1;
        if *n == 0 {
            let row = std::mem::take(row);
            counts.remove(&text);
            changes.removed.push((Place::Text(text), row));
        }
    }
}

/// The record types of the records one refresh looks at, each read once (the same route or
/// sensor turns up as a touched record, a link target, a collection's owner and a seed).
struct RecordTypes(FastMap<NodeId, Option<NodeTypeId>>);

impl RecordTypes {
    /// The type of record `id`, `None` if it does not exist (deleted).
    fn of(&mut self, graph: Graph<'_>, id: NodeId) -> Result<Option<NodeTypeId>> {
        if let Some(&t) = self.0.get(&id) {
            return Ok(t);
        }
        let t = graph.find_header(id)?.map(|h| h.ty);
        // Bounded by the touched lists and the seeds of one commit.
        self.0.insert(id, t);
        Ok(t)
    }
}

/// What the commits after `loaded` up to `latest` touched, if `recent` holds every one of
/// them (each starts where the one before ended).
fn caught_up(recent: &VecDeque<(u64, u64, Touched)>, loaded: u64, latest: u64) -> Option<Touched> {
    let mut at = loaded;
    let mut sets = Vec::new();
    for (before, version, touched) in recent.iter().filter(|(_, v, _)| *v > loaded) {
        if *before > at {
            return None; // a commit in between was not kept
        }
        at = *version;
        sets.push(touched);
    }
    (at == latest).then(|| Touched::union(sets))
}

/// Every match of `block` (with `seeds` bound), at most [`MAX_PATTERN_ROWS`].
fn collect(m: &Matcher<'_, '_>, block: &Block, seeds: &[(usize, NodeRef)]) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    m.matches(block, seeds, &mut |f| {
        if found.len() >= MAX_PATTERN_ROWS {
            return Err(InstructionError::Limit(format!(
                "a registered query may hold at most {MAX_PATTERN_ROWS} matches"
            )));
        }
        found.push(f);
        Ok(())
    })?;
    Ok(found)
}

/// Collects what a plan reads: routes back from each node on a path, and the types it reads
/// in ways no route describes.
struct Reads<'s> {
    schema: &'s Schema,
    vars: &'s [MatchVar],
    /// The plans for pairs of variables bound first (`MatchPlan::paired`).
    paired: &'s [((usize, usize), Block)],
    map: ReadMap,
    opaque: BTreeSet<NodeTypeId>,
    /// Inside `exists`: every type read is opaque.
    all: bool,
}

impl Reads<'_> {
    fn block(&mut self, block: &Block, top: &dyn Fn(usize) -> Option<usize>) {
        for op in &block.ops {
            match &op.kind {
                MatchOp::Scan { from, steps, var, .. } => self.path(*from, steps, None, Some(*var), top),
                MatchOp::Index { var, index, .. } => {
                    // Bound from the root by down steps only: its own node is all that counts.
                    if self.all {
                        self.opaque.insert(self.vars[*var].ty);
                    } else if let Some(decl) = self.schema.indexes.get(*index as usize) {
                        // The probe reads the indexed property in the variable's own record
                        // (through groups only); an exact probe leaves no filter to say so.
                        self.path(Anchor::Var(*var), &[], Some(decl.property), None, top);
                    }
                }
                MatchOp::Filter(c) => self.cond(c, top),
            }
        }
    }

    fn cond(&mut self, c: &MatchCondition, top: &dyn Fn(usize) -> Option<usize>) {
        match c {
            MatchCondition::And(list) | MatchCondition::Or(list) => list.iter().for_each(|c| self.cond(c, top)),
            MatchCondition::Not(c) => self.cond(c, top),
            MatchCondition::Exists(block) => {
                let mut inner = Reads {
                    schema: self.schema,
                    vars: self.vars,
                    paired: self.paired,
                    map: ReadMap::default(),
                    opaque: BTreeSet::new(),
                    all: true,
                };
                inner.block(block, top);
                self.opaque.extend(inner.opaque);
            }
            // The planner's check that a node bound otherwise sits where its root path puts
            // it: parents only, fixed for the node's life.
            MatchCondition::Reach { from: Anchor::Var(_), steps, to: Some(Anchor::Root) }
                if !self.all
                    && steps.iter().all(|s| matches!(s.kind, MatchStepKind::Up(_) | MatchStepKind::UpIfKey(..))) => {}
            MatchCondition::Reach { from, steps, to } => {
                let end = match to {
                    Some(Anchor::Var(v)) => Some(*v),
                    _ => None,
                };
                self.path(*from, steps, None, end, top)
            }
            MatchCondition::Compare { left, right, .. } => {
                self.term(left, top);
                self.term(right, top);
            }
            MatchCondition::Prefix { term, .. } | MatchCondition::States { term, .. } => self.term(term, top),
        }
    }

    fn term(&mut self, t: &MatchTerm, top: &dyn Fn(usize) -> Option<usize>) {
        match t {
            MatchTerm::Leaf { var, steps, property, .. } => {
                self.path(Anchor::Var(*var), steps, Some(*property), None, top)
            }
            // A variable's key is fixed for its life; it counts only inside `exists`.
            MatchTerm::Key(var) if self.all => {
                self.opaque.insert(self.vars[*var].ty);
            }
            MatchTerm::Key(_) | MatchTerm::Lit(_) => {}
        }
    }

    /// Notes a pair when `steps` are one matrix step from top variable `var` to top variable
    /// `end` and the pair has a plan; whether it did.
    fn pair(
        &mut self,
        var: usize,
        steps: &[MatchStep],
        end: Option<usize>,
        top: &dyn Fn(usize) -> Option<usize>,
    ) -> bool {
        let Some(end) = end.filter(|&e| e != var) else { return false };
        let [step] = steps else { return false };
        let (property, owner, target) = match step.kind {
            MatchStepKind::Targets(p) => (p, var, end),
            MatchStepKind::Owners(p) => (p, end, var),
            _ => return false,
        };
        let key = (var.min(end), var.max(end));
        let (Some(block), Some(owner), Some(target)) =
            (self.paired.iter().position(|(k, _)| *k == key), top(owner), top(target))
        else {
            return false;
        };
        self.map.pairs.push(Pair { property, owner, target, block });
        true
    }

    /// Every node type the steps pass (repeat bodies included) is opaque.
    fn opaque_steps(&mut self, steps: &[MatchStep]) {
        for s in steps {
            self.opaque.insert(s.from);
            self.opaque.insert(s.to);
            if let MatchStepKind::Repeat { body, .. } = &s.kind {
                self.opaque_steps(body);
            }
        }
    }

    /// The routes of the nodes a path passes, back to its variable; `term`: the property the
    /// path ends in, read from its last node; `end`: the variable the path binds or reaches.
    fn path(
        &mut self,
        from: Anchor,
        steps: &[MatchStep],
        term: Option<PropertyId>,
        end: Option<usize>,
        top: &dyn Fn(usize) -> Option<usize>,
    ) {
        let var = match from {
            Anchor::Var(v) => v,
            // Down steps only: the node at the end is there exactly while it exists, and its
            // own variable covers that. With links, a route would lead back to the root.
            Anchor::Root if !self.all && steps.iter().all(MatchStep::goes_down) => return,
            Anchor::Root => return self.opaque_steps(steps),
        };
        let Some(position) = top(var).filter(|_| !self.all) else {
            self.opaque.insert(self.vars[var].ty);
            return self.opaque_steps(steps);
        };
        if self.pair(var, steps, end, top) {
            return; // one matrix step between two top variables: nothing else on the path
        }
        let first = match steps.first() {
            Some(step) => step_read(step),
            None => term.map(Read::Slot),
        };
        self.map.first[position].extend(first);
        for k in 1..=steps.len() {
            if let Some(r) = steps[..k].iter().position(|s| matches!(s.kind, MatchStepKind::Repeat { .. })) {
                return self.opaque_steps(&steps[r..]);
            }
            let ty = steps[k - 1].to;
            let Some(record) = self.schema.record_of(ty) else { continue };
            // A step reads the record it leaves (or the links into it), never the one it
            // arrives at: that one counts only if a step or the term goes on from it.
            let reads = match steps.get(k) {
                None => match term {
                    Some(p) => Read::Slot(p),
                    None => continue,
                },
                Some(next) => match step_read(next) {
                    Some(read) => read,
                    // A group step reads nothing (the step after it reads the same record);
                    // the parent of a node is fixed for its life.
                    None => continue,
                },
            };
            let back = reverse(&steps[..k]).into_iter().map(unkeyed).collect();
            self.map.routes.push(Route { record, ty, top: position, steps: back, reads });
        }
    }
}

/// What a step reads of the node it leaves: a property of its record (a state, a
/// reference), its entries of a collection, or the links into it along a reference or
/// matrix (a step backwards). `None`: nothing that can change (a group, a parent).
fn step_read(s: &MatchStep) -> Option<Read> {
    match s.kind {
        MatchStepKind::State(p, _) | MatchStepKind::Reference(p) => Some(Read::Slot(p)),
        MatchStepKind::Entries(p)
        | MatchStepKind::EntryKey(p, _)
        | MatchStepKind::EntryOf(p, _)
        | MatchStepKind::Targets(p) => Some(Read::Entries(p)),
        MatchStepKind::Referrers(p) | MatchStepKind::Owners(p) => Some(Read::Links(p)),
        _ => None,
    }
}

/// A step that needs no variable bound: an entry keyed by a variable becomes any entry (a
/// route may find more candidates than there are matches, never fewer).
fn unkeyed(s: MatchStep) -> MatchStep {
    let kind = match s.kind {
        MatchStepKind::EntryOf(p, _) => MatchStepKind::Entries(p),
        MatchStepKind::UpIfTarget(p, _) => MatchStepKind::Up(UpFrom::Entry(p)),
        k => k,
    };
    MatchStep { kind, ..s }
}

/// Most touched sets kept for registrations in progress; past it the oldest two are joined
/// into one (past a million records a set says it touched everything, and a
/// registration that needs it loads again).
const MAX_RECENT: usize = 4096;

/// How often a registration loads its query outside the lock before it loads it inside.
const MAX_LOAD_ATTEMPTS: u32 = 3;

/// The registered queries of one database, kept up to date by its commits.
#[derive(Debug, Default)]
pub struct Registry {
    state: Mutex<State>,
    next: AtomicU64,
    /// Set once anything registered (until then commits skip the registry).
    used: AtomicBool,
    /// Registrations loading their query outside the lock (their commits are kept).
    loading: AtomicUsize,
    /// The last commit whose hook skipped the registry (nothing registered or loading).
    skipped: AtomicU64,
    /// Registrations that caught up with commits made while they loaded, from the commits'
    /// touched sets or (when those would not do after [`MAX_LOAD_ATTEMPTS`]) by loading again
    /// inside the lock.
    caught_up: AtomicU64,
    reloaded: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    queries: BTreeMap<u64, Registered>,
    /// The last commit the registry has seen.
    latest: u64,
    /// While a registration loads: the commits since, each as (version before, its version,
    /// what it touched), in order, at most [`MAX_RECENT`] (the oldest are joined).
    recent: VecDeque<(u64, u64, Touched)>,
    /// The snapshot versions of the loads in progress (the commits after the oldest are
    /// kept, the others dropped).
    active: Vec<u64>,
}

/// A registration loading (counted from before its first snapshot to its end).
struct Loading<'r>(&'r Registry);

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.loading.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves the maps as they were between two updates
        // at worst; the next commit's refresh or a reload repairs a match set.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads `query` from a snapshot of `db` and registers it: its id, the commit its rows
    /// are of, and its rows. The load runs outside the lock, so commits go on meanwhile; the
    /// commits it missed are then applied from their touched sets like any commit's.
    pub fn add(&self, mut query: Registered, db: &Database) -> Result<(u64, u64, QueryResult)> {
        let full = || InstructionError::Limit(format!("at most {MAX_REGISTERED} queries may be registered at once"));
        if self.lock().queries.len() >= MAX_REGISTERED {
            return Err(full());
        }
        // Counted before the snapshot: every commit after it is kept (or seen skipped).
        self.loading.fetch_add(1, Ordering::SeqCst);
        let loading = Loading(self);
        let mut attempt = 0;
        let (mut state, version) = loop {
            attempt += 1;
            let (snapshot, loaded) = {
                let mut state = self.lock();
                let snapshot = db.snapshot()?;
                let loaded = snapshot.version()?;
                state.active.push(loaded);
                (snapshot, loaded)
            };
            let outcome = query.load(snapshot.graph(), loaded);
            drop(snapshot);

            let mut state = self.lock();
            let at = state.active.iter().position(|&v| v == loaded).expect("this load is listed");
            state.active.swap_remove(at);
            outcome?;
            if state.queries.len() >= MAX_REGISTERED {
                return Err(full());
            }
            let skipped = self.skipped.load(Ordering::SeqCst);
            let version = state.latest.max(loaded).max(skipped);
            if version == loaded {
                break (state, version);
            }
            // Commits came since the load. A commit whose hook has not run yet (it waits for
            // this lock) will refresh the query itself; the snapshot may already hold it.
            let touched = caught_up(&state.recent, loaded, state.latest).filter(|t| skipped <= loaded && !t.all);
            if let Some(touched) = touched {
                query.refresh(db.snapshot()?.graph(), version, &touched)?;
                self.caught_up.fetch_add(1, Ordering::Relaxed);
                break (state, version);
            }
            // A commit that was not kept, or that touched everything (one begun before the
            // registry hooked in): load again outside the lock, twice at most, then inside.
            if attempt < MAX_LOAD_ATTEMPTS {
                drop(state);
                continue;
            }
            query.load(db.snapshot()?.graph(), version)?;
            self.reloaded.fetch_add(1, Ordering::Relaxed);
            break (state, version);
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let rows = query.result();
        state.queries.insert(id, query);
        self.used.store(true, Ordering::Release);
        drop(state);
        drop(loading);
        Ok((id, version, rows))
    }

    /// How many registrations caught up with commits made while they loaded: from the
    /// commits' touched sets, and by loading again.
    pub fn catch_ups(&self) -> (u64, u64) {
        (self.caught_up.load(Ordering::Relaxed), self.reloaded.load(Ordering::Relaxed))
    }

    /// Ends the registration `id`; false if there was none with that id.
    pub fn remove(&self, id: u64) -> bool {
        self.lock().queries.remove(&id).is_some()
    }

    /// A registered query's rows now, with the commit they are of.
    pub fn result(&self, id: u64) -> Option<(u64, QueryResult)> {
        self.lock().queries.get(&id).map(|q| (q.version(), q.result()))
    }

    /// Runs `f` on a registered query (tests and the benchmark look inside).
    pub fn with<T>(&self, id: u64, f: impl FnOnce(&Registered) -> T) -> Option<T> {
        self.lock().queries.get(&id).map(f)
    }

    /// Brings every registered query up to the commit `version` (None: its data could not
    /// be read). A query that fails is dropped, with the error in its difference.
    pub fn committed(&self, graph: Option<Graph<'_>>, version: u64, touched: &Touched) -> Vec<QueryDiff> {
        let keep = self.loading.load(Ordering::SeqCst) > 0;
        if !keep && !self.used.load(Ordering::Acquire) {
            self.skipped.fetch_max(version, Ordering::SeqCst);
            return Vec::new();
        }
        let mut state = self.lock();
        match state.active.iter().min().copied() {
            Some(oldest) if keep => {
                let before = state.latest;
                state.recent.push_back((before, version, touched.clone()));
                // A load needs the commits after its snapshot only.
                while state.recent.front().is_some_and(|&(_, v, _)| v <= oldest) {
                    state.recent.pop_front();
                }
                if state.recent.len() > MAX_RECENT {
                    // The two oldest become one: a registration that needs either gets both
                    // (touched by a commit before its load is only more work, never wrong).
                    let (from, _, first) = state.recent.pop_front().expect("more than one kept");
                    let (_, to, second) = state.recent.pop_front().expect("more than one kept");
                    state.recent.push_front((from, to, Touched::union([&first, &second])));
                }
            }
            _ => state.recent.clear(),
        }
        state.latest = state.latest.max(version);
        let queries = &mut state.queries;
        let mut diffs = Vec::new();
        let mut failed = Vec::new();
        for (&id, q) in queries.iter_mut() {
            if q.version() >= version {
                continue; // registered on this commit's data already
            }
            let start = std::time::Instant::now();
            let outcome = match graph {
                Some(g) => q.refresh(g, version, touched).map(|(c, stats)| {
                    q.last = Some((start.elapsed(), stats));
                    c
                }),
                None => Err(InstructionError::value("the commit's data could not be read")),
            };
            match outcome {
                Ok(c) if c.is_empty() => {}
                Ok(c) => diffs.push(QueryDiff { query: id, removed: c.removed, added: c.added, error: None }),
                Err(e) => {
                    failed.push(id);
                    diffs.push(QueryDiff {
                        query: id,
                        removed: Vec::new(),
                        added: Vec::new(),
                        error: Some(format!("the registered query stopped: {e}")),
                    });
                }
            }
        }
        for id in failed {
            queries.remove(&id);
        }
        diffs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touched(id: u64) -> Touched {
        Touched { records: vec![NodeId::from_u64(id)], ..Touched::default() }
    }

    /// The records a `Touched` lists, as numbers.
    fn records(t: Touched) -> Vec<u64> {
        t.records.iter().map(|r| r.get()).collect()
    }

    #[test]
    fn catching_up_needs_every_commit_since_the_load() {
        let recent: VecDeque<(u64, u64, Touched)> =
            [(3, 5, touched(1)), (5, 6, touched(2)), (6, 9, touched(3))].into_iter().collect();
        // From 5: commits 6 and 9; from 3: all three; from 9: none.
        assert_eq!(caught_up(&recent, 5, 9).map(records), Some(vec![2, 3]));
        assert_eq!(caught_up(&recent, 3, 9).map(records), Some(vec![1, 2, 3]));
        assert_eq!(caught_up(&recent, 9, 9).map(records), Some(vec![]));
        // The registry saw a commit after 9 that was not kept, or one before 3 is missing.
        assert_eq!(caught_up(&recent, 5, 10), None);
        assert_eq!(caught_up(&recent, 2, 9), None);
        // A gap in the middle.
        let gap: VecDeque<(u64, u64, Touched)> = [(3, 5, touched(1)), (6, 9, touched(3))].into_iter().collect();
        assert_eq!(caught_up(&gap, 3, 9), None);
        // Everything touched by any of them: everything.
        let all: VecDeque<(u64, u64, Touched)> = [(3, 5, Touched::all())].into_iter().collect();
        assert!(caught_up(&all, 3, 5).is_some_and(|t| t.all));
    }
}
