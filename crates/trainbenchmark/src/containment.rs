//! The containment tree that the official CSV form leaves out, rebuilt from its ids.
//!
//! The CSV files are the model as relations (one file per node type and per link type); which
//! region holds a sensor or a track element, and which segment holds a semaphore, is not in
//! them. The Train Benchmark's generator numbers elements in the order it creates them, and it
//! creates a route, then the region that route runs through with everything in it. So:
//!
//! - a sensor or track element is held by the region with the greatest id below its own;
//! - a semaphore is held by the first segment (smallest id) after the route it is the exit of
//!   — the generator puts a route's exit semaphore on the first segment of that route's region
//!   (the first semaphore, created before every route, is the last route's exit) — or, if it
//!   is no route's exit, by the first segment after its own id;
//! - a switch position is held by the route that follows it (the `follows` relation).
//!
//! For the official models this rebuilds the XMI's tree exactly (`tests/official.rs`). The
//! queries never read containment, so for any other CSV model the rule changes where nodes sit
//! in the tree, not what a query finds.

use std::collections::{BTreeMap, HashMap};

use crate::model::{ElementKind, Model, Region, Route, Semaphore, SwitchPosition, Tables, TrackElement};
use crate::ImportError;

/// Builds the model that `tables` are the relations of; `prefix` names the files in errors
/// (`railway-repair-1` for `railway-repair-1-Sensor.csv`, …).
pub fn model(tables: &Tables, prefix: &str) -> Result<Model, ImportError> {
    let file = |name: &str| format!("{prefix}-{name}.csv");
    let fail = |name: &str, message: String| ImportError::at(&file(name), 0, message);

    let mut regions: BTreeMap<u64, Region> =
        tables.regions.iter().map(|&id| (id, Region { id, sensors: Vec::new(), elements: Vec::new() })).collect();
    let mut semaphores_by_segment: HashMap<u64, Vec<Semaphore>> = HashMap::new();
    let segments: Vec<u64> = tables.segments.iter().map(|&(id, _)| id).collect();
    let exit_of: HashMap<u64, u64> = tables.exit.iter().map(|&(route, semaphore)| (semaphore, route)).collect();
    for &(id, signal) in &tables.semaphores {
        let after = exit_of.get(&id).copied().unwrap_or(id);
        // `segments` is sorted: the tables are ordered sets.
        let holder = segments.get(segments.partition_point(|&s| s <= after)).copied().ok_or_else(|| {
            fail("Semaphore", format!("semaphore {id}: no segment has a greater id than {after}, so none can hold it"))
        })?;
        semaphores_by_segment.entry(holder).or_default().push(Semaphore { id, signal });
    }

    let mut links: HashMap<u64, (Vec<u64>, Vec<u64>)> = HashMap::new();
    for &(element, sensor) in &tables.monitored_by {
        links.entry(element).or_default().0.push(sensor);
    }
    for &(from, to) in &tables.connects_to {
        links.entry(from).or_default().1.push(to);
    }

    let mut place = |id: u64, name: &str, element: Option<TrackElement>| {
        let Some(region) = regions.range_mut(..id).next_back().map(|(_, r)| r) else {
            return Err(fail(name, format!("{id} has a smaller id than every region, so no region can hold it")));
        };
        match element {
            Some(e) => region.elements.push(e),
            None => region.sensors.push(id),
        }
        Ok(())
    };
    let mut elements: Vec<(&str, TrackElement)> = Vec::new();
    for &(id, length) in &tables.segments {
        let semaphores = semaphores_by_segment.remove(&id).unwrap_or_default();
        elements.push(("Segment", element(id, ElementKind::Segment { length, semaphores }, &mut links)));
    }
    for &(id, current_position) in &tables.switches {
        elements.push(("Switch", element(id, ElementKind::Switch { current_position }, &mut links)));
    }
    // A region's elements in id order, as the generator (and so the XMI) lists them.
    elements.sort_by_key(|(_, e)| e.id);
    for (name, e) in elements {
        place(e.id, name, Some(e))?;
    }
    for &id in &tables.sensors {
        place(id, "Sensor", None)?;
    }

    let positions: HashMap<u64, _> = tables.switch_positions.iter().copied().collect();
    let mut targets: HashMap<u64, u64> = HashMap::new();
    for &(position, switch) in &tables.target {
        if targets.insert(position, switch).is_some() {
            return Err(fail("target", format!("switch position {position} has more than one target")));
        }
    }
    let one = |set: &std::collections::BTreeSet<(u64, u64)>, route: u64, name: &str| {
        let mut found = set.range((route, 0)..=(route, u64::MAX)).map(|&(_, s)| s);
        let first = found.next();
        match found.next() {
            Some(_) => Err(fail(name, format!("route {route} has more than one {name} semaphore"))),
            None => Ok(first),
        }
    };
    let mut routes = Vec::with_capacity(tables.routes.len());
    for &(id, active) in &tables.routes {
        let mut follows = Vec::new();
        for &(_, position_id) in tables.follows.range((id, 0)..=(id, u64::MAX)) {
            let position = positions.get(&position_id).copied().ok_or_else(|| {
                fail("follows", format!("route {id} follows {position_id}, which is not a switch position"))
            })?;
            let target = targets
                .get(&position_id)
                .copied()
                .ok_or_else(|| fail("target", format!("switch position {position_id} has no target")))?;
            follows.push(SwitchPosition { id: position_id, position, target });
        }
        let requires = tables.requires.range((id, 0)..=(id, u64::MAX)).map(|&(_, s)| s).collect();
        routes.push(Route {
            id,
            active,
            entry: one(&tables.entry, id, "entry")?,
            exit: one(&tables.exit, id, "exit")?,
            requires,
            follows,
        });
    }
    Ok(Model { regions: regions.into_values().collect(), routes })
}

/// A track element with its links taken from `links` (monitored by, connects to).
fn element(id: u64, kind: ElementKind, links: &mut HashMap<u64, (Vec<u64>, Vec<u64>)>) -> TrackElement {
    let (monitored_by, connects_to) = links.remove(&id).unwrap_or_default();
    TrackElement { id, kind, monitored_by, connects_to }
}
