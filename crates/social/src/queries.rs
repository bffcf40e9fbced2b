//! The queries of the paper's appendix table, in Espalier's pattern language, with the
//! parameters each invocation draws.
//!
//! The "10 people" rows ask for ten people's data at once: in Espalier that is one request,
//! a `transaction` of ten read-only queries with `$p0` … `$p9` (one reply of ten results).
//! The three queries the paper made stored procedures (friend recommendations and both
//! friends-of-friends reads) are also declared as commands in `social.alan` and run as
//! `command 'Name' ( 'person' -> $person )`.

use std::collections::HashMap;

use espalier_bench::suite::SplitMix;
use espalier_instruction::ParamValue;
use serde::Serialize;

use crate::model::{group_key, person_key, Network};

/// People in a "10 people" batch (and activities in an activity list).
pub const BATCH: usize = 10;
/// Longest path the shortest-path query looks for (friendships).
pub const MAX_PATH: usize = 6;

/// One row of the appendix table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Query {
    /// Group x ⇒ members.
    GroupMembers,
    /// Person x ⇒ group membership.
    PersonGroups,
    /// Person x ⇒ friend ⇒ friend, not x's friend, by friends in common.
    FriendRecommendations,
    /// Person x ⇒ friend ⇒ group, not x's group, by friends in it.
    GroupRecommendations,
    /// Person x ⇒ friend ⇒ friend ⇒ friend, not x's friend (friends of friends, 3 levels).
    FriendsOfFriends3,
    /// Person x ⇒ friend ⇒ friend, not x's friend (friends of friends, 2 levels).
    FriendsOfFriends2,
    /// Persons x, y ⇒ a shortest path between them.
    ShortestPath,
    /// Person x ⇒ message collection 'inbox' ⇒ messages.
    Inbox,
    /// Person x ⇒ message collections with the number of messages in each.
    MessageCollections,
    /// Person x ⇒ first-level properties and some second-level ones (profile page).
    Profile,
    /// Ten people's profiles at once.
    Profiles10,
    /// Ten people's friends at once.
    Friends10,
    /// Person x ⇒ friends.
    Friends,
    /// Person x ⇒ one activity.
    Activity,
    /// Person x ⇒ activities.
    Activities,
    /// Ten people's activities at once.
    Activities10,
    /// Person x ⇒ ten of their activities at once.
    ActivityList10,
    /// Person x ⇒ friends ⇒ activities, newest first, the first 100.
    FriendsActivities,
}

impl Query {
    /// Every query, in the appendix's order.
    pub const ALL: [Query; 18] = [
        Query::GroupMembers,
        Query::PersonGroups,
        Query::FriendRecommendations,
        Query::GroupRecommendations,
        Query::FriendsOfFriends3,
        Query::FriendsOfFriends2,
        Query::ShortestPath,
        Query::Inbox,
        Query::MessageCollections,
        Query::Profile,
        Query::Profiles10,
        Query::Friends10,
        Query::Friends,
        Query::Activity,
        Query::Activities,
        Query::Activities10,
        Query::ActivityList10,
        Query::FriendsActivities,
    ];

    /// The query's name in options and reports.
    pub fn name(self) -> &'static str {
        match self {
            Query::GroupMembers => "group-members",
            Query::PersonGroups => "person-groups",
            Query::FriendRecommendations => "friend-recommendations",
            Query::GroupRecommendations => "group-recommendations",
            Query::FriendsOfFriends3 => "fof-3",
            Query::FriendsOfFriends2 => "fof-2",
            Query::ShortestPath => "shortest-path",
            Query::Inbox => "inbox",
            Query::MessageCollections => "message-collections",
            Query::Profile => "profile",
            Query::Profiles10 => "profiles-10",
            Query::Friends10 => "friends-10",
            Query::Friends => "friends",
            Query::Activity => "activity",
            Query::Activities => "activities",
            Query::Activities10 => "activities-10",
            Query::ActivityList10 => "activity-list-10",
            Query::FriendsActivities => "friends-activities",
        }
    }

    /// The query named `s` (case-insensitive).
    pub fn parse(s: &str) -> Option<Query> {
        Query::ALL.into_iter().find(|q| q.name().eq_ignore_ascii_case(s.trim()))
    }

    /// How many times the paper runs it (the appendix's first column).
    pub fn paper_invocations(self) -> usize {
        match self {
            Query::FriendsOfFriends3 | Query::FriendsOfFriends2 => 20,
            Query::FriendRecommendations
            | Query::GroupRecommendations
            | Query::ShortestPath
            | Query::Profiles10
            | Query::Friends10
            | Query::Activities10
            | Query::ActivityList10
            | Query::FriendsActivities => 200,
            _ => 2000,
        }
    }

    /// The command declared for it in `social.alan` (the paper's stored procedures).
    pub fn command(self) -> Option<&'static str> {
        match self {
            Query::FriendRecommendations => Some("Friend Recommendations"),
            Query::FriendsOfFriends2 => Some("Friends Of Friends 2"),
            Query::FriendsOfFriends3 => Some("Friends Of Friends 3"),
            _ => None,
        }
    }

    /// The instruction text sent for it, with `$` parameters.
    pub fn text(self) -> String {
        match self {
            Query::GroupMembers => "collection match g in . 'Groups' : $group p in g < 'Groups'
select 'person' -> p 'name' -> p text : 'Name' order by 'person'"
                .into(),
            Query::PersonGroups => "collection match x in . 'People' : $person g in x > 'Groups'
select 'group' -> g 'name' -> g text : 'Name' order by 'group'"
                .into(),
            Query::FriendRecommendations => FRIEND_RECOMMENDATIONS.into(),
            Query::GroupRecommendations => "collection match x in . 'People' : $person f in x > 'Friends'
    g in f > 'Groups' where not x > 'Groups' == g
select 'group' -> g 'friends' -> count ( ) order by 'friends' desc 'group'"
                .into(),
            Query::FriendsOfFriends3 => FOF3.into(),
            Query::FriendsOfFriends2 => FOF2.into(),
            Query::ShortestPath => format!(
                "collection match x in . 'People' : $person y in . 'People' : $other
select 'path' -> shortest x ( > 'Friends' ) to y max {MAX_PATH}"
            ),
            Query::Inbox => INBOX.into(),
            Query::MessageCollections => "collection match c in . 'People' : $person . 'Message Collections'
    m in c > 'Messages'
select 'collection' -> c 'messages' -> count ( ) order by 'collection'"
                .into(),
            Query::Profile => PROFILE.into(),
            Query::Friends => FRIENDS.into(),
            Query::Activity => ACTIVITY.into(),
            Query::Activities => ACTIVITIES.into(),
            Query::FriendsActivities => "collection match x in . 'People' : $person a in x > 'Friends' . 'Activities'
select 'activity' -> a 'title' -> a text : 'Title' 'created' -> a number : 'Created'
order by 'created' desc 'activity' limit 100"
                .into(),
            Query::Profiles10 => batch(PROFILE, "$person", "$p"),
            Query::Friends10 => batch(FRIENDS, "$person", "$p"),
            Query::Activities10 => batch(ACTIVITIES, "$person", "$p"),
            Query::ActivityList10 => batch(ACTIVITY, "$activity", "$a"),
        }
    }

    /// Whether it is a batch: a transaction of [`BATCH`] queries.
    pub fn is_batch(self) -> bool {
        matches!(self, Query::Profiles10 | Query::Friends10 | Query::Activities10 | Query::ActivityList10)
    }

    /// The values of its parameters for one invocation.
    pub fn params(self, d: &Draw) -> HashMap<String, ParamValue> {
        let text = |s: String| ParamValue::Text(s);
        let mut p = HashMap::new();
        match self {
            Query::GroupMembers => {
                p.insert("group".into(), text(group_key(d.group)));
            }
            Query::ShortestPath => {
                p.insert("person".into(), text(person_key(d.person)));
                p.insert("other".into(), text(person_key(d.other)));
            }
            Query::Activity => {
                p.insert("person".into(), text(person_key(d.person)));
                p.insert("activity".into(), text(d.activities.first().cloned().unwrap_or_default()));
            }
            Query::ActivityList10 => {
                p.insert("person".into(), text(person_key(d.person)));
                for (i, a) in d.activities.iter().enumerate() {
                    p.insert(format!("a{i}"), text(a.clone()));
                }
            }
            Query::Profiles10 | Query::Friends10 | Query::Activities10 => {
                for (i, x) in d.people.iter().enumerate() {
                    p.insert(format!("p{i}"), text(person_key(*x)));
                }
            }
            _ => {
                p.insert("person".into(), text(person_key(d.person)));
            }
        }
        p
    }
}

const FRIEND_RECOMMENDATIONS: &str = "collection match x in . 'People' : $person f in x > 'Friends'
    c in f > 'Friends' where c != x and not x > 'Friends' == c
select 'candidate' -> c 'in common' -> count ( ) order by 'in common' desc 'candidate'";
const FOF2: &str = "collection match x in . 'People' : $person c in x > 'Friends' > 'Friends'
    where c != x and not x > 'Friends' == c
select 'person' -> c 'name' -> c text : 'Name' order by 'person'";
const FOF3: &str = "collection match x in . 'People' : $person c in x > 'Friends' > 'Friends' > 'Friends'
    where c != x and not x > 'Friends' == c
select 'person' -> c 'name' -> c text : 'Name' order by 'person'";
const INBOX: &str = "collection match m in . 'People' : $person . 'Message Collections' : \"inbox\" > 'Messages'
select 'message' -> m 'from' -> m reference : 'From' 'title' -> m text : 'Title' 'sent' -> m number : 'Sent'
order by 'sent' desc 'message'";
const PROFILE: &str = "collection match x in . 'People' : $person
select 'person' -> x 'name' -> x text : 'Name' 'email' -> x text : 'Email' 'age' -> x number : 'Age'
    'street' -> x > 'Address' text : 'Street' 'city' -> x > 'Address' text : 'City'
    'organisation' -> x > 'Organisation' text : 'Name'";
const FRIENDS: &str = "collection match x in . 'People' : $person f in x > 'Friends'
select 'friend' -> f 'name' -> f text : 'Name' order by 'friend'";
const ACTIVITY: &str = "collection match a in . 'People' : $person . 'Activities' : $activity
select 'title' -> a text : 'Title' 'created' -> a number : 'Created'";
const ACTIVITIES: &str = "collection match a in . 'People' : $person . 'Activities'
select 'activity' -> a 'title' -> a text : 'Title' 'created' -> a number : 'Created'
order by 'created' desc 'activity'";

/// A transaction of [`BATCH`] copies of `query`, the i-th with `param` renamed `{prefix}i`.
fn batch(query: &str, param: &str, prefix: &str) -> String {
    let members: Vec<String> = (0..BATCH).map(|i| query.replace(param, &format!("{prefix}{i}"))).collect();
    format!("transaction (\n{}\n)", members.join(",\n"))
}

/// The command call text for a query declared as a command.
pub fn command_text(name: &str) -> String {
    format!("command '{name}' ( 'person' -> $person )")
}

/// What one invocation asks about: drawn once, used by every system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draw {
    /// The person (a person with at least one activity).
    pub person: usize,
    /// The other end of a shortest path.
    pub other: usize,
    /// The group.
    pub group: usize,
    /// Ten people for the batches.
    pub people: Vec<usize>,
    /// Keys of `person`'s activities (ten, repeats allowed; the first for the single read).
    pub activities: Vec<String>,
}

/// `n` draws from `seed` over `net`.
pub fn draws(net: &Network, n: usize, seed: u64) -> Vec<Draw> {
    let mut rng = SplitMix::new(seed);
    let people = net.people.len().max(1) as u64;
    let with_activities: Vec<usize> =
        net.people.iter().enumerate().filter(|(_, p)| !p.activities.is_empty()).map(|(i, _)| i).collect();
    (0..n)
        .map(|_| {
            let person =
                with_activities.get(rng.below(with_activities.len().max(1) as u64) as usize).copied().unwrap_or(0);
            let acts = net.people.get(person).map(|p| p.activities.as_slice()).unwrap_or_default();
            Draw {
                person,
                other: rng.below(people) as usize,
                group: rng.below(net.groups.len().max(1) as u64) as usize,
                people: (0..BATCH).map(|_| rng.below(people) as usize).collect(),
                activities: (0..BATCH)
                    .filter_map(|_| acts.get(rng.below(acts.len().max(1) as u64) as usize).map(|a| a.key.clone()))
                    .collect(),
            }
        })
        .collect()
}
