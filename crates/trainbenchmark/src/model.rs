//! The railway model in memory: what the XMI importer reads, the generator writes, and the
//! loaders put into Espalier and SQLite. Ids are the model's element ids (unique in a model).

use std::collections::BTreeSet;

/// A switch's current position, or the position a route's switch position requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Position {
    /// `FAILURE` (the EMF default).
    Failure,
    /// `STRAIGHT`.
    Straight,
    /// `DIVERGING`.
    Diverging,
}

impl Position {
    /// Every position, in the schema's order.
    pub const ALL: [Position; 3] = [Position::Failure, Position::Straight, Position::Diverging];

    /// The literal as EMF, the CSV files and the schema's states spell it.
    pub fn name(self) -> &'static str {
        match self {
            Position::Failure => "FAILURE",
            Position::Straight => "STRAIGHT",
            Position::Diverging => "DIVERGING",
        }
    }

    /// The position spelled `s` (as [`Position::name`] spells it), if any.
    pub fn parse(s: &str) -> Option<Position> {
        Position::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A semaphore's signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `FAILURE` (the EMF default).
    Failure,
    /// `STOP`.
    Stop,
    /// `GO`.
    Go,
}

impl Signal {
    /// Every signal, in the schema's order.
    pub const ALL: [Signal; 3] = [Signal::Failure, Signal::Stop, Signal::Go];

    /// The literal as EMF, the CSV files and the schema's states spell it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Failure => "FAILURE",
            Signal::Stop => "STOP",
            Signal::Go => "GO",
        }
    }

    /// The signal spelled `s` (as [`Signal::name`] spells it), if any.
    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A railway model: its regions (with everything they contain) and its routes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Model {
    /// The regions.
    pub regions: Vec<Region>,
    /// The routes.
    pub routes: Vec<Route>,
}

/// A region: its sensors and its track elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// The region's id.
    pub id: u64,
    /// The ids of its sensors.
    pub sensors: Vec<u64>,
    /// Its track elements.
    pub elements: Vec<TrackElement>,
}

/// A track element of a region: a segment or a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackElement {
    /// The element's id.
    pub id: u64,
    /// Segment or switch, with what that kind holds.
    pub kind: ElementKind,
    /// Sensors (the `monitoredBy` / `monitors` link, stored on the element).
    pub monitored_by: Vec<u64>,
    /// The ids of the track elements it connects to (`connectsTo`).
    pub connects_to: Vec<u64>,
}

/// What a track element is, and what that kind holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElementKind {
    /// A segment (PosLength, ConnectedSegments).
    Segment {
        /// Its length (PosLength matches a length of 0 or less).
        length: i64,
        /// The semaphores it holds.
        semaphores: Vec<Semaphore>,
    },
    /// A switch (SwitchMonitored, RouteSensor, SwitchSet).
    Switch {
        /// The position it is in.
        current_position: Position,
    },
}

/// A semaphore, held by a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semaphore {
    /// The semaphore's id.
    pub id: u64,
    /// The signal it shows.
    pub signal: Signal,
}

/// A route: its entry and exit semaphores, the sensors it requires and the switch positions
/// it follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The route's id.
    pub id: u64,
    /// Whether the route is active (SwitchSet checks only active routes).
    pub active: bool,
    /// The id of its entry semaphore, if it has one.
    pub entry: Option<u64>,
    /// The id of its exit semaphore, if it has one.
    pub exit: Option<u64>,
    /// The ids of the sensors it requires.
    pub requires: Vec<u64>,
    /// The switch positions it follows (and holds).
    pub follows: Vec<SwitchPosition>,
}

/// A switch position of a route: the position the route needs one switch in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchPosition {
    /// The switch position's id.
    pub id: u64,
    /// The position required.
    pub position: Position,
    /// The id of the switch.
    pub target: u64,
}

/// The model as relations, one per node type and one per link type: the shape of the
/// official CSV files, and of the SQLite tables. Sets, so that two models compare by content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tables {
    /// Region ids.
    pub regions: BTreeSet<u64>,
    /// (id, active)
    pub routes: BTreeSet<(u64, bool)>,
    /// (id, length)
    pub segments: BTreeSet<(u64, i64)>,
    /// (id, signal)
    pub semaphores: BTreeSet<(u64, Signal)>,
    /// Sensor ids.
    pub sensors: BTreeSet<u64>,
    /// (id, current position)
    pub switches: BTreeSet<(u64, Position)>,
    /// (id, position)
    pub switch_positions: BTreeSet<(u64, Position)>,
    /// (track element, track element)
    pub connects_to: BTreeSet<(u64, u64)>,
    /// (route, semaphore)
    pub entry: BTreeSet<(u64, u64)>,
    /// (route, semaphore)
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

impl Tables {
    /// Every link type's relation with its name in the official files (`connectsTo`, `entry`,
    /// `exit`, `follows`, `monitoredBy`, `requires`, `target`).
    pub fn links(&self) -> [(&'static str, &BTreeSet<(u64, u64)>); 7] {
        [
            ("connectsTo", &self.connects_to),
            ("entry", &self.entry),
            ("exit", &self.exit),
            ("follows", &self.follows),
            ("monitoredBy", &self.monitored_by),
            ("requires", &self.requires),
            ("target", &self.target),
        ]
    }
}

impl Model {
    /// The model as relations.
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
