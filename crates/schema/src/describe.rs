//! Readable names for node types, properties and paths, and the summary printed by
//! `espalier schema check`.

use std::fmt::Write;

use crate::model::*;

impl Schema {
    /// The node type's place written as a path from the root, e.g.
    /// `root.'Orders'?'Status'*'Finished'` or `root+'Company Property'.'Machines'`.
    pub fn node_type_name(&self, id: NodeTypeId) -> String {
        let mut parts = Vec::new();
        let mut cur = id;
        // Each step goes to a strictly earlier-created type, so this ends at the root.
        for _ in 0..=self.types.len() {
            let link = self.node_type(cur).parent;
            let (text, property) = match link {
                ParentLink::Root => break,
                ParentLink::Group { property } => (format!("+'{}'", self.property(property).name), property),
                ParentLink::DictionaryEntry { property } => (format!(".'{}'", self.property(property).name), property),
                ParentLink::MatrixEntry { property } => (format!("%'{}'", self.property(property).name), property),
                ParentLink::State { property, state } => {
                    (format!("?'{}'*'{}'", self.property(property).name, self.state_name(property, state)), property)
                }
            };
            parts.push(text);
            cur = self.property(property).owner;
        }
        parts.reverse();
        format!("root{}", parts.concat())
    }

    /// The node type in words, for messages: "the root node", "the group 'Contact'",
    /// "an entry of the dictionary 'Orders'", "the state 'Yes' of the stategroup 'Paid'".
    pub fn describe_node_type(&self, id: NodeTypeId) -> String {
        match self.node_type(id).parent {
            ParentLink::Root => "the root node".to_string(),
            ParentLink::Group { property } => {
                format!("the group '{}'", self.property(property).name)
            }
            ParentLink::DictionaryEntry { property } => {
                format!("an entry of the dictionary '{}'", self.property(property).name)
            }
            ParentLink::MatrixEntry { property } => {
                format!("an entry of the matrix '{}'", self.property(property).name)
            }
            ParentLink::State { property, state } => format!(
                "the state '{}' of the stategroup '{}'",
                self.state_name(property, state),
                self.property(property).name
            ),
        }
    }

    /// `'Quantity' of root.'Orders'`.
    pub fn property_name(&self, id: PropertyId) -> String {
        let p = self.property(id);
        format!("'{}' of {}", p.name, self.node_type_name(p.owner))
    }

    /// The name of state `state` of stategroup `stategroup` ("?" if either is wrong).
    pub fn state_name(&self, stategroup: PropertyId, state: StateIndex) -> &str {
        match &self.property(stategroup).kind {
            PropertyKind::StateGroup { states } => states.get(state as usize).map_or("?", |s| s.name.as_str()),
            _ => "?",
        }
    }

    /// The index of the state called `name` of a stategroup property.
    pub fn state_index(&self, stategroup: PropertyId, name: &str) -> Option<StateIndex> {
        match &self.property(stategroup).kind {
            PropertyKind::StateGroup { states } => {
                states.iter().position(|s| s.name == name).and_then(|i| u32::try_from(i).ok())
            }
            _ => None,
        }
    }

    /// The node type under a group, dictionary or matrix property.
    pub fn child_node(&self, property: PropertyId) -> Option<NodeTypeId> {
        match self.property(property).kind {
            PropertyKind::Group { node } | PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => {
                Some(node)
            }
            _ => None,
        }
    }

    /// The node type holding `id` (the owner of its parent property), `None` for the root.
    pub fn parent_node(&self, id: NodeTypeId) -> Option<NodeTypeId> {
        let property = match self.node_type(id).parent {
            ParentLink::Root => return None,
            ParentLink::Group { property }
            | ParentLink::DictionaryEntry { property }
            | ParentLink::MatrixEntry { property }
            | ParentLink::State { property, .. } => property,
        };
        Some(self.property(property).owner)
    }

    /// The reference or matrix target of a property.
    pub fn target(&self, property: PropertyId) -> Option<&ReferenceTarget> {
        match &self.property(property).kind {
            PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => Some(target),
            _ => None,
        }
    }

    /// Every reference and matrix property with its resolved target, in declaration order.
    pub fn links(&self) -> impl Iterator<Item = (&Property, &ReferenceTarget)> + '_ {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => Some((p, target)),
            _ => None,
        })
    }

    /// A target written back in path notation: `+^ .^ +^ . 'Orders'`.
    pub fn path_text(&self, target: &ReferenceTarget) -> String {
        let mut parts: Vec<String> = target
            .up
            .iter()
            .map(|u| {
                match u {
                    UpStep::Group => "+^",
                    UpStep::DictionaryEntry => ".^",
                    UpStep::MatrixEntry => "%^",
                    UpStep::State => "?^",
                }
                .to_string()
            })
            .collect();
        for d in &target.down {
            parts.push(match d {
                DownStep::Group(p) => format!("+ '{}'", self.property(*p).name),
                DownStep::Dictionary(p) => format!(". '{}'", self.property(*p).name),
                DownStep::State { stategroup, state } => {
                    format!("? '{}' * '{}'", self.property(*stategroup).name, self.state_name(*stategroup, *state))
                }
            });
        }
        parts.join(" ")
    }

    /// The index called `name`.
    pub fn index(&self, name: &str) -> Option<&IndexDecl> {
        self.indexes.iter().find(|i| i.name == name)
    }
}

/// A human summary of a compiled schema: counts, records and their sizes, links with their
/// resolved paths, commands and indexes.
pub fn describe(schema: &Schema) -> String {
    let mut out = String::new();
    let mut by_link = [0usize; 5];
    for t in &schema.types {
        by_link[match t.parent {
            ParentLink::Root => 0,
            ParentLink::Group { .. } => 1,
            ParentLink::DictionaryEntry { .. } => 2,
            ParentLink::MatrixEntry { .. } => 3,
            ParentLink::State { .. } => 4,
        }] += 1;
    }
    let _ = writeln!(
        out,
        "{} node types: 1 root, {}, {}, {}, {}",
        schema.types.len(),
        count(by_link[2], "dictionary entry", "dictionary entries"),
        count(by_link[3], "matrix entry", "matrix entries"),
        count(by_link[1], "group", "groups"),
        count(by_link[4], "state", "states")
    );
    let kinds = ["number", "text", "group", "dictionary", "matrix", "reference", "stategroup"];
    let counts: Vec<String> = kinds
        .iter()
        .map(|k| (k, schema.properties.iter().filter(|p| p.kind.keyword() == *k).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let _ = writeln!(out, "{} properties: {}", schema.properties.len(), counts.join(", "));

    let _ = writeln!(out, "records:");
    let mut empty = 0usize;
    for t in &schema.types {
        match t.storage {
            Storage::Record { size } => {
                let _ = writeln!(out, "  {}  {size} bytes", schema.node_type_name(t.id));
            }
            Storage::Empty => empty += 1,
            Storage::Inline { .. } => {}
        }
    }
    if empty > 0 {
        let _ = writeln!(out, "  ({empty} states without properties store nothing)");
    }

    let links: Vec<_> = schema.links().collect();
    if !links.is_empty() {
        let _ = writeln!(out, "references and matrices:");
        for (p, t) in links {
            let _ = writeln!(
                out,
                "  {} {} ( {} ) -> entries of {} (key arity {})",
                schema.property_name(p.id),
                p.kind.keyword(),
                schema.path_text(t),
                schema.node_type_name(t.entry_type),
                t.key_arity
            );
        }
    }
    if !schema.derived_ids.is_empty() {
        let _ = writeln!(out, "derived properties:");
        for (p, d) in schema.derived() {
            let text = match d {
                Derivation::Aggregate { function, over, value } => {
                    let (symbol, name) = match over {
                        Over::Collection(c) => (".", schema.property(*c).name.as_str()),
                        Over::Referrers(r) => ("<", schema.property(*r).name.as_str()),
                    };
                    let value = value.map(|v| format!(" '{}'", schema.property(v).name)).unwrap_or_default();
                    let function = format!("{function:?}").to_lowercase();
                    format!("{function} ( {symbol} '{name}' ){value}")
                }
                Derivation::Condition { number, op, value } => {
                    format!("condition ( '{}' {} {value} )", schema.property(*number).name, op.symbol())
                }
            };
            let _ = writeln!(out, "  {} = {text}", schema.property_name(p));
        }
    }
    if !schema.commands.is_empty() {
        let _ = writeln!(out, "commands:");
        for c in &schema.commands {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|(n, k)| {
                    let k = match k {
                        ParamKind::Number => "number",
                        ParamKind::Text => "text",
                    };
                    format!("'{n}' -> {k}")
                })
                .collect();
            let _ = writeln!(out, "  '{}' ( {} )", c.name, params.join(" "));
        }
    }
    if !schema.indexes.is_empty() {
        let _ = writeln!(out, "indexes:");
        for i in &schema.indexes {
            let kind = match i.kind {
                IndexKind::Equality => "equality",
                IndexKind::Range => "range",
                IndexKind::Prefix => "prefix",
            };
            let _ = writeln!(
                out,
                "  '{}' on {} {kind}{}",
                i.name,
                schema.property_name(i.property),
                if i.unique { " unique" } else { "" }
            );
        }
    }
    out
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
