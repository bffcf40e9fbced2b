//! The generated network, as plain data: what the loaders put into Espalier and SQLite and
//! what the tests count.

use serde::Serialize;

/// How big a network to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// 60 people, for CI and the cross-check (a few thousand nodes).
    Tiny,
    /// The paper's data set (§2): 2,011 people, 26,982 messages, 25,365 activities, 2,000
    /// addresses, 200 groups and 100 organisations; friends per person 25 on average, median
    /// 12, at least 1, at most 667, 90% under 65.
    Paper,
}

impl Size {
    /// `tiny` or `paper`.
    pub fn parse(s: &str) -> Option<Size> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tiny" => Some(Size::Tiny),
            "paper" | "full" => Some(Size::Paper),
            _ => None,
        }
    }

    /// The size's name.
    pub fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Paper => "paper",
        }
    }

    /// The counts and the friend-degree distribution of this size.
    pub fn params(self) -> Params {
        match self {
            Size::Tiny => Params {
                people: 60,
                messages: 800,
                activities: 750,
                addresses: 60,
                groups: 8,
                organisations: 4,
                median_friends: 4,
                mean_friends: 6,
                max_friends: 30,
            },
            Size::Paper => Params {
                people: 2011,
                messages: 26_982,
                activities: 25_365,
                addresses: 2000,
                groups: 200,
                organisations: 100,
                median_friends: 12,
                mean_friends: 25,
                max_friends: 667,
            },
        }
    }
}

/// The counts a network is generated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// People.
    pub people: usize,
    /// Messages, each from one person to another.
    pub messages: usize,
    /// Activities, each of one person.
    pub activities: usize,
    /// Addresses (a person refers to one).
    pub addresses: usize,
    /// Groups.
    pub groups: usize,
    /// Organisations (a person refers to one).
    pub organisations: usize,
    /// The median number of friends the degrees are drawn around.
    pub median_friends: usize,
    /// The mean number of friends the degrees are drawn with.
    pub mean_friends: usize,
    /// The most friends one person has (exactly one person has this many).
    pub max_friends: usize,
}

/// A person; index `i` in [`Network::people`] has key [`person_key`]`(i)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    /// Display name.
    pub name: String,
    /// E-mail address.
    pub email: String,
    /// Age in years.
    pub age: i64,
    /// Index of the person's address.
    pub address: usize,
    /// Index of the person's organisation.
    pub organisation: usize,
    /// Indexes of the person's friends, ascending (friendship is symmetric).
    pub friends: Vec<usize>,
    /// Indexes of the groups the person is in, ascending.
    pub groups: Vec<usize>,
    /// The person's activities, keys ascending.
    pub activities: Vec<Activity>,
    /// Indexes of the messages in the person's inbox, ascending.
    pub inbox: Vec<usize>,
    /// Indexes of the messages the person sent, ascending.
    pub sent: Vec<usize>,
}

/// An activity ("Person x commented document y in system z").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// Its key within the person's activities (`a0001`, …).
    pub key: String,
    /// Its title.
    pub title: String,
    /// When it was created (seconds in the data set's span).
    pub created: i64,
}

/// A message between two people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The sender's index.
    pub from: usize,
    /// The recipient's index.
    pub to: usize,
    /// Its title.
    pub title: String,
    /// When it was sent.
    pub sent: i64,
}

/// An address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Street and number.
    pub street: String,
    /// City.
    pub city: String,
    /// Country.
    pub country: String,
}

/// A group or an organisation: a name and a line about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its name.
    pub name: String,
    /// A description (groups) or field (organisations).
    pub about: String,
}

/// A whole generated network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// The counts it was generated with.
    pub params: Params,
    /// The seed it was generated from.
    pub seed: u64,
    /// The people.
    pub people: Vec<Person>,
    /// The messages.
    pub messages: Vec<Message>,
    /// The addresses.
    pub addresses: Vec<Address>,
    /// The groups.
    pub groups: Vec<Named>,
    /// The organisations.
    pub organisations: Vec<Named>,
}

/// The key of person `i`: `p0000`, … (fixed width, so key order is index order).
pub fn person_key(i: usize) -> String {
    format!("p{i:04}")
}

/// The key of group `i`.
pub fn group_key(i: usize) -> String {
    format!("g{i:03}")
}

/// The key of message `i`.
pub fn message_key(i: usize) -> String {
    format!("m{i:05}")
}

/// The key of address `i`.
pub fn address_key(i: usize) -> String {
    format!("ad{i:04}")
}

/// The key of organisation `i`.
pub fn organisation_key(i: usize) -> String {
    format!("o{i:03}")
}

/// Friends-per-person figures of a network (the paper's §2 description).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DegreeStats {
    /// Mean friends per person.
    pub mean: f64,
    /// Median friends per person (the lower middle value).
    pub median: usize,
    /// Fewest friends of a person.
    pub min: usize,
    /// Most friends of a person.
    pub max: usize,
    /// Share of people with fewer than 65 friends.
    pub under_65: f64,
    /// Friendships (each counted once).
    pub friendships: usize,
}

impl Network {
    /// The activities of every person together.
    pub fn activity_count(&self) -> usize {
        self.people.iter().map(|p| p.activities.len()).sum()
    }

    /// The friend-degree figures.
    pub fn degrees(&self) -> DegreeStats {
        let mut d: Vec<usize> = self.people.iter().map(|p| p.friends.len()).collect();
        d.sort_unstable();
        let n = d.len().max(1);
        let total: usize = d.iter().sum();
        DegreeStats {
            mean: total as f64 / n as f64,
            median: d.get((d.len().saturating_sub(1)) / 2).copied().unwrap_or(0),
            min: d.first().copied().unwrap_or(0),
            max: d.last().copied().unwrap_or(0),
            under_65: d.iter().filter(|&&x| x < 65).count() as f64 / n as f64,
            friendships: total / 2,
        }
    }
}
