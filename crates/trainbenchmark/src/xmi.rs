//! Reads the official EMF XMI files (`railway-*.xmi`): the whole containment tree, with
//! references written as `//@regions.0/@sensors.3` paths.
//!
//! Attributes that EMF leaves out have their defaults (`active` false, `length` 0,
//! positions and signals FAILURE). Both sides of `monitoredBy` / `monitors` are written in
//! the file; they must agree.

use std::collections::{BTreeSet, HashMap};

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use crate::model::{ElementKind, Model, Position, Region, Route, Semaphore, Signal, SwitchPosition, TrackElement};
use crate::ImportError;

/// Deepest element nesting accepted (the railway tree is 4 deep).
const MAX_DEPTH: usize = 16;

struct Node {
    tag: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    line: usize,
}

impl Node {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Parses an XMI document of the railway metamodel.
pub fn read(text: &str, source: &str) -> Result<Model, ImportError> {
    let root = tree(text, source)?;
    let mut paths: HashMap<String, u64> = HashMap::new();
    index(&root, "/", &mut paths, source)?;
    let err = |node: &Node, message: String| ImportError::at(source, node.line, message);
    let id = |node: &Node| -> Result<u64, ImportError> {
        let raw = node.attr("id").ok_or_else(|| err(node, format!("<{}> has no id", node.tag)))?;
        raw.parse().map_err(|_| err(node, format!("id {raw:?} is not a number")))
    };
    let refs = |node: &Node, attr: &str| -> Result<Vec<u64>, ImportError> {
        match node.attr(attr) {
            None => Ok(Vec::new()),
            Some(list) => list
                .split_whitespace()
                .map(|p| paths.get(p).copied().ok_or_else(|| err(node, format!("{attr}: no element at {p}"))))
                .collect(),
        }
    };
    let one_ref = |node: &Node, attr: &str| -> Result<Option<u64>, ImportError> {
        let list = refs(node, attr)?;
        if list.len() > 1 {
            return Err(err(node, format!("{attr} holds {} references; it takes one", list.len())));
        }
        Ok(list.first().copied())
    };
    let position = |node: &Node, attr: &str| -> Result<Position, ImportError> {
        match node.attr(attr) {
            None => Ok(Position::Failure),
            Some(v) => Position::parse(v).ok_or_else(|| err(node, format!("{attr} {v:?} is not a Position"))),
        }
    };
    let mut model = Model::default();
    let mut monitors: BTreeSet<(u64, u64)> = BTreeSet::new();
    for child in &root.children {
        match child.tag.as_str() {
            "routes" => {
                let active = match child.attr("active") {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(v) => return Err(err(child, format!("active {v:?} is not a boolean"))),
                };
                let mut follows = Vec::new();
                for f in &child.children {
                    if f.tag != "follows" {
                        return Err(err(f, format!("unexpected <{}> in a route", f.tag)));
                    }
                    let target =
                        one_ref(f, "target")?.ok_or_else(|| err(f, "a switch position without target".into()))?;
                    follows.push(SwitchPosition { id: id(f)?, position: position(f, "position")?, target });
                }
                model.routes.push(Route {
                    id: id(child)?,
                    active,
                    entry: one_ref(child, "entry")?,
                    exit: one_ref(child, "exit")?,
                    requires: refs(child, "requires")?,
                    follows,
                });
            }
            "regions" => {
                let mut region = Region { id: id(child)?, sensors: Vec::new(), elements: Vec::new() };
                for e in &child.children {
                    match e.tag.as_str() {
                        "sensors" => {
                            let sensor = id(e)?;
                            region.sensors.push(sensor);
                            monitors.extend(refs(e, "monitors")?.into_iter().map(|te| (te, sensor)));
                        }
                        "elements" => {
                            let kind = match e.attr("xsi:type") {
                                Some("railway:Segment") => {
                                    let length = match e.attr("length") {
                                        None => 0,
                                        Some(v) => {
                                            v.parse().map_err(|_| err(e, format!("length {v:?} is not a number")))?
                                        }
                                    };
                                    let mut semaphores = Vec::new();
                                    for s in &e.children {
                                        if s.tag != "semaphores" {
                                            return Err(err(s, format!("unexpected <{}> in a segment", s.tag)));
                                        }
                                        let signal = match s.attr("signal") {
                                            None => Signal::Failure,
                                            Some(v) => Signal::parse(v)
                                                .ok_or_else(|| err(s, format!("signal {v:?} is not a Signal")))?,
                                        };
                                        semaphores.push(Semaphore { id: id(s)?, signal });
                                    }
                                    ElementKind::Segment { length, semaphores }
                                }
                                Some("railway:Switch") => {
                                    ElementKind::Switch { current_position: position(e, "currentPosition")? }
                                }
                                other => return Err(err(e, format!("unknown track element type {other:?}"))),
                            };
                            region.elements.push(TrackElement {
                                id: id(e)?,
                                kind,
                                monitored_by: refs(e, "monitoredBy")?,
                                connects_to: refs(e, "connectsTo")?,
                            });
                        }
                        other => return Err(err(e, format!("unexpected <{other}> in a region"))),
                    }
                }
                model.regions.push(region);
            }
            other => return Err(err(child, format!("unexpected <{other}> in the railway container"))),
        }
    }
    let monitored: BTreeSet<(u64, u64)> = model
        .regions
        .iter()
        .flat_map(|r| r.elements.iter())
        .flat_map(|e| e.monitored_by.iter().map(move |s| (e.id, *s)))
        .collect();
    if monitored != monitors {
        let diff = monitored.symmetric_difference(&monitors).next().copied().unwrap_or_default();
        return Err(ImportError::at(
            source,
            0,
            format!("monitoredBy and monitors disagree, e.g. on track element {} and sensor {}", diff.0, diff.1),
        ));
    }
    Ok(model)
}

fn start(e: &BytesStart<'_>, line: usize, source: &str) -> Result<Node, ImportError> {
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|x| ImportError::at(source, line, format!("bad attribute: {x}")))?;
        let v = a
            .normalized_value(XmlVersion::Explicit1_0)
            .map_err(|x| ImportError::at(source, line, format!("bad attribute value: {x}")))?;
        attrs.push((a.key.0.to_string(), v.into_owned()));
    }
    Ok(Node { tag: e.name().0.to_string(), attrs, children: Vec::new(), line })
}

/// The element tree (the document element and everything in it).
fn tree(text: &str, source: &str) -> Result<Node, ImportError> {
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Node> = Vec::new();
    let line_at =
        |pos: u64| text.as_bytes()[..(pos as usize).min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1;
    loop {
        let pos = reader.buffer_position();
        let event = reader.read_event().map_err(|e| ImportError::at(source, line_at(pos), format!("XML: {e}")))?;
        match event {
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(ImportError::at(
                        source,
                        line_at(pos),
                        format!("elements nest deeper than {MAX_DEPTH}"),
                    ));
                }
                stack.push(start(&e, line_at(pos), source)?);
            }
            Event::Empty(e) => {
                let node = start(&e, line_at(pos), source)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => return Ok(node),
                }
            }
            Event::End(_) => {
                let node =
                    stack.pop().ok_or_else(|| ImportError::at(source, line_at(pos), "unbalanced end tag".into()))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => return Ok(node),
                }
            }
            Event::Eof => {
                return Err(ImportError::at(source, line_at(pos), "the document ends inside an element".into()))
            }
            _ => {}
        }
    }
}

/// Maps every element's XMI path (`//@regions.0/@elements.3`) to its id.
fn index(node: &Node, path: &str, out: &mut HashMap<String, u64>, source: &str) -> Result<(), ImportError> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for child in &node.children {
        let n = counts.entry(child.tag.as_str()).or_default();
        let p = format!("{path}/@{}.{n}", child.tag);
        *n += 1;
        if let Some(id) = child.attr("id") {
            let id =
                id.parse().map_err(|_| ImportError::at(source, child.line, format!("id {id:?} is not a number")))?;
            out.insert(p.clone(), id);
        }
        index(child, &p, out, source)?;
    }
    Ok(())
}
