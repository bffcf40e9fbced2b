//! A plan in words, for `explain` and tests.

use super::*;

/// One line of a plan in words: the operation, the planner's estimate of the rows leaving it
/// (per run of its block) and its id (to look up the rows it actually produced).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanLine {
    /// The operation in words, indented by its block's depth.
    pub text: String,
    /// The planner's estimate of the rows leaving it; `None` for the output stage.
    pub estimate: Option<f64>,
    /// The operation's id; `None` for the output stage.
    pub op: Option<usize>,
}

impl MatchPlan {
    /// The plan in words, one line per operation (for `explain` and tests).
    pub fn describe(&self, schema: &Schema) -> Vec<String> {
        self.lines(schema).into_iter().map(|l| l.text).collect()
    }

    /// [`MatchPlan::describe`] with estimates and operation ids; the last line is the output
    /// stage (grouping, distinct, order, page).
    pub fn lines(&self, schema: &Schema) -> Vec<PlanLine> {
        let mut out = Vec::new();
        self.describe_block(&self.block, schema, 0, &mut out);
        let mut tail = String::new();
        if self.grouped {
            let keys: Vec<&str> = self
                .columns
                .iter()
                .zip(&self.aliases)
                .filter(|(c, _)| !c.is_aggregate())
                .map(|(_, a)| a.as_str())
                .collect();
            let _ = write!(tail, "group by [{}]; ", keys.join(", "));
        }
        if self.distinct {
            tail.push_str("distinct; ");
        }
        if !self.order.is_empty() {
            let keys: Vec<String> = self
                .order
                .iter()
                .map(|&(i, d)| format!("{}{}", self.aliases[i], if d { " desc" } else { "" }))
                .collect();
            let _ = write!(tail, "order by {}; ", keys.join(", "));
        }
        if let Some(l) = self.limit {
            let _ = write!(tail, "limit {l}; ");
        }
        if self.offset > 0 {
            let _ = write!(tail, "offset {}; ", self.offset);
        }
        // A shortest path says which way it is searched.
        let columns: Vec<String> = self
            .columns
            .iter()
            .zip(&self.aliases)
            .map(|(c, a)| match c {
                MatchColumn::Shortest { back: Some(_), .. } => format!("{a} (shortest, searched from both ends)"),
                MatchColumn::Shortest { back: None, .. } => format!("{a} (shortest, searched from the start)"),
                _ => a.clone(),
            })
            .collect();
        let _ = write!(tail, "columns {}", columns.join(", "));
        out.push(PlanLine { text: tail, estimate: None, op: None });
        out
    }

    fn describe_block(&self, block: &Block, schema: &Schema, depth: usize, out: &mut Vec<PlanLine>) {
        let pad = "  ".repeat(depth);
        for op in &block.ops {
            let (estimate, id) = (Some(op.estimate), Some(op.id));
            match &op.kind {
                MatchOp::Scan { var, from, steps, dedupe, backward } => {
                    let dir = if *backward { " (backwards)" } else { "" };
                    let uniq = if *dedupe { ", each node once" } else { "" };
                    let table = if reads_table(from, steps) { " (reads its table)" } else { "" };
                    let text = format!(
                        "{pad}bind {} from {}{}{dir}{uniq}{table}",
                        self.vars[*var].name,
                        self.anchor(from),
                        self.describe_steps(steps, schema)
                    );
                    out.push(PlanLine { text, estimate, op: id });
                }
                MatchOp::Index { var, index, probe } => {
                    let decl = &schema.indexes[*index as usize];
                    let property = &schema.property(decl.property).name;
                    let lookup = match probe {
                        IndexProbe::Equal(v) => format!("'{property}' == {}", self.lit_text(*v)),
                        IndexProbe::EqualTerm(t) => format!("'{property}' == {}", self.term_text(t, schema)),
                        IndexProbe::States(list) => {
                            let names: Vec<String> =
                                list.iter().map(|&s| format!("'{}'", schema.state_name(decl.property, s))).collect();
                            format!("'{property}' in state {}", names.join(" or "))
                        }
                        IndexProbe::Prefix(v) => format!("'{property}' starts with {}", self.lit_text(*v)),
                        IndexProbe::Range { low, high } => {
                            let low = low.map_or("…".to_string(), |v| self.lit_text(v));
                            let high = high.map_or("…".to_string(), |v| self.lit_text(v));
                            format!("'{property}' from {low} to {high}")
                        }
                    };
                    let text = format!("{pad}bind {} by index '{}' ({lookup})", self.vars[*var].name, decl.name);
                    out.push(PlanLine { text, estimate, op: id });
                }
                MatchOp::Filter(c) => self.describe_cond(c, schema, depth, estimate, id, out),
            }
        }
    }

    fn anchor(&self, a: &Anchor) -> String {
        match a {
            Anchor::Root => "root".into(),
            Anchor::Var(v) => self.vars[*v].name.clone(),
        }
    }

    fn describe_cond(
        &self,
        c: &MatchCondition,
        schema: &Schema,
        depth: usize,
        estimate: Option<f64>,
        op: Option<usize>,
        out: &mut Vec<PlanLine>,
    ) {
        let pad = "  ".repeat(depth);
        match c {
            MatchCondition::Exists(block) => {
                out.push(PlanLine { text: format!("{pad}semi-join (exists):"), estimate, op });
                self.describe_block(block, schema, depth + 1, out);
            }
            MatchCondition::Not(inner) if matches!(**inner, MatchCondition::Exists(_)) => {
                let MatchCondition::Exists(block) = &**inner else { unreachable!() };
                out.push(PlanLine { text: format!("{pad}anti-join (not exists):"), estimate, op });
                self.describe_block(block, schema, depth + 1, out);
            }
            other => {
                out.push(PlanLine { text: format!("{pad}filter {}", self.cond_text(other, schema)), estimate, op })
            }
        }
    }

    fn cond_text(&self, c: &MatchCondition, schema: &Schema) -> String {
        match c {
            MatchCondition::And(l) => l.iter().map(|c| self.cond_text(c, schema)).collect::<Vec<_>>().join(" and "),
            MatchCondition::Or(l) => {
                format!("({})", l.iter().map(|c| self.cond_text(c, schema)).collect::<Vec<_>>().join(" or "))
            }
            MatchCondition::Not(c) => format!("not {}", self.cond_text(c, schema)),
            MatchCondition::Exists(_) => "exists ( … )".into(),
            MatchCondition::Reach { from, steps, to } => match (to, steps.split_last()) {
                // Checked from the goal's side with one lookup (see the executor's `reaches`).
                (Some(goal), Some((last, rest))) if Self::goal_lookup(last).is_some() => {
                    let (sym, p, how) = Self::goal_lookup(last).unwrap_or(("", PropertyId::new(0), ""));
                    let goal = self.anchor(goal);
                    format!(
                        "{}{} {sym} '{}' reaches {goal} (one lookup: {how} {goal})",
                        self.anchor(from),
                        self.describe_steps(rest, schema),
                        schema.property(p).name
                    )
                }
                (Some(goal), _) => {
                    format!("{}{} reaches {}", self.anchor(from), self.describe_steps(steps, schema), self.anchor(goal))
                }
                (None, _) => format!("{}{} leads somewhere", self.anchor(from), self.describe_steps(steps, schema)),
            },
            MatchCondition::Compare { left, op, right, .. } => {
                let op = match op {
                    Comparison::Eq => "==",
                    Comparison::Ne => "!=",
                    Comparison::Lt => "<",
                    Comparison::Le => "<=",
                    Comparison::Gt => ">",
                    Comparison::Ge => ">=",
                };
                format!("{} {op} {}", self.term_text(left, schema), self.term_text(right, schema))
            }
            MatchCondition::Prefix { term, prefix } => {
                format!("{} starts with {}", self.term_text(term, schema), self.lit_text(*prefix))
            }
            MatchCondition::States { term, states } => {
                let MatchTerm::Leaf { property, .. } = term else { return "?".into() };
                let PropertyKind::StateGroup { states: all } = &schema.property(*property).kind else {
                    return "?".into();
                };
                let names: Vec<String> =
                    states.iter().filter_map(|&s| all.get(s as usize)).map(|s| format!("'{}'", s.name)).collect();
                format!("{} in ( {} )", self.term_text(term, schema), names.join(" "))
            }
        }
    }

    /// How a last step is checked against a known goal, if by one lookup: its symbol, its
    /// property and what is looked up.
    fn goal_lookup(last: &MatchStep) -> Option<(&'static str, PropertyId, &'static str)> {
        match last.kind {
            MatchStepKind::Targets(p) => Some((">", p, "the matrix entry keyed by")),
            MatchStepKind::Owners(p) => Some(("<", p, "the matrix entry keyed here, in")),
            MatchStepKind::Referrers(p) => Some(("<", p, "the reference slot of")),
            MatchStepKind::Entries(p) => Some((".", p, "the parent of")),
            _ => None,
        }
    }

    fn lit_text(&self, i: usize) -> String {
        match &self.values[i].0 {
            Value::Int(n) => n.to_string(),
            Value::Text(t) => format!("{t:?}"),
            Value::Param(p) => format!("${p}"),
            other => format!("{other:?}"),
        }
    }

    fn term_text(&self, t: &MatchTerm, schema: &Schema) -> String {
        match t {
            MatchTerm::Key(v) => self.vars[*v].name.clone(),
            MatchTerm::Leaf { var, steps, property, .. } => format!(
                "{}{} '{}'",
                self.vars[*var].name,
                self.describe_steps(steps, schema),
                schema.property(*property).name
            ),
            MatchTerm::Lit(i) => self.lit_text(*i),
        }
    }

    fn describe_steps(&self, steps: &[MatchStep], schema: &Schema) -> String {
        let mut s = String::new();
        for step in steps {
            let name = |p: &PropertyId| schema.property(*p).name.clone();
            let _ = match &step.kind {
                MatchStepKind::Group(p) => write!(s, " + '{}'", name(p)),
                MatchStepKind::Entries(p) => {
                    let sym = if matches!(schema.property(*p).kind, PropertyKind::Matrix { .. }) { '%' } else { '.' };
                    write!(s, " {sym} '{}' (scan)", name(p))
                }
                MatchStepKind::EntryKey(p, k) => write!(s, " . '{}' : {} (lookup by key)", name(p), self.lit_text(*k)),
                MatchStepKind::EntryOf(p, v) => write!(s, " % '{}' : {} (lookup by key)", name(p), self.vars[*v].name),
                MatchStepKind::State(p, st) => {
                    let state = match &schema.property(*p).kind {
                        PropertyKind::StateGroup { states } => {
                            states.get(*st as usize).map_or("?".to_string(), |x| x.name.clone())
                        }
                        _ => "?".into(),
                    };
                    write!(s, " ? '{}' * '{state}'", name(p))
                }
                MatchStepKind::Reference(p) => write!(s, " > '{}'", name(p)),
                MatchStepKind::Targets(p) => write!(s, " > '{}' (matrix, forwards)", name(p)),
                MatchStepKind::Referrers(p) => write!(s, " < '{}' (reference, backwards by the link index)", name(p)),
                MatchStepKind::Owners(p) => write!(s, " < '{}' (matrix, backwards by the link index)", name(p)),
                MatchStepKind::Up(_) => write!(s, " ^"),
                MatchStepKind::UpIfKey(_, k) => write!(s, " ^ (if key {})", self.lit_text(*k)),
                MatchStepKind::UpIfTarget(_, v) => write!(s, " ^ (if keyed by {})", self.vars[*v].name),
                MatchStepKind::Repeat { min, max, body } => {
                    write!(s, " repeat {min} to {max} ({} )", self.describe_steps(body, schema))
                }
            };
        }
        s
    }
}
