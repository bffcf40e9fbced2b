//! Planning a checked pattern query: a greedy order of bindings and conditions, each
//! binding by the cheapest way its bound neighbours allow, with cost estimates.

use super::*;

impl<'c, 's> PatternChecker<'c, 's> {
    pub(super) fn reach(&self, from: Anchor, steps: Vec<MatchStep>, to: Option<Anchor>) -> MatchCondition {
        // With both ends known, walk from the end whose walk is cheaper; from a variable up to
        // the root rather than from the root down.
        if let Some(to) = to {
            let back = reverse(&steps);
            if from == Anchor::Root || check_cost(&back, self.schema()) < check_cost(&steps, self.schema()) {
                return MatchCondition::Reach { from: to, steps: back, to: Some(from) };
            }
        }
        MatchCondition::Reach { from, steps, to }
    }

    /// The best schema index to bind `e.to` by, when `e` leads from the root to every entry
    /// of an indexed collection and a waiting condition on that variable alone is one the
    /// index answers (equality, states, prefix, or range bounds, by the index's kind).
    fn index_choice(&self, e: &Edge, bound: &BTreeSet<usize>, pending: &[Pending]) -> Option<IndexChoice> {
        let schema = self.schema();
        if e.from != Anchor::Root || bound.contains(&e.to) || schema.indexes.is_empty() {
            return None;
        }
        // Unkeyed entry, group and state steps reach every entry of the last collection: a
        // node type has one place in the tree, and a state's collections exist only in it.
        let all = e
            .steps
            .iter()
            .all(|s| matches!(s.kind, MatchStepKind::Entries(_) | MatchStepKind::Group(_) | MatchStepKind::State(..)));
        let Some(MatchStepKind::Entries(collection)) = e.steps.last().map(|s| &s.kind) else { return None };
        if !all {
            return None;
        }
        let var = e.to;
        let every = scan_cost(&e.steps, schema);
        let mut best: Option<IndexChoice> = None;
        for (n, decl) in schema.indexes_of_collection(*collection) {
            let mut equal = None;
            let mut joined = None;
            let mut states = None;
            let mut prefix = None;
            let (mut low, mut high) = (None, None);
            for (j, p) in pending.iter().enumerate() {
                // On `var` alone, or tying it to variables bound before (a join).
                if !p.vars.contains(&var) || !p.vars.iter().all(|v| *v == var || bound.contains(v)) {
                    continue;
                }
                let Some(use_) = index_use(&p.cond, var, decl.property) else { continue };
                let fits = matches!(
                    (&use_, decl.kind),
                    (IndexUse::Equal(_) | IndexUse::EqualTerm(_) | IndexUse::States(_), _)
                        | (IndexUse::Prefix(_), IndexKind::Prefix | IndexKind::Range)
                        | (IndexUse::Low(_) | IndexUse::High(_), IndexKind::Range)
                );
                if !fits {
                    continue;
                }
                match use_ {
                    IndexUse::Equal(v) if equal.is_none() => equal = Some((v, j)),
                    IndexUse::EqualTerm(t) if joined.is_none() => joined = Some((t, j)),
                    IndexUse::States(list) if states.is_none() => states = Some((list, j)),
                    IndexUse::Prefix(v) if prefix.is_none() => prefix = Some((v, j)),
                    IndexUse::Low(v) if low.is_none() => low = Some((v, j)),
                    IndexUse::High(v) if high.is_none() => high = Some((v, j)),
                    _ => {}
                }
            }
            // The most selective use: equality (to a value, then to a bound term), then states,
            // then a prefix, then a range.
            let (probe, served) = if let Some((v, j)) = equal {
                (IndexProbe::Equal(v), vec![j])
            } else if let Some((t, j)) = joined {
                (IndexProbe::EqualTerm(t), vec![j])
            } else if let Some((list, j)) = states {
                (IndexProbe::States(list), vec![j])
            } else if let Some((v, j)) = prefix {
                (IndexProbe::Prefix(v), vec![j])
            } else if low.is_some() || high.is_some() {
                let served = low.iter().chain(high.iter()).map(|&(_, j)| j).collect();
                (IndexProbe::Range { low: low.map(|(v, _)| v), high: high.map(|(v, _)| v) }, served)
            } else {
                continue;
            };
            let rows = if decl.unique && matches!(probe, IndexProbe::Equal(_) | IndexProbe::EqualTerm(_)) {
                1.0
            } else {
                (every * served.iter().map(|&j| pending[j].selectivity).product::<f64>()).max(1.0)
            };
            // A number is stored whole in the index key: equal keys are equal values, and a
            // range read between inclusive bounds holds exactly the values `>=` and `<=` ask
            // for (a strict bound still needs its filter).
            let exact = matches!(schema.property(decl.property).kind, PropertyKind::Number)
                && match probe {
                    IndexProbe::Equal(_) | IndexProbe::EqualTerm(_) => true,
                    IndexProbe::Range { .. } => served.iter().all(|&j| {
                        matches!(pending[j].cond, MatchCondition::Compare { op: Comparison::Ge | Comparison::Le, .. })
                    }),
                    IndexProbe::States(_) | IndexProbe::Prefix(_) => false,
                };
            let choice = IndexChoice { index: n, probe, served, rows, exact };
            if best.as_ref().is_none_or(|b| choice.rows < b.rows) {
                best = Some(choice);
            }
        }
        best
    }

    /// A variable reached from a bound one by following links forwards (at most one matrix
    /// step), that several later conditions or links tie to variables not yet bound, is
    /// worth binding early: each of them then filters where the other variable is bound
    /// (ConnectedSegments' sensor, tested at every segment). The factor scales its cost.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn early_discount(
        &self,
        var: usize,
        edge: usize,
        backward: bool,
        edges: &[Edge],
        pending: &[Pending],
        used: &[bool],
        with: &BTreeSet<usize>,
    ) -> f64 {
        let e = &edges[edge];
        let forward = e.steps.iter().all(|s| {
            matches!(
                s.kind,
                MatchStepKind::Group(_)
                    | MatchStepKind::State(..)
                    | MatchStepKind::Reference(_)
                    | MatchStepKind::Targets(_)
            )
        }) && e.steps.iter().filter(|s| matches!(s.kind, MatchStepKind::Targets(_))).count() <= 1;
        if backward || e.from == Anchor::Root || !forward {
            return 1.0;
        }
        let ties = pending.iter().filter(|p| p.vars.contains(&var) && p.vars.iter().any(|v| !with.contains(v))).count()
            + edges
                .iter()
                .enumerate()
                .filter(|&(j, o)| {
                    let ends = [anchor_var_of(o.from), Some(o.to)];
                    j != edge
                        && !used[j]
                        && ends.contains(&Some(var))
                        && ends.iter().flatten().any(|v| !with.contains(v))
                })
                .count();
        if ties < EARLY_TIES {
            return 1.0;
        }
        TIE_DISCOUNT.powi(ties.min(MAX_TIES) as i32)
    }

    /// Scanning `var` (by edge `edge`) while an equality ties it to an unbound variable `w`,
    /// which an index on `var`'s collection would answer once `w` is bound, makes `w` a scan
    /// for each of `var`'s rows: a nested loop over every pair. The factor is `w`'s own scan
    /// cost, so that `w` is bound first and `var` by the index (OO7's Q8: each atomic part
    /// probes the documents' id index, rather than every part being read for each document).
    fn join_penalty(
        &self,
        var: usize,
        edge: usize,
        edges: &[Edge],
        pending: &[Pending],
        bound: &BTreeSet<usize>,
    ) -> f64 {
        let schema = self.schema();
        let mut worst: f64 = 1.0;
        for p in pending.iter().filter(|p| p.vars.len() == 2 && p.vars.contains(&var)) {
            let Some(&w) = p.vars.iter().find(|v| **v != var) else { continue };
            if bound.contains(&w) {
                continue;
            }
            let mut with = bound.clone();
            with.insert(w);
            if self.index_choice(&edges[edge], &with, std::slice::from_ref(p)).is_none() {
                continue;
            }
            if let Some(other) = edges.iter().find(|o| o.to == w && o.from == Anchor::Root) {
                worst = worst.max(scan_cost(&other.steps, schema));
            }
        }
        worst
    }

    pub(super) fn plan_level(&self, level: Level, outer: &BTreeSet<usize>) -> Block {
        let Level { locals, edges, mut pending } = level;
        let schema = self.schema();
        let mut bound: BTreeSet<usize> = outer.clone();
        let mut used = vec![false; edges.len()];
        let mut ops = Vec::new();
        // The guessed number of rows so far in one run of this block.
        let mut rows = 1.0;
        let ready = |bound: &BTreeSet<usize>,
                     used: &mut Vec<bool>,
                     pending: &mut Vec<Pending>,
                     ops: &mut Vec<PlanOp>,
                     rows: &mut f64| {
            for (i, e) in edges.iter().enumerate() {
                let from_bound = match e.from {
                    Anchor::Root => true,
                    Anchor::Var(v) => bound.contains(&v),
                };
                if !used[i] && from_bound && bound.contains(&e.to) {
                    used[i] = true;
                    if e.from == Anchor::Root && implied_by_type(&e.steps) {
                        continue; // a node of this type can only sit at the end of this path
                    }
                    *rows *= 0.5;
                    let check = if e.from == Anchor::Root && e.steps.iter().all(MatchStep::goes_down) {
                        // Up from the node: one parent read per step, not a scan from the root.
                        self.reach(Anchor::Var(e.to), reverse(&e.steps), Some(Anchor::Root))
                    } else {
                        self.reach(e.from, e.steps.clone(), Some(Anchor::Var(e.to)))
                    };
                    ops.push(self.op(MatchOp::Filter(check), *rows));
                }
            }
            let mut i = 0;
            while i < pending.len() {
                if pending[i].vars.iter().all(|v| bound.contains(v)) {
                    let p = pending.remove(i);
                    *rows *= p.selectivity;
                    ops.push(self.op(MatchOp::Filter(p.cond), *rows));
                } else {
                    i += 1;
                }
            }
        };
        ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
        while locals.iter().any(|v| !bound.contains(v)) {
            // (cost, var, edge, backward, index)
            let mut best: Option<(f64, usize, usize, bool, Option<IndexChoice>)> = None;
            for (i, e) in edges.iter().enumerate() {
                if used[i] {
                    continue;
                }
                if let Some(choice) = self.index_choice(e, &bound, &pending) {
                    let mut with = bound.clone();
                    with.insert(e.to);
                    let others: f64 = pending
                        .iter()
                        .enumerate()
                        .filter(|(j, p)| {
                            !choice.served.contains(j)
                                && p.vars.contains(&e.to)
                                && p.vars.iter().all(|v| with.contains(v))
                        })
                        .map(|(_, p)| p.selectivity)
                        .product();
                    // Half: reading only the matching entries beats scanning for the same rows.
                    let cost = choice.rows * others * 0.5;
                    if best.as_ref().is_none_or(|(c, bv, ..)| cost < *c || (cost == *c && e.to < *bv)) {
                        best = Some((cost, e.to, i, false, Some(choice)));
                    }
                }
                let from_bound = match e.from {
                    Anchor::Root => true,
                    Anchor::Var(v) => bound.contains(&v),
                };
                let option = match (from_bound, bound.contains(&e.to), e.from) {
                    (true, false, _) if keys_bound(&e.steps, &bound) => {
                        Some((e.to, false, scan_cost(&e.steps, schema)))
                    }
                    (false, true, Anchor::Var(v)) if keys_bound(&e.steps, &bound) => {
                        Some((v, true, scan_cost(&reverse(&e.steps), schema)))
                    }
                    _ => None,
                };
                let Some((var, backward, cost)) = option else { continue };
                let mut with = bound.clone();
                with.insert(var);
                let keep: f64 = pending
                    .iter()
                    .filter(|p| p.vars.contains(&var) && p.vars.iter().all(|v| with.contains(v)))
                    .map(|p| p.selectivity)
                    .product();
                let cost = cost
                    * keep
                    * self.early_discount(var, i, backward, &edges, &pending, &used, &with)
                    * if backward { 1.0 } else { self.join_penalty(var, i, &edges, &pending, &bound) };
                if best.as_ref().is_none_or(|(c, bv, ..)| cost < *c || (cost == *c && var < *bv)) {
                    best = Some((cost, var, i, backward, None));
                }
            }
            let Some((_, var, i, backward, index)) = best else {
                unreachable!("every variable is bound from the root or an earlier variable")
            };
            used[i] = true;
            if let Some(choice) = index {
                rows *= choice.rows;
                ops.push(self.op(MatchOp::Index { var, index: choice.index, probe: choice.probe }, rows));
                let mut served = choice.served;
                served.sort_unstable();
                for j in served.into_iter().rev() {
                    let p = pending.remove(j);
                    if !choice.exact {
                        ops.push(self.op(MatchOp::Filter(p.cond), rows));
                    }
                }
                bound.insert(var);
                ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
                continue;
            }
            let e = &edges[i];
            let (from, steps) = match (backward, e.from) {
                (false, from) => (from, e.steps.clone()),
                (true, _) => (Anchor::Var(e.to), reverse(&e.steps)),
            };
            let dedupe = needs_dedupe(&steps);
            rows *= scan_cost(&steps, schema);
            ops.push(self.op(MatchOp::Scan { var, from, steps, dedupe, backward }, rows));
            bound.insert(var);
            ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
        }
        debug_assert!(pending.is_empty(), "every condition's variables are bound at the end");
        Block { ops }
    }
}

/// The variable an anchor names (`None` for the root).
fn anchor_var_of(a: Anchor) -> Option<usize> {
    match a {
        Anchor::Root => None,
        Anchor::Var(v) => Some(v),
    }
}

/// How a condition on `var` alone could be answered by an index on `property`.
enum IndexUse {
    Equal(usize),
    /// Equal to a term on other variables (which the caller knows to be bound).
    EqualTerm(MatchTerm),
    States(Vec<StateIndex>),
    Prefix(usize),
    Low(usize),
    High(usize),
}

/// Is `t` the value of `property` on `var` itself (or in a group of it)?
fn is_leaf_of(t: &MatchTerm, var: usize, property: PropertyId) -> bool {
    matches!(t, MatchTerm::Leaf { var: v, steps, property: p, .. }
        if *v == var && *p == property && steps.iter().all(|s| matches!(s.kind, MatchStepKind::Group(_))))
}

fn index_use(c: &MatchCondition, var: usize, property: PropertyId) -> Option<IndexUse> {
    match c {
        MatchCondition::Compare { left, op, right: MatchTerm::Lit(v), how: Compared::Number | Compared::Text }
            if is_leaf_of(left, var, property) =>
        {
            match op {
                Comparison::Eq => Some(IndexUse::Equal(*v)),
                Comparison::Gt | Comparison::Ge => Some(IndexUse::Low(*v)),
                Comparison::Lt | Comparison::Le => Some(IndexUse::High(*v)),
                Comparison::Ne => None,
            }
        }
        // `var 'p' == w 'q'` (either way round), `w` another variable.
        MatchCondition::Compare { left, op: Comparison::Eq, right, how: Compared::Number | Compared::Text } => {
            let other = if is_leaf_of(left, var, property) {
                right
            } else if is_leaf_of(right, var, property) {
                left
            } else {
                return None;
            };
            match other {
                MatchTerm::Leaf { var: w, .. } if *w != var => Some(IndexUse::EqualTerm(other.clone())),
                _ => None,
            }
        }
        MatchCondition::Prefix { term, prefix } if is_leaf_of(term, var, property) => Some(IndexUse::Prefix(*prefix)),
        MatchCondition::States { term, states } if is_leaf_of(term, var, property) => {
            Some(IndexUse::States(states.clone()))
        }
        // `where x ? 'sg' * 's'` (through groups of x).
        MatchCondition::Reach { from: Anchor::Var(v), steps, to: None } if *v == var => match steps.split_last() {
            Some((MatchStep { kind: MatchStepKind::State(p, s), .. }, groups))
                if *p == property && groups.iter().all(|g| matches!(g.kind, MatchStepKind::Group(_))) =>
            {
                Some(IndexUse::States(vec![*s]))
            }
            _ => None,
        },
        _ => None,
    }
}

fn keys_bound(steps: &[MatchStep], bound: &BTreeSet<usize>) -> bool {
    let mut vars = BTreeSet::new();
    steps_vars(steps, &mut vars);
    vars.iter().all(|v| bound.contains(v))
}

/// The same path walked from its end to its start.
pub fn reverse(steps: &[MatchStep]) -> Vec<MatchStep> {
    steps
        .iter()
        .rev()
        .map(|s| {
            let kind = match &s.kind {
                MatchStepKind::Group(p) => MatchStepKind::Up(UpFrom::Group(*p)),
                MatchStepKind::Entries(p) => MatchStepKind::Up(UpFrom::Entry(*p)),
                MatchStepKind::EntryKey(p, k) => MatchStepKind::UpIfKey(*p, *k),
                MatchStepKind::EntryOf(p, v) => MatchStepKind::UpIfTarget(*p, *v),
                MatchStepKind::State(p, st) => MatchStepKind::Up(UpFrom::State(*p, *st)),
                MatchStepKind::Reference(p) => MatchStepKind::Referrers(*p),
                MatchStepKind::Targets(p) => MatchStepKind::Owners(*p),
                MatchStepKind::Referrers(p) => MatchStepKind::Reference(*p),
                MatchStepKind::Owners(p) => MatchStepKind::Targets(*p),
                MatchStepKind::Up(UpFrom::Entry(p)) => MatchStepKind::Entries(*p),
                MatchStepKind::Up(UpFrom::Group(p)) => MatchStepKind::Group(*p),
                MatchStepKind::Up(UpFrom::State(p, st)) => MatchStepKind::State(*p, *st),
                MatchStepKind::UpIfKey(p, k) => MatchStepKind::EntryKey(*p, *k),
                MatchStepKind::UpIfTarget(p, v) => MatchStepKind::EntryOf(*p, *v),
                MatchStepKind::Repeat { min, max, body } => {
                    MatchStepKind::Repeat { min: *min, max: *max, body: reverse(body) }
                }
            };
            MatchStep { kind, from: s.to, to: s.from }
        })
        .collect()
}

/// [`reverse`] when it is the exact inverse of `steps` — a node `b` is among those the
/// reversed steps reach from `a` exactly when `a` is among those `steps` reach from `b` — so a
/// search may walk them from the far end (`shortest`'s search from both ends); `None` when not.
///
/// Every step has such an inverse: a link (`>` on a reference or a matrix) and its reverse
/// (`<`) through the property's link index, which the data layer keeps with every link; a step
/// down the tree (entries, a keyed entry, a matrix entry keyed by a variable, a group, a state)
/// and its up step (`^`) through the parent in each record's header, a node having one place
/// in the tree and a state's node existing only while it is selected; and a `repeat`, whose
/// nodes at each shortest distance are the same read from either end, with its body inverted.
/// The exception is a state without properties: it has no record, so its nodes have no id of
/// their own to tell them apart or to go up from. A path with a step into or out of one is not
/// inverted. The checker already refuses the up step out of such a state, and nothing else
/// leads out of one, so no body that leads back to where it starts (`repeat`, `shortest`)
/// meets one: every `shortest` the checker accepts is searched from both ends, and `None`
/// (searched from the start only) is there for a step that cannot be reversed.
pub fn inverse(steps: &[MatchStep], schema: &Schema) -> Option<Vec<MatchStep>> {
    fn recorded(steps: &[MatchStep], schema: &Schema) -> bool {
        steps.iter().all(|s| {
            schema.record_of(s.from).is_some()
                && schema.record_of(s.to).is_some()
                && match &s.kind {
                    MatchStepKind::Repeat { body, .. } => recorded(body, schema),
                    _ => true,
                }
        })
    }
    recorded(steps, schema).then(|| reverse(steps))
}

/// Whether a scan reads the final node type's table instead of walking: from the root, down
/// through every entry of at least two collections or through a state. Every node of that
/// type sits at the end of such a path (the tree has one path per type), so its table holds
/// exactly the nodes the walk would reach, without the key index descents on the way; the
/// order differs (row order, not key order), which a match without `order by` does not fix.
pub fn reads_table(from: &Anchor, steps: &[MatchStep]) -> bool {
    // Asked by every scan the executor starts, so the cheap test first.
    if *from != Anchor::Root {
        return false;
    }
    let full = steps
        .iter()
        .all(|s| matches!(s.kind, MatchStepKind::Entries(_) | MatchStepKind::Group(_) | MatchStepKind::State(..)));
    let entries = steps.iter().filter(|s| matches!(s.kind, MatchStepKind::Entries(_))).count();
    let states = steps.iter().any(|s| matches!(s.kind, MatchStepKind::State(..)));
    full && (entries >= 2 || states)
}

/// True when a root path's steps are all unkeyed entries and groups: every node of the
/// final type is at the end of such a path, so checking it is needless.
fn implied_by_type(steps: &[MatchStep]) -> bool {
    steps.iter().all(|s| matches!(s.kind, MatchStepKind::Entries(_) | MatchStepKind::Group(_)))
}

fn fanout(s: &MatchStep, schema: &Schema) -> f64 {
    match &s.kind {
        MatchStepKind::Entries(p) => {
            if schema.property(*p).owner == ROOT {
                ROOT_ENTRIES
            } else {
                NESTED_ENTRIES
            }
        }
        MatchStepKind::Targets(_) | MatchStepKind::Referrers(_) | MatchStepKind::Owners(_) => LINKS,
        MatchStepKind::State(..) => 0.5,
        MatchStepKind::Repeat { max, body, .. } => {
            let one: f64 = body.iter().map(|s| fanout(s, schema)).product();
            f64::min(one.max(1.0).powi((*max).min(6) as i32), 1e6)
        }
        _ => 1.0,
    }
}

fn scan_cost(steps: &[MatchStep], schema: &Schema) -> f64 {
    steps.iter().map(|s| fanout(s, schema)).product()
}

/// Cost of checking that a walk reaches a known node: the last step is a lookup when it is
/// a link or an entry step (the goal's slot, its parent, or the matrix entry keyed by it).
fn check_cost(steps: &[MatchStep], schema: &Schema) -> f64 {
    match steps.split_last() {
        None => 1.0,
        Some((last, rest)) => {
            let last = match last.kind {
                MatchStepKind::Targets(_)
                | MatchStepKind::Referrers(_)
                | MatchStepKind::Owners(_)
                | MatchStepKind::Entries(_) => 1.0,
                _ => fanout(last, schema),
            };
            scan_cost(rest, schema) * last
        }
    }
}

/// A walk can reach one node twice when a step that can merge paths (a link, an up step, a
/// repetition) comes after a step that fans out.
fn needs_dedupe(steps: &[MatchStep]) -> bool {
    let mut fanned = false;
    for s in steps {
        let (fans, merges) = match s.kind {
            MatchStepKind::Entries(_) => (true, false),
            MatchStepKind::Referrers(_) => (true, false),
            MatchStepKind::Targets(_) | MatchStepKind::Owners(_) | MatchStepKind::Repeat { .. } => (true, true),
            MatchStepKind::Reference(_)
            | MatchStepKind::Up(_)
            | MatchStepKind::UpIfKey(..)
            | MatchStepKind::UpIfTarget(..) => (false, true),
            _ => (false, false),
        };
        if merges && fanned {
            return true;
        }
        fanned |= fans;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "root ( 'Nodes' -> dictionary (
        'Friends' -> matrix ( .^ . 'Nodes' ) ( )
        'Mark' -> stategroup ( 'Off' -> ( ) 'On' -> ( 'Since' -> number ) )
        'Flag' -> stategroup ( 'Down' -> ( ) 'Up' -> ( ) )
    ) )";

    fn property(schema: &Schema, name: &str) -> PropertyId {
        schema.properties.iter().find(|p| p.name == name).map(|p| p.id).unwrap()
    }

    fn state(schema: &Schema, p: PropertyId, i: StateIndex) -> NodeTypeId {
        let PropertyKind::StateGroup { states } = &schema.property(p).kind else { panic!("not a stategroup") };
        states[i as usize].node
    }

    /// A step into a state and back up inverts when the state has a record, not when it has
    /// none; links and `repeat` invert with their steps reversed.
    #[test]
    fn inverse_is_the_reversed_steps_unless_a_state_stores_nothing() {
        let schema = espalier_schema::compile(SCHEMA).unwrap();
        let friends = property(&schema, "Friends");
        let node = schema.property(friends).owner;
        let step = |kind, from, to| MatchStep { kind, from, to };
        let links = vec![step(MatchStepKind::Targets(friends), node, node)];
        assert_eq!(inverse(&links, &schema), Some(vec![step(MatchStepKind::Owners(friends), node, node)]));
        let repeat = vec![step(MatchStepKind::Repeat { min: 1, max: 2, body: links.clone() }, node, node)];
        assert_eq!(inverse(&repeat, &schema), Some(reverse(&repeat)));
        for (name, stored) in [("Mark", true), ("Flag", false)] {
            let p = property(&schema, name);
            let on = state(&schema, p, 1);
            let there_and_back = vec![
                step(MatchStepKind::State(p, 1), node, on),
                step(MatchStepKind::Up(UpFrom::State(p, 1)), on, node),
            ];
            let want = stored.then(|| reverse(&there_and_back));
            assert_eq!(inverse(&there_and_back, &schema), want, "{name}");
            let nested = vec![step(MatchStepKind::Repeat { min: 0, max: 3, body: there_and_back }, node, node)];
            assert_eq!(inverse(&nested, &schema).is_some(), stored, "{name} in a repeat");
        }
    }
}
