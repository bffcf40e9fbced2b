//! Puts a network into Espalier in one atomic request through the typed graph
//! (`WriteGraph`), as the OO7 and Train Benchmark loaders do.

use espalier_data::{EntryKey, NodeRef, WriteGraph};
use espalier_schema::{NodeTypeId, PropertyId, PropertyKind, Schema, ROOT};

use crate::model::{address_key, group_key, message_key, organisation_key, person_key, Network};
use crate::LoadError;

/// Drop the change records every this many writes: a bulk load's change set would be as large
/// as the database.
const CHANGES_KEPT: usize = 10_000;

/// The properties of `social.alan` the loader writes, found by name once.
struct Props {
    organisations: PropertyId,
    org_name: PropertyId,
    org_field: PropertyId,
    addresses: PropertyId,
    street: PropertyId,
    city: PropertyId,
    country: PropertyId,
    groups: PropertyId,
    group_name: PropertyId,
    group_description: PropertyId,
    people: PropertyId,
    name: PropertyId,
    email: PropertyId,
    age: PropertyId,
    address: PropertyId,
    organisation: PropertyId,
    friends: PropertyId,
    member_of: PropertyId,
    activities: PropertyId,
    activity_title: PropertyId,
    created: PropertyId,
    collections: PropertyId,
    collection_messages: PropertyId,
    messages: PropertyId,
    from: PropertyId,
    message_title: PropertyId,
    sent: PropertyId,
}

fn find(schema: &Schema, ty: NodeTypeId, name: &str) -> Result<PropertyId, LoadError> {
    schema.find(ty, name).map(|p| p.id).ok_or_else(|| LoadError::Schema(format!("no property '{name}'")))
}

fn inner(schema: &Schema, p: PropertyId) -> Result<NodeTypeId, LoadError> {
    match &schema.property(p).kind {
        PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => Ok(*node),
        _ => Err(LoadError::Schema(format!("'{}' holds no entries", schema.property(p).name))),
    }
}

impl Props {
    fn resolve(s: &Schema) -> Result<Props, LoadError> {
        let organisations = find(s, ROOT, "Organisations")?;
        let org = inner(s, organisations)?;
        let addresses = find(s, ROOT, "Addresses")?;
        let addr = inner(s, addresses)?;
        let groups = find(s, ROOT, "Groups")?;
        let group = inner(s, groups)?;
        let people = find(s, ROOT, "People")?;
        let person = inner(s, people)?;
        let activities = find(s, person, "Activities")?;
        let activity = inner(s, activities)?;
        let collections = find(s, person, "Message Collections")?;
        let collection = inner(s, collections)?;
        let messages = find(s, ROOT, "Messages")?;
        let message = inner(s, messages)?;
        Ok(Props {
            organisations,
            org_name: find(s, org, "Name")?,
            org_field: find(s, org, "Field")?,
            addresses,
            street: find(s, addr, "Street")?,
            city: find(s, addr, "City")?,
            country: find(s, addr, "Country")?,
            groups,
            group_name: find(s, group, "Name")?,
            group_description: find(s, group, "Description")?,
            people,
            name: find(s, person, "Name")?,
            email: find(s, person, "Email")?,
            age: find(s, person, "Age")?,
            address: find(s, person, "Address")?,
            organisation: find(s, person, "Organisation")?,
            friends: find(s, person, "Friends")?,
            member_of: find(s, person, "Groups")?,
            activities,
            activity_title: find(s, activity, "Title")?,
            created: find(s, activity, "Created")?,
            collections,
            collection_messages: find(s, collection, "Messages")?,
            messages,
            from: find(s, message, "From")?,
            message_title: find(s, message, "Title")?,
            sent: find(s, message, "Sent")?,
        })
    }
}

/// The node at `i` of `nodes`, or the error naming what is missing.
fn at(nodes: &[NodeRef], i: usize, what: &'static str) -> Result<NodeRef, LoadError> {
    nodes.get(i).copied().ok_or(LoadError::Dangling(what, i))
}

/// Writes `net` into an empty social database (inside `Database::write`).
pub fn write(g: &mut WriteGraph<'_, '_>, net: &Network) -> Result<(), LoadError> {
    let p = Props::resolve(g.schema)?;
    let root = NodeRef::ROOT;
    let mut writes = 0usize;
    let mut tick = |g: &mut WriteGraph<'_, '_>| {
        writes += 1;
        if writes.is_multiple_of(CHANGES_KEPT) {
            g.take_changes(0);
        }
    };
    let mut orgs = Vec::with_capacity(net.organisations.len());
    for (i, o) in net.organisations.iter().enumerate() {
        let n = g.add_entry(root, p.organisations, EntryKey::Text(&organisation_key(i)))?;
        g.set_text(n, p.org_name, &o.name)?;
        g.set_text(n, p.org_field, &o.about)?;
        orgs.push(n);
    }
    let mut addrs = Vec::with_capacity(net.addresses.len());
    for (i, a) in net.addresses.iter().enumerate() {
        let n = g.add_entry(root, p.addresses, EntryKey::Text(&address_key(i)))?;
        g.set_text(n, p.street, &a.street)?;
        g.set_text(n, p.city, &a.city)?;
        g.set_text(n, p.country, &a.country)?;
        addrs.push(n);
        tick(g);
    }
    let mut groups = Vec::with_capacity(net.groups.len());
    for (i, x) in net.groups.iter().enumerate() {
        let n = g.add_entry(root, p.groups, EntryKey::Text(&group_key(i)))?;
        g.set_text(n, p.group_name, &x.name)?;
        g.set_text(n, p.group_description, &x.about)?;
        groups.push(n);
    }
    let mut people = Vec::with_capacity(net.people.len());
    for (i, x) in net.people.iter().enumerate() {
        let n = g.add_entry(root, p.people, EntryKey::Text(&person_key(i)))?;
        g.set_text(n, p.name, &x.name)?;
        g.set_text(n, p.email, &x.email)?;
        g.set_number(n, p.age, x.age)?;
        g.set_reference(n, p.address, at(&addrs, x.address, "address")?.id)?;
        g.set_reference(n, p.organisation, at(&orgs, x.organisation, "organisation")?.id)?;
        people.push(n);
        tick(g);
    }
    let mut messages = Vec::with_capacity(net.messages.len());
    for (i, m) in net.messages.iter().enumerate() {
        let n = g.add_entry(root, p.messages, EntryKey::Text(&message_key(i)))?;
        g.set_reference(n, p.from, at(&people, m.from, "person")?.id)?;
        g.set_text(n, p.message_title, &m.title)?;
        g.set_number(n, p.sent, m.sent)?;
        messages.push(n);
        tick(g);
    }
    for (i, x) in net.people.iter().enumerate() {
        let n = at(&people, i, "person")?;
        for &f in &x.friends {
            g.add_entry(n, p.friends, EntryKey::Target(at(&people, f, "person")?.id))?;
            tick(g);
        }
        for &k in &x.groups {
            g.add_entry(n, p.member_of, EntryKey::Target(at(&groups, k, "group")?.id))?;
            tick(g);
        }
        for a in &x.activities {
            let an = g.add_entry(n, p.activities, EntryKey::Text(&a.key))?;
            g.set_text(an, p.activity_title, &a.title)?;
            g.set_number(an, p.created, a.created)?;
            tick(g);
        }
        for (name, list) in [("inbox", &x.inbox), ("sent", &x.sent)] {
            let c = g.add_entry(n, p.collections, EntryKey::Text(name))?;
            for &m in list {
                g.add_entry(c, p.collection_messages, EntryKey::Target(at(&messages, m, "message")?.id))?;
                tick(g);
            }
        }
    }
    g.take_changes(0);
    Ok(())
}
