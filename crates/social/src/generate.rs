//! The seeded generator: the paper's counts (§2) and its friend-degree distribution.
//!
//! The paper's generator is not published; what it says of its data is the counts and the
//! friends per person (mean 25, median 12, at least 1, at most 667, 90% under 65). Degrees
//! are drawn from a log-normal distribution with that median and mean (its 90th percentile
//! falls near 57), one person is given the maximum, and the friendships are wired by the
//! configuration model (the degrees' stubs shuffled and paired; self-loops and repeated pairs
//! dropped, then the shortfall paired again). Messages go from a person to one of their
//! friends (the recipient's inbox, the sender's 'sent'); activities and group memberships
//! are spread over the people, popular groups more popular.
//!
//! The same seed and size give the same network (SplitMix64, fixed by its definition; the
//! normal draws use `f64::ln`, `sqrt` and `cos`, which are correctly rounded or close to it on
//! every platform Rust supports).

use std::collections::BTreeSet;

use espalier_bench::suite::SplitMix;

use crate::model::{Activity, Address, Message, Named, Network, Params, Person, Size};

/// Rounds of re-pairing the stubs that the first pairing dropped.
const REPAIR_ROUNDS: usize = 16;
/// Seconds in the span activities and messages are dated in (a year).
const SPAN: u64 = 31_536_000;

const FIRST: [&str; 16] = [
    "Anna", "Ben", "Clara", "David", "Emma", "Felix", "Greta", "Hannes", "Ida", "Jonas", "Katrin", "Lukas", "Marie",
    "Noah", "Olga", "Paul",
];
const LAST: [&str; 12] = [
    "Bauer", "Fischer", "Hofmann", "Koch", "Meyer", "Peinl", "Richter", "Schmidt", "Schulz", "Wagner", "Weber", "Wolf",
];
const CITIES: [&str; 8] = ["Hof", "Bayreuth", "Bamberg", "Coburg", "Erlangen", "Nuremberg", "Plauen", "Selb"];
const VERBS: [&str; 5] = ["commented", "rated", "edited", "shared", "liked"];
const SYSTEMS: [&str; 4] = ["the wiki", "the blog", "the file share", "the tracker"];

/// Why the parameters cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Too few people, groups, addresses or organisations, or degrees no network can have.
    #[error("cannot generate this network: {0}")]
    Params(String),
}

struct Rng(SplitMix);

impl Rng {
    fn below(&mut self, bound: usize) -> usize {
        self.0.below(bound.max(1) as u64) as usize
    }

    /// A uniform draw in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// Generates the network of `size` from `seed`.
pub fn generate(size: Size, seed: u64) -> Result<Network, GenerateError> {
    generate_params(size.params(), seed)
}

/// Generates a network with these counts from `seed`.
pub fn generate_params(p: Params, seed: u64) -> Result<Network, GenerateError> {
    if p.people < 3 || p.groups == 0 || p.addresses == 0 || p.organisations == 0 {
        return Err(GenerateError::Params("at least 3 people and one group, address and organisation".into()));
    }
    if p.max_friends >= p.people || p.median_friends == 0 || p.mean_friends < p.median_friends {
        return Err(GenerateError::Params(format!(
            "friends: median {} ≤ mean {}, maximum {} below the {} people",
            p.median_friends, p.mean_friends, p.max_friends, p.people
        )));
    }
    let mut rng = Rng(SplitMix::new(seed));
    let friends = friendships(&mut rng, &p);
    let mut people: Vec<Person> = friends
        .into_iter()
        .enumerate()
        .map(|(i, friends)| {
            let first = FIRST[rng.below(FIRST.len())];
            let last = LAST[rng.below(LAST.len())];
            Person {
                name: format!("{first} {last}"),
                email: format!("{}.{}{i}@example.org", first.to_ascii_lowercase(), last.to_ascii_lowercase()),
                age: 18 + rng.below(48) as i64,
                address: rng.below(p.addresses),
                organisation: rng.below(p.organisations),
                friends: friends.into_iter().collect(),
                groups: Vec::new(),
                activities: Vec::new(),
                inbox: Vec::new(),
                sent: Vec::new(),
            }
        })
        .collect();
    for person in &mut people {
        // Half the memberships uniform, half skewed to the first groups: some groups are big.
        let n = 1 + rng.below(6);
        let groups: BTreeSet<usize> = (0..n)
            .map(|_| {
                if rng.below(2) == 0 {
                    rng.below(p.groups)
                } else {
                    let top = rng.below(p.groups) + 1;
                    rng.below(top)
                }
            })
            .collect();
        person.groups = groups.into_iter().collect();
    }
    let mut created: Vec<Vec<i64>> = vec![Vec::new(); p.people];
    for _ in 0..p.activities {
        created[rng.below(p.people)].push(rng.below(SPAN as usize) as i64);
    }
    for (person, times) in people.iter_mut().zip(created) {
        person.activities = times
            .into_iter()
            .enumerate()
            .map(|(j, created)| Activity {
                key: format!("a{j:04}"),
                title: format!(
                    "{} document {} in {}",
                    VERBS[rng.below(VERBS.len())],
                    rng.below(10_000),
                    SYSTEMS[rng.below(SYSTEMS.len())]
                ),
                created,
            })
            .collect();
    }
    let mut messages = Vec::with_capacity(p.messages);
    for m in 0..p.messages {
        let from = rng.below(p.people);
        let friends = &people[from].friends;
        let to = friends.get(rng.below(friends.len())).copied().unwrap_or((from + 1) % p.people);
        messages.push(Message { from, to, title: format!("Message {m}"), sent: rng.below(SPAN as usize) as i64 });
        people[from].sent.push(m);
        people[to].inbox.push(m);
    }
    let addresses = (0..p.addresses)
        .map(|i| Address {
            street: format!("{} Street {}", LAST[rng.below(LAST.len())], 1 + rng.below(200)),
            city: CITIES[rng.below(CITIES.len())].to_string(),
            country: if i % 10 == 0 { "Austria".into() } else { "Germany".into() },
        })
        .collect();
    let groups = (0..p.groups)
        .map(|i| Named { name: format!("Group {i}"), about: format!("People interested in topic {}", rng.below(50)) })
        .collect();
    let organisations = (0..p.organisations)
        .map(|i| Named { name: format!("Organisation {i}"), about: format!("Field {}", rng.below(20)) })
        .collect();
    Ok(Network { params: p, seed, people, messages, addresses, groups, organisations })
}

/// Each person's friends: degrees drawn, then wired by the configuration model.
fn friendships(rng: &mut Rng, p: &Params) -> Vec<BTreeSet<usize>> {
    let n = p.people;
    let mu = (p.median_friends as f64).ln();
    let sigma = (2.0 * (p.mean_friends as f64 / p.median_friends as f64).ln()).sqrt();
    let cap = p.max_friends.saturating_sub(1).max(1);
    let mut want: Vec<usize> =
        (0..n).map(|_| ((mu + sigma * rng.normal()).exp().round() as usize).clamp(1, cap)).collect();
    let hub = rng.below(n);
    want[hub] = p.max_friends;
    let mut stubs: Vec<usize> = want.iter().enumerate().flat_map(|(i, &d)| std::iter::repeat_n(i, d)).collect();
    // The sample's mean wanders with its tail (one draw of 600 moves it by 0.3): bring the
    // stubs to the mean, a random stub at a time: removals only from degrees above twice the
    // median (the tail), so the median stays.
    let target = p.mean_friends * n;
    for _ in 0..(4 * target) {
        if stubs.len() == target {
            break;
        }
        let k = rng.below(stubs.len());
        let i = stubs[k];
        if stubs.len() > target && i != hub && want[i] > 2 * p.median_friends {
            want[i] -= 1;
            stubs.swap_remove(k);
        } else if stubs.len() < target && i != hub && want[i] < cap {
            want[i] += 1;
            stubs.push(i);
        }
    }
    let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for _ in 0..REPAIR_ROUNDS {
        rng.shuffle(&mut stubs);
        for pair in stubs.chunks_exact(2) {
            let (a, b) = (pair[0], pair[1]);
            if a != b && adj[a].len() < want[a] && adj[b].len() < want[b] {
                adj[a].insert(b);
                adj[b].insert(a);
            }
        }
        stubs = (0..n).flat_map(|i| std::iter::repeat_n(i, want[i].saturating_sub(adj[i].len()))).collect();
        if stubs.len() < 2 {
            break;
        }
    }
    // The hub's shortfall (its stubs could only pair with the others' leftovers), then anyone
    // left without a friend: paired with people drawn at random (bounded tries each).
    for i in std::iter::once(hub).chain(0..n) {
        let goal = if i == hub { p.max_friends } else { 1 };
        let mut tries = 0;
        while adj[i].len() < goal && tries < 64 * n {
            tries += 1;
            let j = rng.below(n);
            if j != i && j != hub && adj[j].len() < cap && adj[i].insert(j) {
                adj[j].insert(i);
            }
        }
    }
    adj
}
