//! Puts a railway model into an Espalier database of the railway schema, in one atomic
//! request through the typed graph (`WriteGraph`): every entry, state, value, reference and
//! matrix link, keyed by the model's ids.

use std::collections::HashMap;

use espalier_data::{EntryKey, NodeRef, WriteGraph};
use espalier_schema::{NodeTypeId, PropertyId, PropertyKind, Schema, StateIndex, ROOT};

use crate::model::{ElementKind, Model};
use crate::LoadError;

/// The railway schema's properties and states, resolved once by name.
pub struct Railway {
    /// The root's `'Regions'` dictionary.
    pub regions: PropertyId,
    /// A region's `'Sensors'` dictionary.
    pub sensors: PropertyId,
    /// A region's `'Track Elements'` dictionary.
    pub elements: PropertyId,
    /// A track element's `'Monitored By'` matrix of sensors.
    pub monitored_by: PropertyId,
    /// A track element's `'Connects To'` matrix of track elements.
    pub connects_to: PropertyId,
    /// A track element's `'Kind'` stategroup: segment or switch.
    pub kind: PropertyId,
    /// A segment's `'Length'`.
    pub length: PropertyId,
    /// A segment's `'Semaphores'` dictionary.
    pub semaphores: PropertyId,
    /// A semaphore's `'Signal'` stategroup.
    pub signal: PropertyId,
    /// A switch's `'Current Position'` stategroup.
    pub current_position: PropertyId,
    /// The root's `'Routes'` dictionary.
    pub routes: PropertyId,
    /// A route's `'Active'` stategroup.
    pub active: PropertyId,
    /// A route's `'Entry'` stategroup (`'None'` or `'Set'`).
    pub entry: PropertyId,
    /// The entry semaphore reference of `'Entry'`'s `'Set'` state.
    pub entry_semaphore: PropertyId,
    /// A route's `'Exit'` stategroup (`'None'` or `'Set'`).
    pub exit: PropertyId,
    /// The exit semaphore reference of `'Exit'`'s `'Set'` state.
    pub exit_semaphore: PropertyId,
    /// A route's `'Requires'` matrix of sensors.
    pub requires: PropertyId,
    /// A route's `'Follows'` dictionary of switch positions.
    pub follows: PropertyId,
    /// A switch position's `'Position'` stategroup.
    pub position: PropertyId,
    /// A switch position's `'Target'` reference to its switch.
    pub target: PropertyId,
}

fn find(schema: &Schema, ty: NodeTypeId, name: &str) -> Result<PropertyId, LoadError> {
    schema.find(ty, name).map(|p| p.id).ok_or_else(|| LoadError::Schema(format!("no property '{name}'")))
}

fn inner(schema: &Schema, p: PropertyId) -> Result<NodeTypeId, LoadError> {
    match &schema.property(p).kind {
        PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } | PropertyKind::Group { node } => {
            Ok(*node)
        }
        _ => Err(LoadError::Schema(format!("'{}' holds no node", schema.property(p).name))),
    }
}

/// The state called `name` of stategroup `p`, and its node type.
pub fn state(schema: &Schema, p: PropertyId, name: &str) -> Result<(StateIndex, NodeTypeId), LoadError> {
    match &schema.property(p).kind {
        PropertyKind::StateGroup { states } => states
            .iter()
            .position(|s| s.name == name)
            .map(|i| (i as StateIndex, states[i].node))
            .ok_or_else(|| LoadError::Schema(format!("no state '{name}'"))),
        _ => Err(LoadError::Schema(format!("'{}' is not a stategroup", schema.property(p).name))),
    }
}

impl Railway {
    /// Finds every property by name; fails if the schema is not the railway schema.
    pub fn resolve(schema: &Schema) -> Result<Railway, LoadError> {
        let regions = find(schema, ROOT, "Regions")?;
        let region = inner(schema, regions)?;
        let elements = find(schema, region, "Track Elements")?;
        let element = inner(schema, elements)?;
        let kind = find(schema, element, "Kind")?;
        let segment = state(schema, kind, "Segment")?.1;
        let switch = state(schema, kind, "Switch")?.1;
        let semaphores = find(schema, segment, "Semaphores")?;
        let routes = find(schema, ROOT, "Routes")?;
        let route = inner(schema, routes)?;
        let entry = find(schema, route, "Entry")?;
        let exit = find(schema, route, "Exit")?;
        let follows = find(schema, route, "Follows")?;
        let swp = inner(schema, follows)?;
        Ok(Railway {
            regions,
            sensors: find(schema, region, "Sensors")?,
            elements,
            monitored_by: find(schema, element, "Monitored By")?,
            connects_to: find(schema, element, "Connects To")?,
            kind,
            length: find(schema, segment, "Length")?,
            semaphores,
            signal: find(schema, inner(schema, semaphores)?, "Signal")?,
            current_position: find(schema, switch, "Current Position")?,
            routes,
            active: find(schema, route, "Active")?,
            entry,
            entry_semaphore: find(schema, state(schema, entry, "Set")?.1, "Semaphore")?,
            exit,
            exit_semaphore: find(schema, state(schema, exit, "Set")?.1, "Semaphore")?,
            requires: find(schema, route, "Requires")?,
            follows,
            position: find(schema, swp, "Position")?,
            target: find(schema, swp, "Target")?,
        })
    }
}

/// Switches `p` of a new node to the state called `name` unless it is there already (the
/// first state is the default); returns the state's node.
fn choose(g: &mut WriteGraph<'_, '_>, node: NodeRef, p: PropertyId, name: &str) -> Result<NodeRef, LoadError> {
    let (want, _) = state(g.schema, p, name)?;
    let (current, child) = g.graph().state(node, p)?;
    Ok(if current == want { child } else { g.switch_state(node, p, want)? })
}

/// Writes `model` into an empty railway database (inside `Database::write`).
pub fn write(g: &mut WriteGraph<'_, '_>, model: &Model) -> Result<(), LoadError> {
    write_reporting(g, model, &mut |_, _| {})
}

/// The writes [`write_reporting`] counts for `model`: sensors, track elements, their links, and
/// the routes' required sensors and switch positions.
pub fn writes(model: &Model) -> usize {
    let regions: usize = model
        .regions
        .iter()
        .map(|r| {
            r.sensors.len() + r.elements.iter().map(|e| 1 + e.monitored_by.len() + e.connects_to.len()).sum::<usize>()
        })
        .sum();
    regions + model.routes.iter().map(|r| r.requires.len() + r.follows.len()).sum::<usize>()
}

/// As [`write`], calling `progress(done, total)` every 1,024 writes and at the end (`total` is
/// [`writes`]), for a progress bar.
pub fn write_reporting(
    g: &mut WriteGraph<'_, '_>,
    model: &Model,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(), LoadError> {
    let r = Railway::resolve(g.schema)?;
    // A bulk load's change set would be as large as the model, and nobody reads it.
    g.set_record_changes(false);
    let total = writes(model);
    let root = NodeRef::ROOT;
    let mut nodes = Nodes::for_model(model);
    let mut writes = 0usize;
    let mut tick = || {
        writes += 1;
        if writes.is_multiple_of(1024) {
            progress(writes, total);
        }
    };
    // Keys are the ids in decimal, spelt on the stack: a load writes one per entry.
    let mut digits = itoa::Buffer::new();
    for region in &model.regions {
        let rn = g.add_entry(root, r.regions, EntryKey::Text(digits.format(region.id)))?;
        for s in &region.sensors {
            nodes.insert(*s, g.add_entry(rn, r.sensors, EntryKey::Text(digits.format(*s)))?);
            tick();
        }
        for e in &region.elements {
            let en = g.add_entry(rn, r.elements, EntryKey::Text(digits.format(e.id)))?;
            nodes.insert(e.id, en);
            match &e.kind {
                ElementKind::Segment { length, semaphores } => {
                    let sn = choose(g, en, r.kind, "Segment")?;
                    g.set_number(sn, r.length, *length)?;
                    for s in semaphores {
                        let node = g.add_entry(sn, r.semaphores, EntryKey::Text(digits.format(s.id)))?;
                        choose(g, node, r.signal, s.signal.name())?;
                        nodes.insert(s.id, node);
                    }
                }
                ElementKind::Switch { current_position } => {
                    let sn = choose(g, en, r.kind, "Switch")?;
                    choose(g, sn, r.current_position, current_position.name())?;
                }
            }
            tick();
        }
    }
    let node = |id: u64| nodes.get(id).ok_or(LoadError::Dangling(id));
    for region in &model.regions {
        for e in &region.elements {
            let en = node(e.id)?;
            for s in &e.monitored_by {
                g.add_entry(en, r.monitored_by, EntryKey::Target(node(*s)?.id))?;
                tick();
            }
            for t in &e.connects_to {
                g.add_entry(en, r.connects_to, EntryKey::Target(node(*t)?.id))?;
                tick();
            }
        }
    }
    for route in &model.routes {
        let rn = g.add_entry(root, r.routes, EntryKey::Text(digits.format(route.id)))?;
        choose(g, rn, r.active, if route.active { "Yes" } else { "No" })?;
        for (sg, reference, semaphore) in
            [(r.entry, r.entry_semaphore, route.entry), (r.exit, r.exit_semaphore, route.exit)]
        {
            if let Some(s) = semaphore {
                let set = choose(g, rn, sg, "Set")?;
                g.set_reference(set, reference, node(s)?.id)?;
            }
        }
        for s in &route.requires {
            g.add_entry(rn, r.requires, EntryKey::Target(node(*s)?.id))?;
            tick();
        }
        for p in &route.follows {
            let pn = g.add_entry(rn, r.follows, EntryKey::Text(digits.format(p.id)))?;
            choose(g, pn, r.position, p.position.name())?;
            g.set_reference(pn, r.target, node(p.target)?.id)?;
            tick();
        }
    }
    g.set_record_changes(true);
    progress(total, total);
    Ok(())
}

/// The nodes written so far, by model id. The generator's ids and the official models' are
/// dense (counted from 1): a vector indexed by id, read in the link pass without hashing and
/// mostly in order. Ids spread wider than a few times their count go into a map.
enum Nodes {
    Dense(Vec<Option<NodeRef>>),
    Sparse(HashMap<u64, NodeRef>),
}

impl Nodes {
    /// Room for the ids of `model`'s sensors, track elements and semaphores.
    fn for_model(model: &Model) -> Nodes {
        let ids = model.regions.iter().flat_map(|r| {
            let elements = r.elements.iter().flat_map(|e| {
                let semaphores = match &e.kind {
                    ElementKind::Segment { semaphores, .. } => &semaphores[..],
                    ElementKind::Switch { .. } => &[],
                };
                std::iter::once(e.id).chain(semaphores.iter().map(|s| s.id))
            });
            r.sensors.iter().copied().chain(elements)
        });
        let (count, max) = ids.fold((0u64, 0u64), |(n, m), id| (n + 1, m.max(id)));
        if max <= count.saturating_mul(4).max(1 << 16) {
            // Bounded by the test: at most four slots an id, or 64 Ki.
            Nodes::Dense(vec![None; max as usize + 1])
        } else {
            Nodes::Sparse(HashMap::with_capacity(count as usize))
        }
    }

    fn insert(&mut self, id: u64, node: NodeRef) {
        match self {
            // `for_model` sized it for every id the loader inserts.
            Nodes::Dense(v) => match v.get_mut(id as usize) {
                Some(slot) => *slot = Some(node),
                None => {
                    let mut map: HashMap<u64, NodeRef> =
                        v.iter().enumerate().filter_map(|(i, n)| Some((i as u64, (*n)?))).collect();
                    map.insert(id, node);
                    *self = Nodes::Sparse(map);
                }
            },
            Nodes::Sparse(m) => {
                m.insert(id, node);
            }
        }
    }

    fn get(&self, id: u64) -> Option<NodeRef> {
        match self {
            Nodes::Dense(v) => v.get(usize::try_from(id).ok()?).copied().flatten(),
            Nodes::Sparse(m) => m.get(&id).copied(),
        }
    }
}
