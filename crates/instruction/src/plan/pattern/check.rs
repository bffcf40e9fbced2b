//! Checking a pattern query: every variable, step, condition and column is typed against
//! the schema, with errors at the offending place; the result is the clause levels the
//! planner orders ([`super::planner`]).

use super::*;

impl<'c, 's> PatternChecker<'c, 's> {
    pub(in crate::plan) fn check(mut self, p: &Pattern, span: Span) -> Result<MatchPlan, CheckError> {
        let mut scope: HashMap<String, usize> = HashMap::new();
        let level = self.level(&p.clauses, &mut scope)?;
        let top = level.locals.clone();
        let again = self.seeded.then(|| level.clone());
        let block = self.plan_level(level, &BTreeSet::new());
        let (seeded, paired) = match again {
            Some(level) => {
                let seeded = top.iter().map(|&v| (v, self.plan_level(level.clone(), &BTreeSet::from([v])))).collect();
                let paired = matrix_pairs(&level)
                    .into_iter()
                    .map(|(a, b)| ((a, b), self.plan_level(level.clone(), &BTreeSet::from([a, b]))))
                    .collect();
                (seeded, paired)
            }
            None => (Vec::new(), Vec::new()),
        };
        let mut columns = Vec::with_capacity(p.columns.len());
        let mut aliases: Vec<String> = Vec::with_capacity(p.columns.len());
        for col in &p.columns {
            if aliases.contains(&col.item.alias) {
                return err(col.span, format!("column '{}' is named twice", col.item.alias));
            }
            aliases.push(col.item.alias.clone());
            columns.push(self.column(&col.item.expr, &scope, col.span)?);
        }
        if self.next_op.get() > MAX_OPS * (seeded.len() + paired.len() + 1) {
            return err(span, format!("the pattern plans into more than {MAX_OPS} operations"));
        }
        let grouped = columns.iter().any(MatchColumn::is_aggregate);
        let mut order = Vec::with_capacity(p.order.len());
        for key in &p.order {
            let Some(i) = aliases.iter().position(|a| *a == key.alias) else {
                let known: Vec<String> = aliases.iter().map(|a| format!("'{a}'")).collect();
                return err(
                    span,
                    format!("`order by '{}'`: no such column; the columns are {}", key.alias, known.join(", ")),
                );
            };
            order.push((i, key.descending));
        }
        Ok(MatchPlan {
            vars: self.vars,
            block,
            columns,
            aliases,
            grouped,
            distinct: p.distinct,
            order,
            limit: p.limit,
            offset: p.offset.unwrap_or(0),
            values: self.values,
            op_count: self.next_op.get(),
            explain: p.explain,
            top,
            seeded,
            paired,
        })
    }

    // ---- names and types ----

    pub(super) fn var(&self, scope: &HashMap<String, usize>, name: &str, span: Span) -> Result<usize, CheckError> {
        match scope.get(name) {
            Some(&v) => Ok(v),
            None => {
                let mut known: Vec<&String> = scope.keys().collect();
                known.sort();
                let known: Vec<String> = known.iter().map(|k| k.to_string()).collect();
                let hint =
                    if known.is_empty() { String::new() } else { format!("; in scope here: {}", known.join(", ")) };
                err(span, format!("unknown variable {name} (bind it first with `{name} in …`){hint}"))
            }
        }
    }

    pub(super) fn describe(&self, ty: NodeTypeId) -> String {
        self.c.describe_type(ty)
    }

    fn lit(&mut self, v: &Value, kind: LitKind, span: Span, what: &str) -> Result<usize, CheckError> {
        match kind {
            LitKind::Number => self.c.value_fits(v, ParamKind::Number, span, what)?,
            LitKind::Text => self.c.value_fits(v, ParamKind::Text, span, what)?,
            LitKind::Key(arity) => self.c.key_arity_fits(v, arity, span)?,
        }
        self.values.push((v.clone(), kind));
        Ok(self.values.len() - 1)
    }

    /// Types a path from `ty`; `single`: value paths, which must not fan out.
    /// The steps of a `repeat` or a `shortest` (`what`), which must lead back to the kind of
    /// node they start from.
    fn loop_steps(
        &mut self,
        ty: NodeTypeId,
        steps: &[Located<PatternStep>],
        scope: &HashMap<String, usize>,
        span: Span,
        what: &str,
    ) -> Result<Vec<MatchStep>, CheckError> {
        let (body, end) = self.steps(ty, steps, scope, false)?;
        if end != ty {
            return err(
                span,
                format!(
                    "the steps of `{what}` must lead back to the kind of node they start from: they start at {} \
                     and end at {}",
                    self.describe(ty),
                    self.describe(end)
                ),
            );
        }
        Ok(body)
    }

    pub(super) fn steps(
        &mut self,
        mut ty: NodeTypeId,
        steps: &[Located<PatternStep>],
        scope: &HashMap<String, usize>,
        single: bool,
    ) -> Result<(Vec<MatchStep>, NodeTypeId), CheckError> {
        if steps.len() > MAX_STEPS {
            let at = steps.first().map_or(Span::default(), |s| s.span);
            return err(at, format!("a path of {} steps; at most {MAX_STEPS} are allowed", steps.len()));
        }
        let mut out = Vec::with_capacity(steps.len());
        for step in steps {
            let s = self.step(ty, step, scope, single)?;
            ty = s.to;
            out.push(s);
        }
        Ok((out, ty))
    }

    pub(super) fn step(
        &mut self,
        ty: NodeTypeId,
        step: &Located<PatternStep>,
        scope: &HashMap<String, usize>,
        single: bool,
    ) -> Result<MatchStep, CheckError> {
        let span = step.span;
        let schema = self.schema();
        let fans = |what: &str| -> Result<MatchStep, CheckError> {
            err(
                span,
                format!(
                    "{what} reaches many nodes, but a value path must reach one; bind a variable to them \
                     (`x in …`) and read the value from it"
                ),
            )
        };
        Ok(match &step.item {
            PatternStep::Group(name) => {
                let p = self.c.property(ty, name, span)?;
                self.c.expect_kind(p, "group", "+", span)?;
                let PropertyKind::Group { node } = schema.property(p).kind else { unreachable!() };
                MatchStep { kind: MatchStepKind::Group(p), from: ty, to: node }
            }
            PatternStep::Dictionary { name, key } | PatternStep::Matrix { name, key } => {
                let matrix = matches!(step.item, PatternStep::Matrix { .. });
                let p = self.c.property(ty, name, span)?;
                let (want, sym) = if matrix { ("matrix", "%") } else { ("dictionary", ".") };
                self.c.expect_kind(p, want, sym, span)?;
                let (node, arity) = match &schema.property(p).kind {
                    PropertyKind::Dictionary { node } => (*node, None),
                    PropertyKind::Matrix { node, target } => (*node, Some(target)),
                    _ => unreachable!(),
                };
                let kind = match (key, arity) {
                    (None, _) if single => return fans(&format!("`{sym} '{name}'` without a key")),
                    (None, _) => MatchStepKind::Entries(p),
                    (Some(PatternKey::Value(v)), None) => {
                        MatchStepKind::EntryKey(p, self.lit(v, LitKind::Text, span, &format!("key of '{name}'"))?)
                    }
                    (Some(PatternKey::Value(v)), Some(target)) => {
                        MatchStepKind::EntryKey(p, self.lit(v, LitKind::Key(target.key_arity), span, "matrix key")?)
                    }
                    (Some(PatternKey::Var(var)), Some(target)) => {
                        let v = self.var(scope, var, span)?;
                        if self.vars[v].ty != target.entry_type {
                            return err(
                                span,
                                format!(
                                    "matrix '{name}' is keyed by {}, but {var} is {}",
                                    self.describe(target.entry_type),
                                    self.describe(self.vars[v].ty)
                                ),
                            );
                        }
                        MatchStepKind::EntryOf(p, v)
                    }
                    (Some(PatternKey::Var(var)), None) => {
                        return err(
                            span,
                            format!(
                                "dictionary '{name}' is keyed by text, not by a node: write its key as a value \
                                 (\"key\" or $param), or link {var} with `… == {var}`"
                            ),
                        )
                    }
                };
                MatchStep { kind, from: ty, to: node }
            }
            PatternStep::State { stategroup, state } => {
                let p = self.c.property(ty, stategroup, span)?;
                self.c.expect_kind(p, "stategroup", "?", span)?;
                let s = self.c.state_index(p, state, span)?;
                let PropertyKind::StateGroup { states } = &schema.property(p).kind else { unreachable!() };
                MatchStep { kind: MatchStepKind::State(p, s), from: ty, to: states[s as usize].node }
            }
            PatternStep::Reference(name) => {
                let p = self.c.property(ty, name, span)?;
                match &schema.property(p).kind {
                    PropertyKind::Reference { target } => {
                        MatchStep { kind: MatchStepKind::Reference(p), from: ty, to: target.entry_type }
                    }
                    PropertyKind::Matrix { target, .. } if !single => {
                        MatchStep { kind: MatchStepKind::Targets(p), from: ty, to: target.entry_type }
                    }
                    PropertyKind::Matrix { .. } => return fans(&format!("`> '{name}'` over a matrix")),
                    other => {
                        return err(
                            span,
                            format!("'{name}' is a {}, but `>` follows a reference or a matrix", other.keyword()),
                        )
                    }
                }
            }
            PatternStep::Reverse(name) => {
                if single {
                    return fans(&format!("`< '{name}'`"));
                }
                let found: Vec<PropertyId> = schema
                    .properties
                    .iter()
                    .filter(|p| p.name == *name)
                    .filter(|p| match &p.kind {
                        PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => {
                            target.entry_type == ty
                        }
                        _ => false,
                    })
                    .map(|p| p.id)
                    .collect();
                let p = match found.as_slice() {
                    [p] => *p,
                    [] => {
                        return err(
                            span,
                            format!("no reference or matrix named '{name}' points at {}", self.describe(ty)),
                        )
                    }
                    many => {
                        let places: Vec<String> =
                            many.iter().map(|&p| self.describe(schema.property(p).owner)).collect();
                        return err(
                            span,
                            format!(
                                "`< '{name}'` is ambiguous: references named '{name}' in {} point here; \
                                 follow one forwards from a variable instead (`x > '{name}' == y`)",
                                places.join(" and ")
                            ),
                        );
                    }
                };
                let owner = schema.property(p).owner;
                let kind = match schema.property(p).kind {
                    PropertyKind::Matrix { .. } => MatchStepKind::Owners(p),
                    _ => MatchStepKind::Referrers(p),
                };
                MatchStep { kind, from: ty, to: owner }
            }
            PatternStep::Up(kind) => {
                let nt = schema.node_type(ty);
                let (from, parent_of, ok) = match (kind, nt.parent) {
                    (UpKind::Dictionary, ParentLink::DictionaryEntry { property })
                    | (UpKind::Matrix, ParentLink::MatrixEntry { property }) => {
                        (UpFrom::Entry(property), property, true)
                    }
                    (UpKind::Group, ParentLink::Group { property }) => (UpFrom::Group(property), property, true),
                    (UpKind::State, ParentLink::State { property, state }) => {
                        (UpFrom::State(property, state), property, true)
                    }
                    _ => (UpFrom::Group(PropertyId::new(0)), PropertyId::new(0), false),
                };
                if !ok {
                    let sym = match kind {
                        UpKind::Dictionary => ".^",
                        UpKind::Matrix => "%^",
                        UpKind::Group => "+^",
                        UpKind::State => "?^",
                    };
                    let what = match nt.parent {
                        ParentLink::Root => "the root has no parent".to_string(),
                        ParentLink::DictionaryEntry { .. } => format!("{} is left with `.^`", self.describe(ty)),
                        ParentLink::MatrixEntry { .. } => format!("{} is left with `%^`", self.describe(ty)),
                        ParentLink::Group { .. } => format!("{} is left with `+^`", self.describe(ty)),
                        ParentLink::State { .. } => format!("{} is left with `?^`", self.describe(ty)),
                    };
                    return err(span, format!("`{sym}` does not apply here: {what}"));
                }
                if schema.record_of(ty).is_none() {
                    return err(span, format!("cannot go up from {}: it stores nothing", self.describe(ty)));
                }
                MatchStep { kind: MatchStepKind::Up(from), from: ty, to: schema.property(parent_of).owner }
            }
            PatternStep::Repeat { min, max, steps } => {
                if single {
                    return fans("`repeat`");
                }
                if min > max || *max > crate::parse::MAX_REPEAT {
                    return err(
                        span,
                        format!("`repeat {min} to {max}`: need MIN <= MAX <= {}", crate::parse::MAX_REPEAT),
                    );
                }
                let body = self.loop_steps(ty, steps, scope, span, "repeat")?;
                MatchStep { kind: MatchStepKind::Repeat { min: *min, max: *max, body }, from: ty, to: ty }
            }
        })
    }

    // ---- clauses ----

    /// Checks one level's clauses, adding its variables to `scope` (the caller removes the
    /// locals of an `exists` afterwards).
    pub(super) fn level(
        &mut self,
        clauses: &[Located<Clause>],
        scope: &mut HashMap<String, usize>,
    ) -> Result<Level, CheckError> {
        let mut level = Level::default();
        let mut conditions = Vec::new();
        for clause in clauses {
            match &clause.item {
                Clause::Bind { var, from, path } => {
                    if scope.contains_key(var) {
                        return err(clause.span, format!("variable {var} is already bound; choose another name"));
                    }
                    let (anchor, start) = match from {
                        None => (Anchor::Root, ROOT),
                        Some(f) => {
                            let v = self.var(scope, f, clause.span)?;
                            (Anchor::Var(v), self.vars[v].ty)
                        }
                    };
                    let (steps, ty) = self.steps(start, path, scope, false)?;
                    if self.schema().record_of(ty).is_none() {
                        let at = path.last().map_or(clause.span, |s| s.span);
                        return err(
                            at,
                            format!(
                                "{var} would be bound to {}, which stores nothing; bind it to the node that holds \
                                 the stategroup and test the state with `where {var} ? 'stategroup' * 'state'`",
                                self.describe(ty)
                            ),
                        );
                    }
                    if self.vars.len() >= MAX_VARS {
                        return err(clause.span, format!("a pattern may bind at most {MAX_VARS} variables"));
                    }
                    self.vars.push(MatchVar { name: var.clone(), ty });
                    let id = self.vars.len() - 1;
                    scope.insert(var.clone(), id);
                    level.locals.push(id);
                    level.edges.push(Edge { from: anchor, steps, to: id });
                }
                Clause::Where(cond) => conditions.push(cond),
            }
        }
        // Conditions see every variable of their level, wherever they are written.
        for cond in conditions {
            self.conjuncts(cond, scope, &mut level)?;
        }
        Ok(level)
    }

    /// Splits a `where` into conjuncts: positive links become edges the planner may bind by;
    /// the rest wait for their variables.
    fn conjuncts(
        &mut self,
        cond: &Located<Condition>,
        scope: &mut HashMap<String, usize>,
        level: &mut Level,
    ) -> Result<(), CheckError> {
        match &cond.item {
            Condition::And(list) => {
                for c in list {
                    self.conjuncts(c, scope, level)?;
                }
                Ok(())
            }
            Condition::Path { var, path, target: Some(target) } => {
                let from = self.var(scope, var, cond.span)?;
                let to = self.var(scope, target, cond.span)?;
                let (steps, ty) = self.steps(self.vars[from].ty, path, scope, false)?;
                self.same_type(ty, to, var, target, cond.span)?;
                let mut vars = BTreeSet::new();
                steps_vars(&steps, &mut vars);
                if vars.is_empty() || vars.iter().all(|&v| v == from || v == to) {
                    level.edges.push(Edge { from: Anchor::Var(from), steps, to });
                } else {
                    // A step keyed by a third variable: a check once all are bound.
                    vars.insert(from);
                    vars.insert(to);
                    let cond = self.reach(Anchor::Var(from), steps, Some(Anchor::Var(to)));
                    level.pending.push(Pending { cond, vars, selectivity: 0.3 });
                }
                Ok(())
            }
            _ => {
                let (cond, selectivity) = self.condition(cond, scope)?;
                let mut vars = BTreeSet::new();
                cond_vars(&cond, &mut vars);
                level.pending.push(Pending { cond, vars, selectivity });
                Ok(())
            }
        }
    }

    fn same_type(&self, ty: NodeTypeId, to: usize, var: &str, target: &str, span: Span) -> Result<(), CheckError> {
        if ty != self.vars[to].ty {
            return err(
                span,
                format!(
                    "these steps from {var} reach {}, but {target} is {}: they can never be the same node",
                    self.describe(ty),
                    self.describe(self.vars[to].ty)
                ),
            );
        }
        Ok(())
    }

    /// A condition and a guess of the share of matches it keeps.
    pub(super) fn condition(
        &mut self,
        cond: &Located<Condition>,
        scope: &mut HashMap<String, usize>,
    ) -> Result<(MatchCondition, f64), CheckError> {
        let span = cond.span;
        Ok(match &cond.item {
            Condition::And(list) => {
                let mut parts = Vec::with_capacity(list.len());
                let mut sel = 1.0;
                for c in list {
                    let (m, s) = self.condition(c, scope)?;
                    parts.push(m);
                    sel *= s;
                }
                (MatchCondition::And(parts), sel)
            }
            Condition::Or(list) => {
                let mut parts = Vec::with_capacity(list.len());
                let mut keep = 0.0;
                for c in list {
                    let (m, s) = self.condition(c, scope)?;
                    parts.push(m);
                    keep += s;
                }
                (MatchCondition::Or(parts), f64::min(keep, 1.0))
            }
            Condition::Not(inner) => {
                let (m, s) = self.condition(inner, scope)?;
                (MatchCondition::Not(Box::new(m)), f64::max(1.0 - s, 0.3))
            }
            Condition::Exists(clauses) => {
                let before: Vec<String> = scope.keys().cloned().collect();
                let level = self.level(clauses, scope)?;
                // The sub-pattern is planned from the outer variables it uses.
                let mut outer = BTreeSet::new();
                level_vars(&level, &mut outer);
                for l in &level.locals {
                    outer.remove(l);
                }
                let block = self.plan_level(level, &outer);
                scope.retain(|k, _| before.contains(k));
                (MatchCondition::Exists(block), 0.5)
            }
            Condition::Path { var, path, target } => {
                let from = self.var(scope, var, span)?;
                let (steps, ty) = self.steps(self.vars[from].ty, path, scope, false)?;
                let to = match target {
                    Some(t) => {
                        let to = self.var(scope, t, span)?;
                        self.same_type(ty, to, var, t, span)?;
                        Some(Anchor::Var(to))
                    }
                    None => None,
                };
                (self.reach(Anchor::Var(from), steps, to), 0.5)
            }
            Condition::Compare { left, op, right } => self.compare(left, *op, right, scope, span)?,
            Condition::Prefix { term, prefix } => {
                let (t, kind) = self.term(term, scope, span)?;
                if kind != Some(LeafKind::Text) {
                    return err(span, "a prefix `( [ 'p' ] * )` applies to a text property");
                }
                let prefix = self.lit(prefix, LitKind::Text, span, "prefix")?;
                (MatchCondition::Prefix { term: t, prefix }, 0.2)
            }
            Condition::In { term, states } => {
                let (t, kind) = self.term(term, scope, span)?;
                let (MatchTerm::Leaf { property, .. }, Some(LeafKind::Stategroup)) = (&t, kind) else {
                    return err(span, "`in ( 'S' … )` applies to a stategroup property");
                };
                let set =
                    states.iter().map(|s| self.c.state_index(*property, s, span)).collect::<Result<Vec<_>, _>>()?;
                (MatchCondition::States { term: t, states: set }, 0.5)
            }
        })
    }

    fn compare(
        &mut self,
        left: &Located<Term>,
        op: Comparison,
        right: &Located<Term>,
        scope: &HashMap<String, usize>,
        span: Span,
    ) -> Result<(MatchCondition, f64), CheckError> {
        if let (Term::Value(_), Term::Property { .. }) = (&left.item, &right.item) {
            // `5 < x number : 'n'` is `x number : 'n' > 5`.
            return self.compare(right, op.flipped(), left, scope, span);
        }
        let (l, lk) = self.term(left, scope, span)?;
        let Some(lk) = lk else {
            return err(span, "compare a property (`x number : 'n' > 5`); nodes are compared with `x == y` / `x != y`");
        };
        let eq = if op == Comparison::Eq { 0.1 } else { 0.3 };
        let span = located(right.span, span);
        match &right.item {
            Term::Value(v) => {
                let MatchTerm::Leaf { property, .. } = &l else { unreachable!("a leaf kind comes with a leaf term") };
                let property = *property;
                let cond = match lk {
                    LeafKind::Number => {
                        let r = self.lit(v, LitKind::Number, span, "the compared value")?;
                        MatchCondition::Compare { left: l, op, right: MatchTerm::Lit(r), how: Compared::Number }
                    }
                    LeafKind::Text => {
                        let r = self.lit(v, LitKind::Text, span, "the compared value")?;
                        MatchCondition::Compare { left: l, op, right: MatchTerm::Lit(r), how: Compared::Text }
                    }
                    LeafKind::Reference => {
                        if !matches!(op, Comparison::Eq | Comparison::Ne) {
                            return err(span, "references compare with `==` and `!=` only");
                        }
                        let PropertyKind::Reference { target } = &self.schema().property(property).kind else {
                            unreachable!()
                        };
                        let r = self.lit(v, LitKind::Key(target.key_arity), span, "the compared key")?;
                        MatchCondition::Compare { left: l, op, right: MatchTerm::Lit(r), how: Compared::Key }
                    }
                    LeafKind::Stategroup => {
                        let Value::Text(name) = v else {
                            return err(span, "a stategroup compares with a state 'Name'");
                        };
                        if !matches!(op, Comparison::Eq | Comparison::Ne) {
                            return err(span, "states compare with `==` and `!=` only");
                        }
                        let i = self.c.state_index(property, name, span)?;
                        let PropertyKind::StateGroup { states } = &self.schema().property(property).kind else {
                            unreachable!()
                        };
                        let set = if op == Comparison::Eq {
                            vec![i]
                        } else {
                            (0..states.len() as StateIndex).filter(|&j| j != i).collect()
                        };
                        MatchCondition::States { term: l, states: set }
                    }
                };
                Ok((cond, eq))
            }
            _ => {
                let (r, rk) = self.term(right, scope, span)?;
                let Some(rk) = rk else {
                    return err(span, "compare with a property (`y number : 'n'`) or a value");
                };
                if rk != lk {
                    return err(
                        span,
                        format!("cannot compare a {lk:?} with a {rk:?}; both sides must be of one kind").to_lowercase(),
                    );
                }
                let how = match lk {
                    LeafKind::Number => Compared::Number,
                    LeafKind::Text => Compared::Text,
                    LeafKind::Stategroup => Compared::StateName,
                    LeafKind::Reference => Compared::Key,
                };
                if matches!(how, Compared::StateName | Compared::Key) && !matches!(op, Comparison::Eq | Comparison::Ne)
                {
                    return err(span, "states and references compare with `==` and `!=` only");
                }
                Ok((MatchCondition::Compare { left: l, op, right: r, how }, 0.3))
            }
        }
    }

    /// A term and, for a property, its kind (`None` for a variable's key or a value).
    pub(super) fn term(
        &mut self,
        t: &Located<Term>,
        scope: &HashMap<String, usize>,
        span: Span,
    ) -> Result<(MatchTerm, Option<LeafKind>), CheckError> {
        let span = located(t.span, span);
        Ok(match &t.item {
            Term::Var(name) => (MatchTerm::Key(self.var(scope, name, span)?), None),
            Term::Property { var, path, kind, property } => {
                let v = self.var(scope, var, span)?;
                let (steps, ty) = self.steps(self.vars[v].ty, path, scope, true)?;
                let p = self.c.property(ty, property, span)?;
                crate::plan::check_leaf_kind(self.schema().property(p), *kind, span)?;
                (MatchTerm::Leaf { var: v, steps, property: p, kind: *kind }, Some(*kind))
            }
            Term::Value(v) => {
                let kind = match v {
                    Value::Int(_) => LitKind::Number,
                    _ => LitKind::Text,
                };
                (MatchTerm::Lit(self.lit(v, kind, span, "value")?), None)
            }
        })
    }

    pub(super) fn column(
        &mut self,
        e: &ColumnExpr,
        scope: &HashMap<String, usize>,
        span: Span,
    ) -> Result<MatchColumn, CheckError> {
        let number = |me: &mut Self, t: &Located<Term>, what: &str| -> Result<MatchTerm, CheckError> {
            let (m, k) = me.term(t, scope, span)?;
            if k != Some(LeafKind::Number) {
                return err(
                    located(t.span, span),
                    format!("`{what}` adds numbers: give it a number property (`x number : 'n'`)"),
                );
            }
            Ok(m)
        };
        Ok(match e {
            ColumnExpr::Term(t) => MatchColumn::Term(self.term(t, scope, span)?.0),
            ColumnExpr::Count { distinct: true, term: None } => {
                return err(span, "`count ( distinct … )` counts the distinct values of a term: name one")
            }
            ColumnExpr::Count { distinct, term } => MatchColumn::Count {
                distinct: *distinct,
                term: match term {
                    Some(t) => Some(self.term(t, scope, span)?.0),
                    None => None,
                },
            },
            ColumnExpr::Sum(t) => MatchColumn::Sum(number(self, t, "sum")?),
            ColumnExpr::Avg(t) => MatchColumn::Avg(number(self, t, "avg")?),
            ColumnExpr::Min(t) => MatchColumn::Min(self.term(t, scope, span)?.0),
            ColumnExpr::Max(t) => MatchColumn::Max(self.term(t, scope, span)?.0),
            ColumnExpr::Shortest { from, steps, to, max } => {
                if *max > crate::parse::MAX_REPEAT {
                    return err(span, format!("`shortest … max {max}`: at most {}", crate::parse::MAX_REPEAT));
                }
                let f = self.var(scope, from, span)?;
                let t = self.var(scope, to, span)?;
                let ty = self.vars[f].ty;
                let body = self.loop_steps(ty, steps, scope, span, "shortest")?;
                if self.vars[t].ty != ty {
                    return err(span, format!("{from} and {to} are different kinds of node: no path joins them"));
                }
                let back = inverse(&body, self.schema());
                MatchColumn::Shortest { from: f, body, back, to: t, max: *max }
            }
        })
    }
}

/// The span of a part, or of its whole when the part has none (JSON input).
fn located(part: Span, whole: Span) -> Span {
    if part == Span::default() {
        whole
    } else {
        part
    }
}

/// The pairs of a level's variables that one matrix step joins, by an edge or a condition
/// (not inside `exists`), each once, smaller variable first.
fn matrix_pairs(level: &Level) -> BTreeSet<(usize, usize)> {
    fn one_matrix_step(steps: &[MatchStep]) -> bool {
        matches!(steps, [s] if matches!(s.kind, MatchStepKind::Targets(_) | MatchStepKind::Owners(_)))
    }
    fn from_cond(c: &MatchCondition, out: &mut BTreeSet<(usize, usize)>) {
        match c {
            MatchCondition::And(list) | MatchCondition::Or(list) => list.iter().for_each(|c| from_cond(c, out)),
            MatchCondition::Not(c) => from_cond(c, out),
            MatchCondition::Reach { from: Anchor::Var(a), steps, to: Some(Anchor::Var(b)) }
                if a != b && one_matrix_step(steps) =>
            {
                out.insert((*a.min(b), *a.max(b)));
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    for e in &level.edges {
        if let Anchor::Var(a) = e.from {
            if a != e.to && one_matrix_step(&e.steps) {
                out.insert((a.min(e.to), a.max(e.to)));
            }
        }
    }
    for p in &level.pending {
        from_cond(&p.cond, &mut out);
    }
    out
}
