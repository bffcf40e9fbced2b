//! Syntax tree → [`Schema`]: node types and properties, name checks, path resolution,
//! commands and indexes, then the record layout.
//!
//! Errors are collected, not returned at the first one; paths are resolved only after every
//! node type exists, so a reference may point anywhere in the model (also at its own
//! dictionary).

use std::collections::HashMap;

use crate::diagnostic::{line_column, push_error, Diagnostic, Diagnostics, Span, MAX_ERRORS};
use crate::lexer::tokenize;
use crate::model::*;
use crate::parse::{parse, SynDown, SynFile, SynKind, SynNode, SynOver, SynPath, SynProperty, UpSymbol};

/// Compiles schema text into a [`Schema`], or every error found.
pub fn compile(source: &str) -> Result<Schema, Diagnostics> {
    let tokens = tokenize(source).map_err(|d| Diagnostics(vec![d]))?;
    let file = parse(source, &tokens).map_err(Diagnostics)?;
    let mut b = Builder {
        schema: Schema {
            source: source.to_string(),
            types: Vec::new(),
            properties: Vec::new(),
            commands: Vec::new(),
            indexes: Vec::new(),
            derived_ids: Vec::new(),
        },
        pending: Vec::new(),
        pending_derived: Vec::new(),
        errors: Vec::new(),
    };
    b.build(file);
    if b.errors.is_empty() {
        b.check_invariants();
        Ok(b.schema)
    } else {
        b.errors.sort_by_key(|d| (d.span.start, d.span.end));
        Err(Diagnostics(b.errors))
    }
}

struct Builder {
    schema: Schema,
    /// References and matrices whose paths are resolved once all node types exist.
    pending: Vec<(PropertyId, SynPath)>,
    /// Derived properties, resolved once every reference's target is known.
    pending_derived: Vec<(PropertyId, SynKind)>,
    errors: Vec<Diagnostic>,
}

/// A resolved down step; `Matrix` only occurs in index paths.
#[derive(Clone, Copy)]
enum Step {
    Down(DownStep),
    Matrix(PropertyId),
}

fn id32(n: usize) -> u32 {
    // The lexer caps the source at 256 MiB, so counts of types and properties fit easily.
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn placeholder(span: Span) -> ReferenceTarget {
    ReferenceTarget {
        up: Vec::new(),
        down: Vec::new(),
        dictionary: PropertyId::new(0),
        entry_type: ROOT,
        key_arity: 0,
        span,
    }
}

/// `'A', 'B', 'C'`, shortened after a few names so messages stay readable.
fn quoted_list<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 12;
    let total = names.len();
    let mut list: Vec<String> = names.take(SHOWN).map(|n| format!("'{n}'")).collect();
    if total > SHOWN {
        list.push(format!("and {} more", total - SHOWN));
    }
    list.join(", ")
}

impl Builder {
    fn error(&mut self, span: Span, message: impl Into<String>) {
        push_error(&mut self.errors, &self.schema.source, span, message.into());
    }

    fn at(&self, span: Span) -> String {
        // Past the cap the message is dropped; skip the O(source) line count.
        if self.errors.len() >= MAX_ERRORS {
            return String::new();
        }
        let (l, c) = line_column(&self.schema.source, span.start as usize);
        format!("{l}:{c}")
    }

    fn build(&mut self, file: SynFile) {
        let root = self.add_node(ParentLink::Root, file.root);
        assert_eq!(root, ROOT);
        let pending = std::mem::take(&mut self.pending);
        for (pid, path) in pending {
            if let Some(target) = self.resolve_target(pid, &path) {
                match &mut self.schema.properties[pid.index()].kind {
                    PropertyKind::Reference { target: t } | PropertyKind::Matrix { target: t, .. } => *t = target,
                    other => unreachable!("pending path on a {}", other.keyword()),
                }
            }
        }
        let derived = std::mem::take(&mut self.pending_derived);
        let ids: Vec<PropertyId> = derived.iter().map(|(p, _)| *p).collect();
        for (pid, syn) in derived {
            if let Some(d) = self.derivation(pid, syn, &ids) {
                self.schema.properties[pid.index()].derived = Some(d);
            }
        }
        self.schema.derived_ids = ids;
        self.commands(file.commands);
        self.indexes(file.indexes);
        if self.errors.is_empty() {
            self.layout();
        }
    }

    fn add_node(&mut self, parent: ParentLink, syn: SynNode) -> NodeTypeId {
        let id = NodeTypeId::new(id32(self.schema.types.len()));
        self.schema.types.push(NodeType {
            id,
            parent,
            storage: Storage::Empty,
            properties: Vec::new(),
            by_name: HashMap::new(),
            span: syn.open,
        });
        for p in syn.properties {
            self.add_property(id, p);
        }
        id
    }

    fn add_property(&mut self, owner: NodeTypeId, syn: SynProperty) {
        let pid = PropertyId::new(id32(self.schema.properties.len()));
        if let Some(&first) = self.schema.node_type(owner).by_name.get(&syn.name) {
            let first = self.schema.property(first).span;
            let msg = format!(
                "duplicate property '{}' in {}; it is already declared at {}",
                syn.name,
                self.schema.describe_node_type(owner),
                self.at(first)
            );
            self.error(syn.name_span, msg);
        } else {
            self.schema.types[owner.index()].by_name.insert(syn.name.clone(), pid);
        }
        self.schema.types[owner.index()].properties.push(pid);
        self.schema.properties.push(Property {
            id: pid,
            name: syn.name.clone(),
            owner,
            host: owner,
            offset: 0,
            kind: PropertyKind::Number,
            derived: None,
            span: syn.name_span,
        });
        let kind = match syn.kind {
            SynKind::Number => PropertyKind::Number,
            SynKind::Text => PropertyKind::Text,
            SynKind::Group(node) => {
                PropertyKind::Group { node: self.add_node(ParentLink::Group { property: pid }, node) }
            }
            SynKind::Dictionary(node) => {
                PropertyKind::Dictionary { node: self.add_node(ParentLink::DictionaryEntry { property: pid }, node) }
            }
            SynKind::Matrix(path, node) => {
                let target = placeholder(path.span);
                self.pending.push((pid, path));
                PropertyKind::Matrix { node: self.add_node(ParentLink::MatrixEntry { property: pid }, node), target }
            }
            SynKind::Reference(path) => {
                let target = placeholder(path.span);
                self.pending.push((pid, path));
                PropertyKind::Reference { target }
            }
            SynKind::StateGroup(syn_states) => {
                if syn_states.is_empty() {
                    self.error(
                        syn.kind_span,
                        format!(
                            "stategroup '{}' has no states; expected at least one state like 'State' -> ( )",
                            syn.name
                        ),
                    );
                }
                let mut states: Vec<State> = Vec::new();
                let mut seen: HashMap<String, Span> = HashMap::new();
                for (i, s) in syn_states.into_iter().enumerate() {
                    if let Some(&first) = seen.get(&s.name) {
                        let msg = format!(
                            "duplicate state '{}' in stategroup '{}'; it is already declared at {}",
                            s.name,
                            syn.name,
                            self.at(first)
                        );
                        self.error(s.span, msg);
                    } else {
                        seen.insert(s.name.clone(), s.span);
                    }
                    let node = self.add_node(ParentLink::State { property: pid, state: id32(i) }, s.node);
                    states.push(State { name: s.name, node, span: s.span });
                }
                PropertyKind::StateGroup { states }
            }
            derived @ SynKind::Aggregate { .. } => {
                self.pending_derived.push((pid, derived));
                PropertyKind::Number
            }
            derived @ SynKind::Condition { .. } => {
                let mut states = Vec::with_capacity(2);
                for (i, name) in ["No", "Yes"].into_iter().enumerate() {
                    let empty = SynNode { open: syn.kind_span, properties: Vec::new() };
                    let node = self.add_node(ParentLink::State { property: pid, state: id32(i) }, empty);
                    states.push(State { name: name.to_string(), node, span: syn.kind_span });
                }
                self.pending_derived.push((pid, derived));
                PropertyKind::StateGroup { states }
            }
        };
        self.schema.properties[pid.index()].kind = kind;
    }

    /// A number property called `name` in `node` or its groups (the record `node`'s data
    /// lives in), a stored one unless `derived_ok`; `None` after reporting an error at `span`.
    /// `what` names the asker in messages.
    fn number_property(
        &mut self,
        node: NodeTypeId,
        name: &str,
        span: Span,
        derived: &[PropertyId],
        derived_ok: bool,
        what: &str,
    ) -> Option<PropertyId> {
        let mut found = Vec::new();
        self.find_in_entry(node, name, &mut found);
        let msg = match found.as_slice() {
            [one] if matches!(self.schema.property(*one).kind, PropertyKind::Number) => {
                if derived_ok || !derived.contains(one) {
                    return Some(*one);
                }
                format!("'{name}' is derived; {what} goes over stored numbers only")
            }
            [one] => format!("'{name}' is {}; {what} needs a number", article(&self.schema.property(*one).kind)),
            [] => format!("no property '{name}' in {} (or in its groups)", self.schema.describe_node_type(node)),
            _ => format!(
                "'{name}' is ambiguous in {}: several of its groups have it",
                self.schema.describe_node_type(node)
            ),
        };
        self.error(span, msg);
        None
    }

    /// Resolves a derived property's names (see [`Derivation`]).
    fn derivation(&mut self, pid: PropertyId, syn: SynKind, derived: &[PropertyId]) -> Option<Derivation> {
        let owner = self.schema.property(pid).owner;
        match syn {
            SynKind::Aggregate { function, step, value } => {
                let (over, member) = match step {
                    SynOver::Collection(name, span) => match self.schema.find(owner, &name).map(|p| (p.id, &p.kind)) {
                        Some((c, PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. })) => {
                            (Over::Collection(c), *node)
                        }
                        _ => {
                            let msg = format!(
                                "no dictionary or matrix '{name}' in {} to aggregate over",
                                self.schema.describe_node_type(owner)
                            );
                            self.error(span, msg);
                            return None;
                        }
                    },
                    SynOver::Referrers(name, span) => {
                        let refs: Vec<&Property> = self
                            .schema
                            .properties
                            .iter()
                            .filter(|p| p.name == name)
                            .filter(
                                |p| matches!(&p.kind, PropertyKind::Reference { target } if target.entry_type == owner),
                            )
                            .collect();
                        match refs.as_slice() {
                            [one] => (Over::Referrers(one.id), one.owner),
                            [] => {
                                let msg = format!(
                                    "no reference '{name}' points at {}; `<` counts the nodes whose reference points here",
                                    self.schema.describe_node_type(owner)
                                );
                                self.error(span, msg);
                                return None;
                            }
                            _ => {
                                let msg = format!(
                                    "several references called '{name}' point at {}",
                                    self.schema.describe_node_type(owner)
                                );
                                self.error(span, msg);
                                return None;
                            }
                        }
                    }
                };
                let value = match value {
                    Some((name, span)) => {
                        Some(self.number_property(member, &name, span, derived, false, "an aggregate")?)
                    }
                    None => None,
                };
                Some(Derivation::Aggregate { function, over, value })
            }
            SynKind::Condition { number: (name, span), op, value } => {
                // A condition may test a derived number (an aggregate of the same node).
                let number = self.number_property(owner, &name, span, derived, true, "condition")?;
                Some(Derivation::Condition { number, op, value })
            }
            _ => unreachable!("only derived kinds are pending"),
        }
    }

    /// Walks the up steps of `path` from `start`; `None` after reporting an error.
    fn walk_up(&mut self, start: NodeTypeId, path: &SynPath) -> Option<(Vec<UpStep>, NodeTypeId)> {
        let mut cur = start;
        let mut steps = Vec::with_capacity(path.up.len());
        for up in &path.up {
            let (step, property, expected) = match self.schema.node_type(cur).parent {
                ParentLink::Root => {
                    let msg = format!(
                        "`{}` goes up, but here the node is the root node, which has no parent",
                        up.symbol.text()
                    );
                    self.error(up.span, msg);
                    return None;
                }
                ParentLink::Group { property } => (UpStep::Group, property, "+^"),
                ParentLink::DictionaryEntry { property } => (UpStep::DictionaryEntry, property, ".^"),
                ParentLink::MatrixEntry { property } => (UpStep::MatrixEntry, property, "%^"),
                ParentLink::State { property, .. } => (UpStep::State, property, "?^"),
            };
            let given = match up.symbol {
                UpSymbol::Plus => UpStep::Group,
                UpSymbol::Dot => UpStep::DictionaryEntry,
                UpSymbol::Percent => UpStep::MatrixEntry,
                UpSymbol::Question | UpSymbol::Star => UpStep::State,
            };
            if given != step {
                let leaves = match given {
                    UpStep::Group => "leaves a group",
                    UpStep::DictionaryEntry => "leaves a dictionary entry",
                    UpStep::MatrixEntry => "leaves a matrix entry",
                    UpStep::State => "leaves a state",
                };
                let msg = format!(
                    "`{}` {leaves}, but here the node is {}; use `{expected}`",
                    up.symbol.text(),
                    self.schema.describe_node_type(cur)
                );
                self.error(up.span, msg);
                return None;
            }
            steps.push(step);
            cur = self.schema.property(property).owner;
        }
        Some((steps, cur))
    }

    /// Walks down steps from `start`; returns the steps and the node reached.
    fn walk_down(
        &mut self,
        start: NodeTypeId,
        down: &[SynDown],
        in_reference: bool,
    ) -> Option<(Vec<Step>, NodeTypeId)> {
        let mut cur = start;
        let mut steps = Vec::with_capacity(down.len());
        for d in down {
            let (name, symbol, want, name_span) = match d {
                SynDown::Group { name, span, .. } => (name, "+", "a group", *span),
                SynDown::Dictionary { name, span, .. } => (name, ".", "a dictionary", *span),
                SynDown::Matrix { name, symbol, span } => {
                    if in_reference {
                        self.error(
                            *symbol,
                            "a reference path cannot step into a matrix with `%`: references target dictionary entries; end the path with `. 'Dictionary'`",
                        );
                        return None;
                    }
                    (name, "%", "a matrix", *span)
                }
                SynDown::State { stategroup, span, .. } => (stategroup, "?", "a stategroup", *span),
            };
            let Some(prop) = self.schema.find(cur, name) else {
                let node = self.schema.node_type(cur);
                let has = if node.properties.is_empty() {
                    "it has no properties".to_string()
                } else {
                    let names = node.properties.iter().map(|&p| self.schema.property(p).name.as_str());
                    format!("it has {}", quoted_list(names))
                };
                let msg = format!("no property '{name}' in {}; {has}", self.schema.describe_node_type(cur));
                self.error(name_span, msg);
                return None;
            };
            let pid = prop.id;
            let step = match (d, &prop.kind) {
                (SynDown::Group { .. }, PropertyKind::Group { node }) => (Step::Down(DownStep::Group(pid)), *node),
                (SynDown::Dictionary { .. }, PropertyKind::Dictionary { node }) => {
                    (Step::Down(DownStep::Dictionary(pid)), *node)
                }
                (SynDown::Matrix { .. }, PropertyKind::Matrix { node, .. }) => (Step::Matrix(pid), *node),
                (SynDown::State { state, state_span, .. }, PropertyKind::StateGroup { states }) => {
                    match states.iter().position(|s| &s.name == state) {
                        Some(i) => (Step::Down(DownStep::State { stategroup: pid, state: id32(i) }), states[i].node),
                        None => {
                            let msg = format!(
                                "stategroup '{name}' has no state '{state}'; it has {}",
                                quoted_list(states.iter().map(|s| s.name.as_str()))
                            );
                            self.error(*state_span, msg);
                            return None;
                        }
                    }
                }
                (_, kind) => {
                    let hint = match kind {
                        PropertyKind::Group { .. } => format!("; use `+ '{name}'`"),
                        PropertyKind::Dictionary { .. } => format!("; use `. '{name}'`"),
                        PropertyKind::Matrix { .. } if !in_reference => {
                            format!("; use `% '{name}'`")
                        }
                        PropertyKind::Matrix { .. } => "; a reference path cannot pass through a matrix".to_string(),
                        PropertyKind::StateGroup { .. } => format!("; use `? '{name}' * 'State'`"),
                        _ => "; a path can only step into groups, dictionaries, matrices and states".to_string(),
                    };
                    let msg = format!("'{name}' is {}, but `{symbol}` steps into {want}{hint}", article(kind));
                    self.error(name_span, msg);
                    return None;
                }
            };
            steps.push(step.0);
            cur = step.1;
        }
        Some((steps, cur))
    }

    fn resolve_target(&mut self, pid: PropertyId, path: &SynPath) -> Option<ReferenceTarget> {
        let prop = self.schema.property(pid);
        let (owner, name, what) = (prop.owner, prop.name.clone(), prop.kind.keyword());
        let (up, from) = self.walk_up(owner, path)?;
        let (steps, _) = self.walk_down(from, &path.down, true)?;
        let down: Vec<DownStep> = steps
            .iter()
            .map(|s| match s {
                Step::Down(d) => *d,
                Step::Matrix(_) => unreachable!("walk_down rejects matrix steps in references"),
            })
            .collect();
        let (dictionary, entry_type) = match down.last() {
            Some(DownStep::Dictionary(d)) => match self.schema.property(*d).kind {
                PropertyKind::Dictionary { node } => (*d, node),
                _ => unreachable!("dictionary step on a non-dictionary"),
            },
            last => {
                let (span, ends) = match (last, path.down.last()) {
                    (Some(_), Some(syn)) => (syn.name_span(), "ends at"),
                    _ => (path.span, "does not go down; it stays at"),
                };
                let reached = self.path_end_description(from, &down);
                let msg = format!(
                    "the path of the {what} '{name}' {ends} {reached}; it must end with a `.` step into a dictionary, whose entries are the targets"
                );
                self.error(span, msg);
                return None;
            }
        };
        let key_arity = down.iter().filter(|s| matches!(s, DownStep::Dictionary(_))).count();
        Some(ReferenceTarget { up, down, dictionary, entry_type, key_arity, span: path.span })
    }

    /// Describes where a down walk ended, for "must end with a dictionary" errors.
    fn path_end_description(&self, from: NodeTypeId, down: &[DownStep]) -> String {
        match down.last() {
            None => self.schema.describe_node_type(from),
            Some(DownStep::Group(p)) => format!("the group '{}'", self.schema.property(*p).name),
            Some(DownStep::Dictionary(p)) => {
                format!("the dictionary '{}'", self.schema.property(*p).name)
            }
            Some(DownStep::State { stategroup, state }) => {
                let p = self.schema.property(*stategroup);
                match &p.kind {
                    PropertyKind::StateGroup { states } => format!(
                        "the state '{}' of the stategroup '{}'",
                        states.get(*state as usize).map_or("?", |s| s.name.as_str()),
                        p.name
                    ),
                    _ => format!("'{}'", p.name),
                }
            }
        }
    }

    fn commands(&mut self, commands: Vec<crate::parse::SynCommand>) {
        let mut seen: HashMap<String, Span> = HashMap::new();
        for c in commands {
            if let Some(&first) = seen.get(&c.name) {
                let msg = format!("command '{}' is declared twice; the first is at {}", c.name, self.at(first));
                self.error(c.span, msg);
                continue;
            }
            seen.insert(c.name.clone(), c.span);
            let mut params: Vec<(String, ParamKind)> = Vec::new();
            let mut spans: HashMap<String, Span> = HashMap::new();
            for (name, span, kind) in c.params {
                if let Some(&first) = spans.get(&name) {
                    let msg = format!(
                        "duplicate parameter '{name}' in command '{}'; it is already declared at {}",
                        c.name,
                        self.at(first)
                    );
                    self.error(span, msg);
                    continue;
                }
                spans.insert(name.clone(), span);
                params.push((name, kind));
            }
            self.schema.commands.push(CommandDecl {
                name: c.name,
                params,
                body: c.body,
                body_span: c.body_span,
                span: c.span,
            });
        }
    }

    fn indexes(&mut self, indexes: Vec<crate::parse::SynIndex>) {
        let mut seen: HashMap<String, Span> = HashMap::new();
        for ix in indexes {
            if let Some(&first) = seen.get(&ix.name) {
                let msg = format!("index '{}' is declared twice; the first is at {}", ix.name, self.at(first));
                self.error(ix.span, msg);
                continue;
            }
            seen.insert(ix.name.clone(), ix.span);
            if let Some(up) = ix.path.up.first() {
                let msg = format!(
                    "the path of index '{}' starts at the root and cannot go up with `{}`",
                    ix.name,
                    up.symbol.text()
                );
                self.error(up.span, msg);
                continue;
            }
            let Some((steps, entry)) = self.walk_down(ROOT, &ix.path.down, false) else {
                continue;
            };
            let collection = match steps.last() {
                Some(Step::Down(DownStep::Dictionary(p))) | Some(Step::Matrix(p)) => *p,
                _ => {
                    let span = ix.path.down.last().map_or(ix.path.span, |d| d.name_span());
                    let msg = format!(
                        "the path of index '{}' ends at {}; it must end with a `.` dictionary or `%` matrix step, whose entries are indexed",
                        ix.name,
                        self.schema.describe_node_type(entry)
                    );
                    self.error(span, msg);
                    continue;
                }
            };
            let mut found = Vec::new();
            self.find_in_entry(entry, &ix.property, &mut found);
            let property = match found.as_slice() {
                [one] => *one,
                [] => {
                    let msg = format!(
                        "no property '{}' in {} (or in its groups) to index",
                        ix.property,
                        self.schema.describe_node_type(entry)
                    );
                    self.error(ix.property_span, msg);
                    continue;
                }
                many => {
                    let places: Vec<String> =
                        many.iter().map(|&p| self.schema.node_type_name(self.schema.property(p).owner)).collect();
                    let msg = format!(
                        "'{}' is ambiguous: {} of {} have a property of that name",
                        ix.property,
                        places.join(" and "),
                        self.schema.describe_node_type(entry)
                    );
                    self.error(ix.property_span, msg);
                    continue;
                }
            };
            let kind = &self.schema.property(property).kind;
            let fits = match (ix.kind, kind) {
                (_, PropertyKind::Group { .. }) => {
                    unreachable!("find_in_entry never returns groups")
                }
                (IndexKind::Equality, PropertyKind::Number | PropertyKind::Text | PropertyKind::StateGroup { .. }) => {
                    None
                }
                (IndexKind::Equality, _) => Some("an index needs a number, text or stategroup property"),
                (IndexKind::Range, PropertyKind::Number | PropertyKind::Text) => None,
                (IndexKind::Range, _) => Some("a `range` index needs a number or text property"),
                (IndexKind::Prefix, PropertyKind::Text) => None,
                (IndexKind::Prefix, _) => Some("a `prefix` index needs a text property"),
            };
            if let Some(why) = fits {
                let msg = format!("index '{}' is on '{}', {}; {why}", ix.name, ix.property, article(kind));
                self.error(ix.property_span, msg);
                continue;
            }
            if let (Some(span), false) = (ix.unique, ix.kind == IndexKind::Equality) {
                let msg =
                    format!("index '{}' cannot be `unique`: uniqueness is only checked by `equality` indexes", ix.name);
                self.error(span, msg);
                continue;
            }
            self.schema.indexes.push(IndexDecl {
                name: ix.name,
                collection,
                property,
                kind: ix.kind,
                unique: ix.unique.is_some(),
                span: ix.span,
            });
        }
    }

    /// Non-group properties called `name` on `node` and inside its groups (recursively).
    fn find_in_entry(&self, node: NodeTypeId, name: &str, out: &mut Vec<PropertyId>) {
        for &p in &self.schema.node_type(node).properties {
            let prop = self.schema.property(p);
            match prop.kind {
                PropertyKind::Group { node: g } => self.find_in_entry(g, name, out),
                _ if prop.name == name => out.push(p),
                _ => {}
            }
        }
    }

    /// Gives every node type its storage and every property its host and offset.
    fn layout(&mut self) {
        for t in 0..self.schema.types.len() {
            let own_record = match self.schema.types[t].parent {
                ParentLink::Root | ParentLink::DictionaryEntry { .. } | ParentLink::MatrixEntry { .. } => true,
                ParentLink::State { .. } => !self.schema.types[t].properties.is_empty(),
                ParentLink::Group { .. } => false,
            };
            let t = NodeTypeId::new(id32(t));
            if own_record {
                let mut size = 0u32;
                if self.lay_out(t, t, &mut size) {
                    self.schema.types[t.index()].storage = Storage::Record { size };
                } else {
                    let span = self.schema.node_type(t).span;
                    self.error(span, "this node's record would be larger than 4 GiB");
                    return;
                }
            } else if matches!(self.schema.types[t.index()].parent, ParentLink::State { .. }) {
                self.schema.types[t.index()].storage = Storage::Empty;
            }
        }
    }

    /// Lays out `node`'s properties in `host`'s record from `size` on; false on overflow.
    fn lay_out(&mut self, node: NodeTypeId, host: NodeTypeId, size: &mut u32) -> bool {
        let props = self.schema.node_type(node).properties.clone();
        for p in props {
            let prop = &mut self.schema.properties[p.index()];
            prop.host = host;
            prop.offset = *size;
            if let PropertyKind::Group { node: g } = prop.kind {
                self.schema.types[g.index()].storage = Storage::Inline { host };
                if !self.lay_out(g, host, size) {
                    return false;
                }
            } else {
                match size.checked_add(prop.kind.slot_size()) {
                    Some(s) => *size = s,
                    None => return false,
                }
            }
        }
        true
    }

    /// Internal consistency of a successful build (never user-input dependent).
    fn check_invariants(&self) {
        let s = &self.schema;
        for p in &s.properties {
            debug_assert!(s.record_of(p.host) == Some(p.host), "host of '{}' has no record", p.name);
            if let PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } = &p.kind {
                debug_assert!(target.key_arity >= 1, "unresolved target on '{}'", p.name);
                debug_assert!(matches!(target.down.last(), Some(DownStep::Dictionary(d)) if *d == target.dictionary));
            }
        }
        for t in &s.types {
            if let Storage::Inline { host } = t.storage {
                debug_assert!(matches!(s.node_type(host).storage, Storage::Record { .. }));
            }
        }
    }
}

/// "a group", "a number", … for messages.
fn article(kind: &PropertyKind) -> String {
    format!("a {}", kind.keyword())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_layout_follows_the_host_record() {
        let s = compile(
            "root ( 'sg' -> stategroup ( 'a' -> ( 'g' -> group ( ) ) 'b' -> ( 'g' -> group ( 'x' -> number ) 'y' -> text ) ) )",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let PropertyKind::StateGroup { states } = &s.property(PropertyId::new(0)).kind else { panic!("stategroup") };
        // A state whose only property is an empty group still has a property, so a record.
        assert_eq!(s.node_type(states[0].node).storage, Storage::Record { size: 0 });
        let b = states[1].node;
        assert_eq!(s.node_type(b).storage, Storage::Record { size: 16 });
        let g = s.find(b, "g").map(|p| p.id).expect("g");
        let inner = s.child_node(g).expect("group node");
        assert_eq!(s.node_type(inner).storage, Storage::Inline { host: b });
        let x = s.find(inner, "x").expect("x");
        assert_eq!((x.owner, x.host, x.offset), (inner, b, 0));
        assert_eq!(s.find(b, "y").map(|p| p.offset), Some(8));
    }

    #[test]
    fn nested_groups_share_the_entry_record() {
        let s = compile(
            "root ( 'd' -> dictionary ( 'a' -> number 'g' -> group ( 'h' -> group ( 'n' -> number ) 't' -> text ) ) )",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let entry = s.child_node(PropertyId::new(0)).expect("entry");
        assert_eq!(s.record_size(entry), 24);
        let n = s.properties.iter().find(|p| p.name == "n").expect("n");
        assert_eq!((n.host, n.offset), (entry, 8));
        assert_eq!(s.node_type_name(n.owner), "root.'d'+'g'+'h'");
        let t = s.properties.iter().find(|p| p.name == "t").expect("t");
        assert_eq!((t.host, t.offset), (entry, 16));
    }
}
