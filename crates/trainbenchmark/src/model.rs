//! The railway model in memory: what the XMI importer reads, the generator writes, and the
//! loaders put into Espalier and SQLite. Ids are the model's element ids (unique in a model).

use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Position {
    Failure,
    Straight,
    Diverging,
}

impl Position {
    pub const ALL: [Position; 3] = [Position::Failure, Position::Straight, Position::Diverging];

    /// The literal as EMF, the CSV files and the schema's states spell it.
    pub fn name(self) -> &'static str {
        match self {
            Position::Failure => "FAILURE",
            Position::Straight => "STRAIGHT",
            Position::Diverging => "DIVERGING",
        }
    }

    pub fn parse(s: &str) -> Option<Position> {
        Position::ALL.into_iter().find(|p| p.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    Failure,
    Stop,
    Go,
}

impl Signal {
    pub const ALL: [Signal; 3] = [Signal::Failure, Signal::Stop, Signal::Go];

    pub fn name(self) -> &'static str {
        match self {
            Signal::Failure => "FAILURE",
            Signal::Stop => "STOP",
            Signal::Go => "GO",
        }
    }

    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|p| p.name() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Model {
    pub regions: Vec<Region>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub id: u64,
    pub sensors: Vec<u64>,
    pub elements: Vec<TrackElement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackElement {
    pub id: u64,
    pub kind: ElementKind,
    /// Sensors (the `monitoredBy` / `monitors` link, stored on the element).
    pub monitored_by: Vec<u64>,
    pub connects_to: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElementKind {
    Segment { length: i64, semaphores: Vec<Semaphore> },
    Switch { current_position: Position },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semaphore {
    pub id: u64,
    pub signal: Signal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub id: u64,
    pub active: bool,
    pub entry: Option<u64>,
    pub exit: Option<u64>,
    pub requires: Vec<u64>,
    pub follows: Vec<SwitchPosition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchPosition {
    pub id: u64,
    pub position: Position,
    pub target: u64,
}

/// The model as relations, one per node type and one per link type: the shape of the
/// official CSV files, and of the SQLite tables. Sets, so that two models compare by content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tables {
    pub regions: BTreeSet<u64>,
    /// (id, active)
    pub routes: BTreeSet<(u64, bool)>,
    /// (id, length)
    pub segments: BTreeSet<(u64, i64)>,
    pub semaphores: BTreeSet<(u64, Signal)>,
    pub sensors: BTreeSet<u64>,
    pub switches: BTreeSet<(u64, Position)>,
    pub switch_positions: BTreeSet<(u64, Position)>,
    /// (track element, track element)
    pub connects_to: BTreeSet<(u64, u64)>,
    /// (route, semaphore)
    pub entry: BTreeSet<(u64, u64)>,
    pub exit: BTreeSet<(u64, u64)>,
    /// (route, switch position)
    pub follows: BTreeSet<(u64, u64)>,
    /// (track element, sensor)
    pub monitored_by: BTreeSet<(u64, u64)>,
    /// (route, sensor)
    pub requires: BTreeSet<(u64, u64)>,
    /// (switch position, switch)
    pub target: BTreeSet<(u64, u64)>,
}

impl Model {
    pub fn tables(&self) -> Tables {
        let mut t = Tables::default();
        for r in &self.regions {
            t.regions.insert(r.id);
            t.sensors.extend(r.sensors.iter().copied());
            for e in &r.elements {
                match &e.kind {
                    ElementKind::Segment { length, semaphores } => {
                        t.segments.insert((e.id, *length));
                        t.semaphores.extend(semaphores.iter().map(|s| (s.id, s.signal)));
                    }
                    ElementKind::Switch { current_position } => {
                        t.switches.insert((e.id, *current_position));
                    }
                }
                t.monitored_by.extend(e.monitored_by.iter().map(|s| (e.id, *s)));
                t.connects_to.extend(e.connects_to.iter().map(|x| (e.id, *x)));
            }
        }
        for r in &self.routes {
            t.routes.insert((r.id, r.active));
            t.entry.extend(r.entry.map(|s| (r.id, s)));
            t.exit.extend(r.exit.map(|s| (r.id, s)));
            t.requires.extend(r.requires.iter().map(|s| (r.id, *s)));
            for p in &r.follows {
                t.switch_positions.insert((p.id, p.position));
                t.follows.insert((r.id, p.id));
                t.target.insert((p.id, p.target));
            }
        }
        t
    }

    /// Number of elements (nodes) in the model, as the Train Benchmark counts model size.
    pub fn size(&self) -> usize {
        let mut n = self.regions.len() + self.routes.len();
        for r in &self.regions {
            n += r.sensors.len() + r.elements.len();
            for e in &r.elements {
                if let ElementKind::Segment { semaphores, .. } = &e.kind {
                    n += semaphores.len();
                }
            }
        }
        n + self.routes.iter().map(|r| r.follows.len()).sum::<usize>()
    }
}
