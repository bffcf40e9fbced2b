//! The wire form of instructions to the syntax tree and back, type by type. Only a value can
//! fail (a benchmark word); the error is given its place on the way out.

use espalier_instruction::ast;
use espalier_instruction::benchmark_word;
use espalier_schema::Span;

use super::{
    Clause, Column, ColumnExpr, Comparison, Condition, Filter, Instruction, Item, LeafKind, Located, Op, OrderKey,
    Pattern, PatternKey, PatternStep, Projection, Query, Refused, Start, Step, Term, UpKind, Value,
};

type Result<T> = std::result::Result<T, Refused>;

/// Wire → syntax tree.
pub(super) trait ToAst {
    type Ast;
    fn to_ast(&self) -> Result<Self::Ast>;
}

/// Syntax tree → wire.
pub(super) trait ToWire {
    type Wire;
    fn to_wire(&self) -> Self::Wire;
}

/// Puts `segment` in front of an error's place.
trait At {
    fn at(self, segment: &str) -> Self;
}

impl<T> At for Result<T> {
    fn at(self, segment: &str) -> Self {
        self.map_err(|mut e| {
            e.place = match e.place.as_str() {
                "" => segment.to_string(),
                rest if rest.starts_with('[') => format!("{segment}{rest}"),
                rest => format!("{segment}.{rest}"),
            };
            e
        })
    }
}

impl<T: ToAst> ToAst for Vec<T> {
    type Ast = Vec<T::Ast>;
    fn to_ast(&self) -> Result<Self::Ast> {
        self.iter().enumerate().map(|(i, x)| x.to_ast().at(&format!("[{i}]"))).collect()
    }
}

impl<T: ToAst> ToAst for Option<T> {
    type Ast = Option<T::Ast>;
    fn to_ast(&self) -> Result<Self::Ast> {
        self.as_ref().map(ToAst::to_ast).transpose()
    }
}

impl<T: ToAst> ToAst for Box<T> {
    type Ast = Box<T::Ast>;
    fn to_ast(&self) -> Result<Self::Ast> {
        (**self).to_ast().map(Box::new)
    }
}

impl<T: ToAst> ToAst for Located<T> {
    type Ast = ast::Located<T::Ast>;
    fn to_ast(&self) -> Result<Self::Ast> {
        Ok(ast::Located { item: self.item.to_ast()?, span: Span::default() })
    }
}

impl<T: ToWire> ToWire for Vec<T> {
    type Wire = Vec<T::Wire>;
    fn to_wire(&self) -> Self::Wire {
        self.iter().map(ToWire::to_wire).collect()
    }
}

impl<T: ToWire> ToWire for Option<T> {
    type Wire = Option<T::Wire>;
    fn to_wire(&self) -> Self::Wire {
        self.as_ref().map(ToWire::to_wire)
    }
}

impl<T: ToWire> ToWire for Box<T> {
    type Wire = Box<T::Wire>;
    fn to_wire(&self) -> Self::Wire {
        Box::new((**self).to_wire())
    }
}

impl<T: ToWire> ToWire for ast::Located<T> {
    type Wire = Located<T::Wire>;
    fn to_wire(&self) -> Self::Wire {
        Located { item: self.item.to_wire() }
    }
}

impl ToAst for Value {
    type Ast = ast::Value;
    fn to_ast(&self) -> Result<ast::Value> {
        let refuse = |word: &str| Err(Refused { place: String::new(), message: benchmark_word(word) });
        Ok(match self {
            Value::Int(n) => ast::Value::Int(*n),
            Value::Text(t) => ast::Value::Text(t.clone()),
            Value::Compound(parts) => ast::Value::Compound(parts.to_ast().at("compound")?),
            Value::Param(p) => ast::Value::Param(p.clone()),
            Value::Index => return refuse("index"),
            Value::Random(_) => return refuse("random"),
        })
    }
}

impl ToWire for ast::Value {
    type Wire = Value;
    fn to_wire(&self) -> Value {
        match self {
            ast::Value::Int(n) => Value::Int(*n),
            ast::Value::Text(t) => Value::Text(t.clone()),
            ast::Value::Compound(parts) => Value::Compound(parts.to_wire()),
            ast::Value::Param(p) => Value::Param(p.clone()),
        }
    }
}

impl ToAst for Step {
    type Ast = ast::Step;
    fn to_ast(&self) -> Result<ast::Step> {
        Ok(match self {
            Step::Group(g) => ast::Step::Group(g.clone()),
            Step::Dictionary { name, key } => {
                ast::Step::Dictionary { name: name.clone(), key: key.to_ast().at("dictionary.key")? }
            }
            Step::Matrix { name, key } => ast::Step::Matrix { name: name.clone(), key: key.to_ast().at("matrix.key")? },
            Step::State { stategroup, state } => {
                ast::Step::State { stategroup: stategroup.clone(), state: state.clone() }
            }
            Step::Reference(r) => ast::Step::Reference(r.clone()),
        })
    }
}

impl ToWire for ast::Step {
    type Wire = Step;
    fn to_wire(&self) -> Step {
        match self {
            ast::Step::Group(g) => Step::Group(g.clone()),
            ast::Step::Dictionary { name, key } => Step::Dictionary { name: name.clone(), key: key.to_wire() },
            ast::Step::Matrix { name, key } => Step::Matrix { name: name.clone(), key: key.to_wire() },
            ast::Step::State { stategroup, state } => {
                Step::State { stategroup: stategroup.clone(), state: state.clone() }
            }
            ast::Step::Reference(r) => Step::Reference(r.clone()),
        }
    }
}

impl ToAst for Instruction {
    type Ast = ast::Instruction;
    fn to_ast(&self) -> Result<ast::Instruction> {
        Ok(match self {
            Instruction::Update { path, items } => ast::Instruction::Update {
                path: path.to_ast().at("update.path")?,
                items: items.to_ast().at("update.items")?,
            },
            Instruction::Query(q) => ast::Instruction::Query(q.to_ast().at("query")?),
            Instruction::Match(p) => ast::Instruction::Match(p.to_ast().at("match")?),
            Instruction::Get { path } => ast::Instruction::Get { path: path.to_ast().at("get.path")? },
            Instruction::Command { name, args } => ast::Instruction::Command {
                name: name.clone(),
                args: args
                    .iter()
                    .enumerate()
                    .map(|(i, (n, v))| Ok((n.clone(), v.to_ast().at(&format!("command.args[{i}]"))?)))
                    .collect::<Result<_>>()?,
            },
            Instruction::Transaction(list) => ast::Instruction::Transaction(list.to_ast().at("transaction")?),
        })
    }
}

impl ToWire for ast::Instruction {
    type Wire = Instruction;
    fn to_wire(&self) -> Instruction {
        match self {
            ast::Instruction::Update { path, items } => {
                Instruction::Update { path: path.to_wire(), items: items.to_wire() }
            }
            ast::Instruction::Query(q) => Instruction::Query(q.to_wire()),
            ast::Instruction::Match(p) => Instruction::Match(p.to_wire()),
            ast::Instruction::Get { path } => Instruction::Get { path: path.to_wire() },
            ast::Instruction::Command { name, args } => Instruction::Command {
                name: name.clone(),
                args: args.iter().map(|(n, v)| (n.clone(), v.to_wire())).collect(),
            },
            ast::Instruction::Transaction(list) => Instruction::Transaction(list.to_wire()),
        }
    }
}

impl ToAst for Item {
    type Ast = ast::Item;
    fn to_ast(&self) -> Result<ast::Item> {
        Ok(ast::Item { name: self.name.clone(), op: self.op.to_ast().at("op")? })
    }
}

impl ToWire for ast::Item {
    type Wire = Item;
    fn to_wire(&self) -> Item {
        Item { name: self.name.clone(), op: self.op.to_wire() }
    }
}

impl ToAst for Op {
    type Ast = ast::Op;
    fn to_ast(&self) -> Result<ast::Op> {
        Ok(match self {
            Op::SetNumber(v) => ast::Op::SetNumber(v.to_ast().at("set_number")?),
            Op::AddNumber(v) => ast::Op::AddNumber(v.to_ast().at("add_number")?),
            Op::SetText(v) => ast::Op::SetText(v.to_ast().at("set_text")?),
            Op::SetReference(v) => ast::Op::SetReference(v.to_ast().at("set_reference")?),
            Op::Group(items) => ast::Op::Group(items.to_ast().at("group")?),
            Op::AddEntry { key, items } => ast::Op::AddEntry {
                key: key.to_ast().at("add_entry.key")?,
                items: items.to_ast().at("add_entry.items")?,
            },
            Op::UpdateEntry { key, items } => ast::Op::UpdateEntry {
                key: key.to_ast().at("update_entry.key")?,
                items: items.to_ast().at("update_entry.items")?,
            },
            Op::RemoveEntry { key } => ast::Op::RemoveEntry { key: key.to_ast().at("remove_entry.key")? },
            Op::SwitchState { state, items } => ast::Op::SwitchState {
                state: state.to_ast().at("switch_state.state")?,
                items: items.to_ast().at("switch_state.items")?,
            },
            Op::UpdateState { state, items } => {
                ast::Op::UpdateState { state: state.clone(), items: items.to_ast().at("update_state.items")? }
            }
        })
    }
}

impl ToWire for ast::Op {
    type Wire = Op;
    fn to_wire(&self) -> Op {
        match self {
            ast::Op::SetNumber(v) => Op::SetNumber(v.to_wire()),
            ast::Op::AddNumber(v) => Op::AddNumber(v.to_wire()),
            ast::Op::SetText(v) => Op::SetText(v.to_wire()),
            ast::Op::SetReference(v) => Op::SetReference(v.to_wire()),
            ast::Op::Group(items) => Op::Group(items.to_wire()),
            ast::Op::AddEntry { key, items } => Op::AddEntry { key: key.to_wire(), items: items.to_wire() },
            ast::Op::UpdateEntry { key, items } => Op::UpdateEntry { key: key.to_wire(), items: items.to_wire() },
            ast::Op::RemoveEntry { key } => Op::RemoveEntry { key: key.to_wire() },
            ast::Op::SwitchState { state, items } => Op::SwitchState { state: state.to_wire(), items: items.to_wire() },
            ast::Op::UpdateState { state, items } => Op::UpdateState { state: state.clone(), items: items.to_wire() },
        }
    }
}

impl ToAst for Query {
    type Ast = ast::Query;
    fn to_ast(&self) -> Result<ast::Query> {
        Ok(ast::Query {
            path: self.path.to_ast().at("path")?,
            select: self.select.to_ast().at("select")?,
            start: self.start.to_ast().at("start")?,
            projections: self.projections.to_ast().at("projections")?,
            limit: self.limit,
            offset: self.offset,
        })
    }
}

impl ToWire for ast::Query {
    type Wire = Query;
    fn to_wire(&self) -> Query {
        Query {
            path: self.path.to_wire(),
            select: self.select.to_wire(),
            start: self.start.to_wire(),
            projections: self.projections.to_wire(),
            limit: self.limit,
            offset: self.offset,
        }
    }
}

impl ToAst for Start {
    type Ast = ast::Start;
    fn to_ast(&self) -> Result<ast::Start> {
        let located = |v: &Value, at: &str| -> Result<ast::Located<ast::Value>> {
            Ok(ast::Located { item: v.to_ast().at(at)?, span: Span::default() })
        };
        Ok(match self {
            Start::From(v) => ast::Start::From(located(v, "from")?),
            Start::After(v) => ast::Start::After(located(v, "after")?),
        })
    }
}

impl ToWire for ast::Start {
    type Wire = Start;
    fn to_wire(&self) -> Start {
        match self {
            ast::Start::From(v) => Start::From(v.item.to_wire()),
            ast::Start::After(v) => Start::After(v.item.to_wire()),
        }
    }
}

impl ToAst for Projection {
    type Ast = ast::Projection;
    fn to_ast(&self) -> Result<ast::Projection> {
        Ok(ast::Projection {
            alias: self.alias.clone(),
            path: self.path.to_ast().at("path")?,
            kind: self.kind.into(),
            property: self.property.clone(),
            filter: self.filter.to_ast().at("filter")?,
        })
    }
}

impl ToWire for ast::Projection {
    type Wire = Projection;
    fn to_wire(&self) -> Projection {
        Projection {
            alias: self.alias.clone(),
            path: self.path.to_wire(),
            kind: self.kind.into(),
            property: self.property.clone(),
            filter: self.filter.to_wire(),
        }
    }
}

/// Enums without data, the same both sides.
macro_rules! same_enum {
    ($wire:ident, $ast:path, $($v:ident),+) => {
        impl From<$wire> for $ast {
            fn from(x: $wire) -> Self {
                match x { $($wire::$v => <$ast>::$v,)+ }
            }
        }
        impl From<$ast> for $wire {
            fn from(x: $ast) -> Self {
                match x { $(<$ast>::$v => $wire::$v,)+ }
            }
        }
    };
}

same_enum!(LeafKind, ast::LeafKind, Number, Text, Stategroup, Reference);
same_enum!(Comparison, ast::Comparison, Eq, Ne, Lt, Le, Gt, Ge);
same_enum!(UpKind, ast::UpKind, Dictionary, Matrix, Group, State);

impl ToAst for Filter {
    type Ast = ast::Filter;
    fn to_ast(&self) -> Result<ast::Filter> {
        Ok(match self {
            Filter::Compare { op, value } => {
                ast::Filter::Compare { op: (*op).into(), value: value.to_ast().at("compare")? }
            }
            Filter::Prefix(v) => ast::Filter::Prefix(v.to_ast().at("prefix")?),
            Filter::In(states) => ast::Filter::In(states.clone()),
        })
    }
}

impl ToWire for ast::Filter {
    type Wire = Filter;
    fn to_wire(&self) -> Filter {
        match self {
            ast::Filter::Compare { op, value } => Filter::Compare { op: (*op).into(), value: value.to_wire() },
            ast::Filter::Prefix(v) => Filter::Prefix(v.to_wire()),
            ast::Filter::In(states) => Filter::In(states.clone()),
        }
    }
}

impl ToAst for Pattern {
    type Ast = ast::Pattern;
    fn to_ast(&self) -> Result<ast::Pattern> {
        Ok(ast::Pattern {
            clauses: self.clauses.to_ast().at("clauses")?,
            distinct: self.distinct,
            columns: self.columns.to_ast().at("columns")?,
            order: self
                .order
                .iter()
                .map(|k| ast::OrderKey { alias: k.alias.clone(), descending: k.descending })
                .collect(),
            limit: self.limit,
            offset: self.offset,
            explain: self.explain,
        })
    }
}

impl ToWire for ast::Pattern {
    type Wire = Pattern;
    fn to_wire(&self) -> Pattern {
        Pattern {
            clauses: self.clauses.to_wire(),
            distinct: self.distinct,
            columns: self.columns.to_wire(),
            order: self.order.iter().map(|k| OrderKey { alias: k.alias.clone(), descending: k.descending }).collect(),
            limit: self.limit,
            offset: self.offset,
            explain: self.explain,
        }
    }
}

impl ToAst for Clause {
    type Ast = ast::Clause;
    fn to_ast(&self) -> Result<ast::Clause> {
        Ok(match self {
            Clause::Bind { var, from, path } => {
                ast::Clause::Bind { var: var.clone(), from: from.clone(), path: path.to_ast().at("bind.path")? }
            }
            Clause::Where(c) => ast::Clause::Where(c.to_ast().at("where")?),
        })
    }
}

impl ToWire for ast::Clause {
    type Wire = Clause;
    fn to_wire(&self) -> Clause {
        match self {
            ast::Clause::Bind { var, from, path } => {
                Clause::Bind { var: var.clone(), from: from.clone(), path: path.to_wire() }
            }
            ast::Clause::Where(c) => Clause::Where(c.to_wire()),
        }
    }
}

impl ToAst for PatternStep {
    type Ast = ast::PatternStep;
    fn to_ast(&self) -> Result<ast::PatternStep> {
        Ok(match self {
            PatternStep::Group(g) => ast::PatternStep::Group(g.clone()),
            PatternStep::Dictionary { name, key } => {
                ast::PatternStep::Dictionary { name: name.clone(), key: key.to_ast().at("dictionary.key")? }
            }
            PatternStep::Matrix { name, key } => {
                ast::PatternStep::Matrix { name: name.clone(), key: key.to_ast().at("matrix.key")? }
            }
            PatternStep::State { stategroup, state } => {
                ast::PatternStep::State { stategroup: stategroup.clone(), state: state.clone() }
            }
            PatternStep::Reference(r) => ast::PatternStep::Reference(r.clone()),
            PatternStep::Reverse(r) => ast::PatternStep::Reverse(r.clone()),
            PatternStep::Up(k) => ast::PatternStep::Up((*k).into()),
            PatternStep::Repeat { min, max, steps } => {
                ast::PatternStep::Repeat { min: *min, max: *max, steps: steps.to_ast().at("repeat.steps")? }
            }
        })
    }
}

impl ToWire for ast::PatternStep {
    type Wire = PatternStep;
    fn to_wire(&self) -> PatternStep {
        match self {
            ast::PatternStep::Group(g) => PatternStep::Group(g.clone()),
            ast::PatternStep::Dictionary { name, key } => {
                PatternStep::Dictionary { name: name.clone(), key: key.to_wire() }
            }
            ast::PatternStep::Matrix { name, key } => PatternStep::Matrix { name: name.clone(), key: key.to_wire() },
            ast::PatternStep::State { stategroup, state } => {
                PatternStep::State { stategroup: stategroup.clone(), state: state.clone() }
            }
            ast::PatternStep::Reference(r) => PatternStep::Reference(r.clone()),
            ast::PatternStep::Reverse(r) => PatternStep::Reverse(r.clone()),
            ast::PatternStep::Up(k) => PatternStep::Up((*k).into()),
            ast::PatternStep::Repeat { min, max, steps } => {
                PatternStep::Repeat { min: *min, max: *max, steps: steps.to_wire() }
            }
        }
    }
}

impl ToAst for PatternKey {
    type Ast = ast::PatternKey;
    fn to_ast(&self) -> Result<ast::PatternKey> {
        Ok(match self {
            PatternKey::Value(v) => ast::PatternKey::Value(v.to_ast().at("value")?),
            PatternKey::Var(v) => ast::PatternKey::Var(v.clone()),
        })
    }
}

impl ToWire for ast::PatternKey {
    type Wire = PatternKey;
    fn to_wire(&self) -> PatternKey {
        match self {
            ast::PatternKey::Value(v) => PatternKey::Value(v.to_wire()),
            ast::PatternKey::Var(v) => PatternKey::Var(v.clone()),
        }
    }
}

impl ToAst for Condition {
    type Ast = ast::Condition;
    fn to_ast(&self) -> Result<ast::Condition> {
        Ok(match self {
            Condition::And(parts) => ast::Condition::And(parts.to_ast().at("and")?),
            Condition::Or(parts) => ast::Condition::Or(parts.to_ast().at("or")?),
            Condition::Not(c) => ast::Condition::Not(c.to_ast().at("not")?),
            Condition::Exists(clauses) => ast::Condition::Exists(clauses.to_ast().at("exists")?),
            Condition::Path { var, path, target } => {
                ast::Condition::Path { var: var.clone(), path: path.to_ast().at("path.path")?, target: target.clone() }
            }
            Condition::Compare { left, op, right } => ast::Condition::Compare {
                left: left.to_ast().at("compare.left")?,
                op: (*op).into(),
                right: right.to_ast().at("compare.right")?,
            },
            Condition::Prefix { term, prefix } => ast::Condition::Prefix {
                term: term.to_ast().at("prefix.term")?,
                prefix: prefix.to_ast().at("prefix.prefix")?,
            },
            Condition::In { term, states } => {
                ast::Condition::In { term: term.to_ast().at("in.term")?, states: states.clone() }
            }
        })
    }
}

impl ToWire for ast::Condition {
    type Wire = Condition;
    fn to_wire(&self) -> Condition {
        match self {
            ast::Condition::And(parts) => Condition::And(parts.to_wire()),
            ast::Condition::Or(parts) => Condition::Or(parts.to_wire()),
            ast::Condition::Not(c) => Condition::Not(c.to_wire()),
            ast::Condition::Exists(clauses) => Condition::Exists(clauses.to_wire()),
            ast::Condition::Path { var, path, target } => {
                Condition::Path { var: var.clone(), path: path.to_wire(), target: target.clone() }
            }
            ast::Condition::Compare { left, op, right } => {
                Condition::Compare { left: left.to_wire(), op: (*op).into(), right: right.to_wire() }
            }
            ast::Condition::Prefix { term, prefix } => {
                Condition::Prefix { term: term.to_wire(), prefix: prefix.to_wire() }
            }
            ast::Condition::In { term, states } => Condition::In { term: term.to_wire(), states: states.clone() },
        }
    }
}

impl ToAst for Term {
    type Ast = ast::Term;
    fn to_ast(&self) -> Result<ast::Term> {
        Ok(match self {
            Term::Var(v) => ast::Term::Var(v.clone()),
            Term::Property { var, path, kind, property } => ast::Term::Property {
                var: var.clone(),
                path: path.to_ast().at("property.path")?,
                kind: (*kind).into(),
                property: property.clone(),
            },
            Term::Value(v) => ast::Term::Value(v.to_ast().at("value")?),
        })
    }
}

impl ToWire for ast::Term {
    type Wire = Term;
    fn to_wire(&self) -> Term {
        match self {
            ast::Term::Var(v) => Term::Var(v.clone()),
            ast::Term::Property { var, path, kind, property } => Term::Property {
                var: var.clone(),
                path: path.to_wire(),
                kind: (*kind).into(),
                property: property.clone(),
            },
            ast::Term::Value(v) => Term::Value(v.to_wire()),
        }
    }
}

impl ToAst for Column {
    type Ast = ast::Column;
    fn to_ast(&self) -> Result<ast::Column> {
        Ok(ast::Column { alias: self.alias.clone(), expr: self.expr.to_ast().at("expr")? })
    }
}

impl ToWire for ast::Column {
    type Wire = Column;
    fn to_wire(&self) -> Column {
        Column { alias: self.alias.clone(), expr: self.expr.to_wire() }
    }
}

impl ToAst for ColumnExpr {
    type Ast = ast::ColumnExpr;
    fn to_ast(&self) -> Result<ast::ColumnExpr> {
        Ok(match self {
            ColumnExpr::Term(t) => ast::ColumnExpr::Term(t.to_ast().at("term")?),
            ColumnExpr::Count { distinct, term } => {
                ast::ColumnExpr::Count { distinct: *distinct, term: term.to_ast().at("count.term")? }
            }
            ColumnExpr::Sum(t) => ast::ColumnExpr::Sum(t.to_ast().at("sum")?),
            ColumnExpr::Min(t) => ast::ColumnExpr::Min(t.to_ast().at("min")?),
            ColumnExpr::Max(t) => ast::ColumnExpr::Max(t.to_ast().at("max")?),
            ColumnExpr::Avg(t) => ast::ColumnExpr::Avg(t.to_ast().at("avg")?),
            ColumnExpr::Shortest { from, steps, to, max } => ast::ColumnExpr::Shortest {
                from: from.clone(),
                steps: steps.to_ast().at("shortest.steps")?,
                to: to.clone(),
                max: *max,
            },
        })
    }
}

impl ToWire for ast::ColumnExpr {
    type Wire = ColumnExpr;
    fn to_wire(&self) -> ColumnExpr {
        match self {
            ast::ColumnExpr::Term(t) => ColumnExpr::Term(t.to_wire()),
            ast::ColumnExpr::Count { distinct, term } => {
                ColumnExpr::Count { distinct: *distinct, term: term.to_wire() }
            }
            ast::ColumnExpr::Sum(t) => ColumnExpr::Sum(t.to_wire()),
            ast::ColumnExpr::Min(t) => ColumnExpr::Min(t.to_wire()),
            ast::ColumnExpr::Max(t) => ColumnExpr::Max(t.to_wire()),
            ast::ColumnExpr::Avg(t) => ColumnExpr::Avg(t.to_wire()),
            ast::ColumnExpr::Shortest { from, steps, to, max } => {
                ColumnExpr::Shortest { from: from.clone(), steps: steps.to_wire(), to: to.clone(), max: *max }
            }
        }
    }
}
