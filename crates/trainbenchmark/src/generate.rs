//! Models of any size, made by the rules of the official Train Benchmark generator
//! (`ScalableModelGenerator`): `5 × size` routes, each with its own region, 1–19 switches
//! per route, 1–9 sensors per switch, 5 segments per sensor, a semaphore between
//! consecutive routes, the tracks of consecutive routes joined into one ring; then faults
//! injected at the scenario's rates. The random choices are drawn in the official order from
//! `java.util.Random` streams with the official seeds, so size 1 gives the official models.

use std::collections::HashMap;

use crate::java_random::JavaRandom;
use crate::model::{ElementKind, Model, Position, Region, Route, Semaphore, Signal, SwitchPosition, TrackElement};

/// Which faults the model starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// No faults: every query has no match.
    Batch,
    /// The start model of the inject scenario (few faults; the benchmark injects more).
    Inject,
    /// The start model of the repair scenario (many faults; the benchmark repairs them).
    Repair,
}

impl Scenario {
    /// The scenario's name, as the benchmark and the command line spell it.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Batch => "batch",
            Scenario::Inject => "inject",
            Scenario::Repair => "repair",
        }
    }

    /// The scenario called `s`, if any.
    pub fn parse(s: &str) -> Option<Scenario> {
        [Scenario::Batch, Scenario::Inject, Scenario::Repair].into_iter().find(|x| x.name() == s)
    }

    /// Fault rates: (connected segments %, pos length %, route sensor %, semaphore neighbor %,
    /// switch monitored %, switch set %, route reachability ‰).
    fn rates(self) -> [i32; 7] {
        match self {
            Scenario::Batch => [0; 7],
            Scenario::Inject => [5, 2, 4, 7, 2, 8, 2],
            Scenario::Repair => [5, 10, 10, 25, 18, 15, 1],
        }
    }
}

/// The seed of every random stream of the official generator.
const SEED: i64 = 19_871_053;
const MAX_SEGMENT_LENGTH: i32 = 1000;
const SEGMENTS_PER_SENSOR: usize = 5;
const MAX_SWITCH_POSITIONS: i32 = 20;
const MAX_SENSORS: i32 = 10;
/// Largest size accepted: about 3 400 elements per unit, so this is a model of ~35 million
/// elements — far past what one machine's benchmark should try.
pub const MAX_SIZE: u32 = 10_000;

/// Where a vertex sits while the model is built (vertices are created before they are
/// placed in their container, as in the official generator).
enum Vertex {
    Semaphore(Signal),
    Switch(Position),
    Segment(i64),
    Sensor,
}

struct Builder {
    next_id: u64,
    vertices: HashMap<u64, Vertex>,
    /// region id -> (sensors, elements) in the order they were added
    regions: Vec<(u64, Vec<u64>, Vec<u64>)>,
    semaphores_of: HashMap<u64, Vec<u64>>,
    monitored_by: HashMap<u64, Vec<u64>>,
    connects_to: HashMap<u64, Vec<u64>>,
    routes: Vec<Route>,
}

impl Builder {
    fn vertex(&mut self, v: Vertex) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.vertices.insert(id, v);
        id
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

struct Streams {
    connected_segments: JavaRandom,
    pos_length: JavaRandom,
    route_sensor: JavaRandom,
    semaphore_neighbor: JavaRandom,
    switch_monitored: JavaRandom,
    switch_set: JavaRandom,
    route_reachability: JavaRandom,
    length: JavaRandom,
    positions: JavaRandom,
    sensors: JavaRandom,
    switch_positions: JavaRandom,
}

/// Generates the model of `scenario` at `size` (1 ≤ size ≤ [`MAX_SIZE`]).
pub fn generate(scenario: Scenario, size: u32) -> Model {
    assert!((1..=MAX_SIZE).contains(&size), "size {size} outside 1..={MAX_SIZE}");
    let [cs_rate, pl_rate, rs_rate, sn_rate, sm_rate, ss_rate, rr_rate] = scenario.rates();
    let mut r = Streams {
        connected_segments: JavaRandom::new(SEED),
        pos_length: JavaRandom::new(SEED + 1),
        route_sensor: JavaRandom::new(SEED + 2),
        semaphore_neighbor: JavaRandom::new(SEED + 3),
        switch_monitored: JavaRandom::new(SEED + 4),
        switch_set: JavaRandom::new(SEED + 5),
        route_reachability: JavaRandom::new(SEED + 8),
        length: JavaRandom::new(SEED),
        positions: JavaRandom::new(SEED),
        sensors: JavaRandom::new(SEED),
        switch_positions: JavaRandom::new(SEED),
    };
    let mut b = Builder {
        next_id: 1,
        vertices: HashMap::new(),
        regions: Vec::new(),
        semaphores_of: HashMap::new(),
        monitored_by: HashMap::new(),
        connects_to: HashMap::new(),
        routes: Vec::new(),
    };
    let routes = 5 * size as usize;
    let mut prev_semaphore: Option<u64> = None;
    let mut first_semaphore = 0;
    let mut first_track: Vec<u64> = Vec::new();
    let mut prev_track: Vec<u64> = Vec::new();
    for i in 0..routes {
        let mut first_segment = true;
        let prev = match prev_semaphore {
            Some(s) => s,
            None => {
                first_semaphore = b.vertex(Vertex::Semaphore(Signal::Go));
                first_semaphore
            }
        };
        let semaphore = if i != routes - 1 { b.vertex(Vertex::Semaphore(Signal::Go)) } else { first_semaphore };
        let entry = if r.semaphore_neighbor.next_int(100) < sn_rate { None } else { Some(prev) };
        let route_id = b.id();
        let region_id = b.id();
        b.regions.push((region_id, Vec::new(), Vec::new()));
        let mut route = Route {
            id: route_id,
            active: true,
            entry,
            exit: Some(semaphore),
            requires: Vec::new(),
            follows: Vec::new(),
        };
        let switch_positions = r.switch_positions.next_int(MAX_SWITCH_POSITIONS - 1) + 1;
        let mut track: Vec<u64> = Vec::new();
        for _ in 0..switch_positions {
            let ordinal = r.positions.next_int(3) as usize;
            let sw = b.vertex(Vertex::Switch(Position::ALL[ordinal]));
            track.push(sw);
            b.regions.last_mut().expect("region pushed above").2.push(sw);
            let sensors = r.sensors.next_int(MAX_SENSORS - 1) + 1;
            for _ in 0..sensors {
                let sensor = b.vertex(Vertex::Sensor);
                b.regions.last_mut().expect("region pushed above").1.push(sensor);
                if r.switch_monitored.next_int(100) >= sm_rate {
                    b.monitored_by.entry(sw).or_default().push(sensor);
                    if r.route_sensor.next_int(100) >= rs_rate {
                        route.requires.push(sensor);
                    }
                }
                for _ in 0..SEGMENTS_PER_SENSOR {
                    let segment = segment(&mut b, &mut r, pl_rate, &mut track, sensor);
                    if first_segment {
                        b.semaphores_of.entry(segment).or_default().push(semaphore);
                        first_segment = false;
                    }
                }
                if r.connected_segments.next_int(100) < cs_rate {
                    segment(&mut b, &mut r, pl_rate, &mut track, sensor);
                }
            }
            let wrong = r.switch_set.next_int(100) < ss_rate;
            let position = if wrong { Position::ALL[2 - ordinal] } else { Position::ALL[ordinal] };
            let id = b.id();
            route.follows.push(SwitchPosition { id, position, target: sw });
        }
        for j in 1..track.len() {
            if r.route_reachability.next_int(1000) >= rr_rate {
                b.connects_to.entry(track[j - 1]).or_default().push(track[j]);
            }
        }
        if let (Some(&last), Some(&first)) = (prev_track.last(), track.first()) {
            b.connects_to.entry(last).or_default().push(first);
        }
        if i == routes - 1 {
            if let (Some(&last), Some(&first)) = (track.last(), first_track.first()) {
                b.connects_to.entry(last).or_default().push(first);
            }
        }
        if i == 0 {
            first_track = track.clone();
        }
        prev_track = track;
        prev_semaphore = Some(semaphore);
        b.routes.push(route);
    }
    assemble(b)
}

fn segment(b: &mut Builder, r: &mut Streams, pl_rate: i32, track: &mut Vec<u64>, sensor: u64) -> u64 {
    let wrong = r.pos_length.next_int(100) < pl_rate;
    let length = (if wrong { -1 } else { 1 }) * r.length.next_int(MAX_SEGMENT_LENGTH) as i64 + 1;
    let id = b.vertex(Vertex::Segment(length));
    b.regions.last_mut().expect("a region per route").2.push(id);
    b.monitored_by.entry(id).or_default().push(sensor);
    track.push(id);
    id
}

fn assemble(mut b: Builder) -> Model {
    let mut regions = Vec::with_capacity(b.regions.len());
    for (id, sensors, elements) in std::mem::take(&mut b.regions) {
        let elements = elements
            .into_iter()
            .map(|e| {
                let kind = match b.vertices.get(&e) {
                    Some(Vertex::Switch(p)) => ElementKind::Switch { current_position: *p },
                    Some(Vertex::Segment(length)) => ElementKind::Segment {
                        length: *length,
                        semaphores: b
                            .semaphores_of
                            .remove(&e)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|s| match b.vertices.get(&s) {
                                Some(Vertex::Semaphore(signal)) => Semaphore { id: s, signal: *signal },
                                _ => unreachable!("semaphores are semaphore vertices"),
                            })
                            .collect(),
                    },
                    _ => unreachable!("track elements are switches and segments"),
                };
                TrackElement {
                    id: e,
                    kind,
                    monitored_by: b.monitored_by.remove(&e).unwrap_or_default(),
                    connects_to: b.connects_to.remove(&e).unwrap_or_default(),
                }
            })
            .collect();
        regions.push(Region { id, sensors, elements });
    }
    debug_assert!(b.vertices.values().filter(|v| matches!(v, Vertex::Sensor)).count() > 0);
    Model { regions, routes: b.routes }
}
