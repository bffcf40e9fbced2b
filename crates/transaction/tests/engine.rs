//! The data and transaction layers together: typed mutations, integrity, rollback,
//! group commit from many threads, change sets, reopen.

use espalier_storage::tables::Read;
use std::sync::Arc;

use espalier_data::{Change, DataError, EntryKey, NodeId, NodeRef, WriteGraph};
use espalier_schema::{compile, NodeTypeId, PropertyId, Schema, ROOT};
use espalier_transaction::{Database, DatabaseOptions, Durability, TxError};

const SCHEMA: &str = "
root (
    'Clients' -> dictionary (
        'Name' -> text
        'Premium' -> stategroup ( 'No' -> ( ) 'Yes' -> ( 'Since' -> number ) )
    )
    'Orders' -> dictionary (
        'Client' -> reference ( .^ . 'Clients' )
        'Quantity' -> number
        'Lines' -> dictionary ( 'Amount' -> number )
        'Tags' -> matrix ( .^ . 'Clients' ) ( 'Weight' -> number )
    )
    'Counter' -> number
)";

#[derive(Debug, thiserror::Error)]
enum E {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Tx(#[from] TxError),
}

fn prop(s: &Schema, node: NodeTypeId, name: &str) -> PropertyId {
    s.find(node, name).unwrap_or_else(|| panic!("no {name}")).id
}

struct P {
    clients: PropertyId,
    name: PropertyId,
    premium: PropertyId,
    orders: PropertyId,
    client: PropertyId,

    lines: PropertyId,
    tags: PropertyId,
    counter: PropertyId,
}

fn props(s: &Schema) -> P {
    let clients = prop(s, ROOT, "Clients");
    let orders = prop(s, ROOT, "Orders");
    let client_ty = match s.property(clients).kind {
        espalier_schema::PropertyKind::Dictionary { node } => node,
        _ => panic!(),
    };
    let order_ty = match s.property(orders).kind {
        espalier_schema::PropertyKind::Dictionary { node } => node,
        _ => panic!(),
    };
    P {
        clients,
        name: prop(s, client_ty, "Name"),
        premium: prop(s, client_ty, "Premium"),
        orders,
        client: prop(s, order_ty, "Client"),

        lines: prop(s, order_ty, "Lines"),
        tags: prop(s, order_ty, "Tags"),
        counter: prop(s, ROOT, "Counter"),
    }
}

fn open(dir: &std::path::Path) -> Arc<Database> {
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    Database::create(dir, compile(SCHEMA).unwrap(), opts).unwrap()
}

fn add_client(g: &mut WriteGraph<'_, '_>, p: &P, key: &str, name: &str) -> Result<NodeRef, E> {
    let c = g.add_entry(NodeRef::ROOT, p.clients, EntryKey::Text(key))?;
    g.set_text(c, p.name, name)?;
    Ok(c)
}

fn add_order(g: &mut WriteGraph<'_, '_>, p: &P, key: &str, client: &str) -> Result<NodeRef, E> {
    let o = g.add_entry(NodeRef::ROOT, p.orders, EntryKey::Text(key))?;
    let schema = g.schema;
    let espalier_schema::PropertyKind::Reference { target } = &schema.property(p.client).kind else { panic!() };
    let target = g.graph().resolve(o, target, &[client.to_string()])?;
    g.set_reference(o, p.client, target.id)?;
    g.require_references(o)?;
    Ok(o)
}

/// `write_counting` counts the changes of a request nobody subscribed to without naming
/// them, and names them as `write` does once someone subscribes; a rolled-back member of a
/// batch counts nothing.
/// A database whose rows another build laid out (format 5's 16-byte header, say) is refused
/// with what to do, and nothing in it changes.
#[test]
fn a_database_of_another_layout_is_refused_with_the_way_over() {
    let dir = tempfile::tempdir().unwrap();
    let schema = compile(SCHEMA).unwrap();
    let mut shape = espalier_data::shape(&schema);
    for w in shape.tables.iter_mut().filter(|w| **w > 0) {
        *w += 12;
    }
    let options = espalier_storage::tables::TablesOptions::default();
    drop(espalier_storage::tables::Tables::create(dir.path(), shape, SCHEMA.as_bytes(), options).unwrap());
    let manifest = std::fs::read(dir.path().join(espalier_storage::tables::MANIFEST)).unwrap();
    let Err(e) = Database::open(dir.path(), DatabaseOptions::default()) else {
        panic!("opened a database of another layout")
    };
    let e = e.to_string();
    assert!(e.contains("differ from the schema's") && e.contains("another on-disk format"), "{e}");
    assert!(e.contains("Export it with the build that made it"), "{e}");
    assert_eq!(std::fs::read(dir.path().join(espalier_storage::tables::MANIFEST)).unwrap(), manifest);
}

/// A database whose rows have this build's shape but whose stored format is another (a
/// change of encoding only, as format 9's index numbers) is refused the same way.
#[test]
fn a_database_of_another_format_is_refused_with_the_way_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.write(|g: &mut WriteGraph<'_, '_>| -> Result<(), E> {
        g.txn().set_meta(espalier_data::meta::FORMAT, &8u64.to_le_bytes()).map_err(DataError::from)?;
        Ok(())
    })
    .unwrap();
    drop(db);
    let Err(e) = Database::open(dir.path(), DatabaseOptions::default()) else { panic!("opened format 8") };
    let e = e.to_string();
    let want = format!("has on-disk format 8; this build reads format {}", espalier_data::meta::FORMAT_VERSION);
    assert!(e.contains(&want) && e.contains("Export it with the build that made it"), "{e}");
}

#[test]
fn counted_writes_name_their_changes_only_for_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let p = &props(db.schema());
    let fill = |key: &'static str| {
        move |g: &mut WriteGraph<'_, '_>| -> Result<(), E> {
            add_client(g, p, key, "Acme")?;
            add_order(g, p, &format!("o-{key}"), key)?;
            g.set_number(NodeRef::ROOT, p.counter, 7)?;
            Ok(())
        }
    };
    let spelt = db.write(fill("c1")).unwrap();
    assert_eq!(spelt.changes.count, spelt.changes.changes.len());
    let counted = db.write_counting(fill("c2")).unwrap();
    assert!(counted.changes.changes.is_empty());
    assert_eq!(counted.changes.count, spelt.changes.count);
    let mut sub = db.subscribe(16);
    let named = db.write_counting(fill("c3")).unwrap();
    assert_eq!(named.changes.changes.len(), spelt.changes.count);
    assert_eq!(named.changes.count, spelt.changes.count);
    match sub.try_next() {
        Some(espalier_transaction::FeedItem::Changes(c)) => assert_eq!(c.changes, named.changes.changes),
        other => panic!("{other:?}"),
    }
    // A failed request's changes are not counted in the next one's.
    let failed = db.write_counting(|g| -> Result<(), E> {
        add_client(g, p, "c4", "Acme")?;
        add_client(g, p, "c4", "Acme")?;
        Ok(())
    });
    assert!(failed.is_err());
    let one = db.write_counting(|g| -> Result<(), E> { Ok(g.set_number(NodeRef::ROOT, p.counter, 8).map(|_| ())?) });
    assert_eq!(one.unwrap().changes.count, 1);
}

#[test]
fn mutations_read_back_and_produce_change_sets() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let p = props(db.schema());
    let committed = db
        .write(|g| -> Result<(), E> {
            add_client(g, &p, "c1", "Acme")?;
            add_client(g, &p, "c2", "Acme")?; // same text: one interned copy, count 2
            add_order(g, &p, "o1", "c1")?;
            g.set_number(NodeRef::ROOT, p.counter, 7)?;
            Ok(())
        })
        .unwrap();
    assert_eq!(committed.version, 2, "create was version 1");
    let kinds: Vec<&str> = committed
        .changes
        .changes
        .iter()
        .map(|c| match c {
            Change::EntryAdded { .. } => "added",
            Change::Text { .. } => "text",
            Change::Reference { .. } => "reference",
            Change::Number { .. } => "number",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["added", "text", "added", "text", "added", "reference", "number"]);
    match &committed.changes.changes[5] {
        Change::Reference { node, property, old, new } => {
            assert_eq!(node.to_string(), ". 'Orders' : \"o1\"");
            assert_eq!(property, "Client");
            assert_eq!(old, &None);
            assert_eq!(new, &vec!["c1".to_string()]);
        }
        other => panic!("{other:?}"),
    }

    let snap = db.snapshot().unwrap();
    let g = snap.graph();
    let c1 = g.find_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1")).unwrap().unwrap();
    assert_eq!(g.text(c1, p.name).unwrap(), "Acme");
    assert_eq!(g.string_count(g.text_id(c1, p.name).unwrap()).unwrap(), 2);
    assert_eq!(g.count(NodeRef::ROOT, p.clients).unwrap(), 2);
    let o1 = g.find_entry(NodeRef::ROOT, p.orders, EntryKey::Text("o1")).unwrap().unwrap();
    assert_eq!(g.reference(o1, p.client).unwrap(), c1.id);
    let back: Vec<_> = g.links_to(c1.id).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(back, vec![(o1.id, p.client)], "reference navigable backwards");
    assert_eq!(g.number(NodeRef::ROOT, p.counter).unwrap(), 7);
    assert_eq!(snap.version().unwrap(), 2);
}

#[test]
fn integrity_rules_and_failures_roll_back_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let p = props(db.schema());
    db.write(|g| -> Result<(), E> {
        add_client(g, &p, "c1", "A")?;
        add_order(g, &p, "o1", "c1")?;
        Ok(())
    })
    .unwrap();

    // Removing a referred-to client fails and names the referrer.
    let err = db
        .write(|g| -> Result<(), E> { Ok(g.remove_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1"))?) })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot remove . 'Clients' : \"c1\": . 'Orders' : \"o1\" refers to it through 'Client'"
    );

    // A failure after successful steps undoes the steps too.
    let err = db
        .write(|g| -> Result<(), E> {
            g.set_number(NodeRef::ROOT, p.counter, 99)?;
            add_client(g, &p, "c2", "B")?;
            add_client(g, &p, "c1", "dup")?;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), ". 'Clients' already has an entry \"c1\"");
    let snap = db.snapshot().unwrap();
    let g = snap.graph();
    assert_eq!(g.number(NodeRef::ROOT, p.counter).unwrap(), 0);
    assert!(g.find_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c2")).unwrap().is_none());
    drop(snap);

    // Switching to the current state, missing keys, unset references.
    let err = db
        .write(|g| -> Result<(), E> {
            let c1 = g.graph().find_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1"))?.unwrap();
            g.switch_state(c1, p.premium, 0)?;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), ". 'Clients' : \"c1\" ? 'Premium' is already in state 'No'");
    let err = db
        .write(|g| -> Result<(), E> { Ok(g.remove_entry(NodeRef::ROOT, p.clients, EntryKey::Text("zz"))?) })
        .unwrap_err();
    assert_eq!(err.to_string(), ". 'Clients' has no entry \"zz\"");
    let err = db
        .write(|g| -> Result<(), E> {
            let o = g.add_entry(NodeRef::ROOT, p.orders, EntryKey::Text("o2"))?;
            g.require_references(o)?;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "reference 'Client' of . 'Orders' : \"o2\" must be set when the node is created");

    // Removing the order (with nested lines and a matrix link) frees the client.
    db.write(|g| -> Result<(), E> {
        let o1 = g.graph().find_entry(NodeRef::ROOT, p.orders, EntryKey::Text("o1"))?.unwrap();
        let l = g.add_entry(o1, p.lines, EntryKey::Text("l1"))?;
        let _ = l;
        let c1 = g.graph().find_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1"))?.unwrap();
        g.add_entry(o1, p.tags, EntryKey::Target(c1.id))?;
        Ok(())
    })
    .unwrap();
    let err = db
        .write(|g| -> Result<(), E> { Ok(g.remove_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1"))?) })
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot remove . 'Clients' : \"c1\""), "{err}");
    db.write(|g| -> Result<(), E> {
        g.remove_entry(NodeRef::ROOT, p.orders, EntryKey::Text("o1"))?;
        g.remove_entry(NodeRef::ROOT, p.clients, EntryKey::Text("c1"))?;
        Ok(())
    })
    .unwrap();
    let snap = db.snapshot().unwrap();
    let r = snap.reader();
    assert_eq!(rows(&snap, db.schema()), 1, "only the root is left");
    let shape = espalier_data::shape(db.schema());
    for i in 0..shape.indexes {
        assert_eq!(r.index(i).unwrap().len(), 0, "key index {i} after removing everything");
    }
    assert_eq!(r.strings().iter().count(), 0, "strings after removing everything");
}

/// Live rows in every table of the snapshot.
fn rows(snap: &espalier_transaction::Snapshot<'_>, schema: &espalier_schema::Schema) -> u32 {
    (0..schema.types.len() as u32).filter_map(|t| snap.reader().table(t)).map(|t| t.len()).sum()
}

#[test]
fn state_switch_initialises_and_frees_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let p = props(db.schema());
    db.write(|g| -> Result<(), E> {
        let c = add_client(g, &p, "c1", "A")?;
        let yes = g.switch_state(c, p.premium, 1)?;
        assert_ne!(yes.id, NodeId::NONE, "'Yes' has a property, so a record");
        let since = g.schema.find(yes.ty, "Since").unwrap().id;
        g.set_number(yes, since, 2020)?;
        g.switch_state(c, p.premium, 0)?;
        Ok(())
    })
    .unwrap();
    let snap = db.snapshot().unwrap();
    assert_eq!(rows(&snap, db.schema()), 2);
}

#[test]
fn concurrent_writers_share_commits_and_keep_their_own_results() {
    let dir = tempfile::tempdir().unwrap();
    let opts = DatabaseOptions { durability: Durability::Sync, ..Default::default() };
    let db = Database::create(dir.path(), compile(SCHEMA).unwrap(), opts).unwrap();
    let p = Arc::new(props(db.schema()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            let p = p.clone();
            std::thread::spawn(move || {
                let mut ok = 0;
                let mut failed = 0;
                for i in 0..50 {
                    // Every 5th request adds a duplicate key and must fail alone.
                    let key = if i % 5 == 4 { format!("t{t}-{}", i - 1) } else { format!("t{t}-{i}") };
                    match db.write(|g| -> Result<(), E> {
                        add_client(g, &p, &key, "x")?;
                        Ok(())
                    }) {
                        Ok(_) => ok += 1,
                        Err(e) => {
                            assert!(e.to_string().contains("already has an entry"), "{e}");
                            failed += 1
                        }
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut ok, mut failed) = (0, 0);
    for t in threads {
        let (o, f) = t.join().unwrap();
        ok += o;
        failed += f;
    }
    assert_eq!((ok, failed), (320, 80));
    assert_eq!(db.version(), 1 + 320);
    let snap = db.snapshot().unwrap();
    assert_eq!(snap.graph().count(NodeRef::ROOT, p.clients).unwrap(), 320);
    assert_eq!(snap.graph().entries(NodeRef::ROOT, p.clients).unwrap().count(), 320);
}

#[test]
fn reopen_keeps_data_and_version_and_feed_delivers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        let p = props(db.schema());
        let mut sub = db.subscribe(16);
        for i in 0..3 {
            db.write(|g| -> Result<(), E> { Ok(g.set_number(NodeRef::ROOT, p.counter, i).map(|_| ())?) }).unwrap();
        }
        let versions: Vec<u64> = std::iter::from_fn(|| sub.try_next())
            .map(|item| match item {
                espalier_transaction::FeedItem::Changes(c) => c.version,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(versions, [2, 3, 4]);
        // A subscriber that does not keep up is told to reload rather than losing silently.
        let mut slow = db.subscribe(1);
        for i in 0..3 {
            db.write(|g| -> Result<(), E> { Ok(g.set_number(NodeRef::ROOT, p.counter, i).map(|_| ())?) }).unwrap();
        }
        assert!(matches!(slow.try_next(), Some(espalier_transaction::FeedItem::Changes(c)) if c.version == 5));
        assert_eq!(slow.try_next(), Some(espalier_transaction::FeedItem::Lagged { last_delivered: 5 }));
    }
    let db = Database::open(dir.path(), DatabaseOptions::default()).unwrap();
    assert_eq!(db.version(), 7);
    let p = props(db.schema());
    assert_eq!(db.snapshot().unwrap().graph().number(NodeRef::ROOT, p.counter).unwrap(), 2);
}

#[test]
fn database_grows_past_log_segments_and_checkpoints_without_losing_requests() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB segments; the data below needs many of them.
    let opts = DatabaseOptions {
        durability: Durability::None,
        log_segment_size: 1 << 20,
        checkpoint_log_bytes: 4 << 20,
        ..Default::default()
    };
    let db = Database::create(dir.path(), compile(SCHEMA).unwrap(), opts.clone()).unwrap();
    let p = props(db.schema());
    let long = "x".repeat(200);
    for batch in 0..40 {
        db.write(|g| -> Result<(), E> {
            for i in 0..250 {
                add_client(g, &p, &format!("c{batch}-{i}"), &format!("{long}{batch}-{i}"))?;
            }
            Ok(())
        })
        .unwrap();
    }
    // Checkpoints in the background kept the log short; one more now covers everything.
    db.checkpoint().unwrap();
    // The log it covers is gone (the segment being written stays). Checkpoint files: the last
    // and the older ones it still names (the texts are written once, not into every file).
    let files = Database::files(dir.path());
    let logs = files.iter().filter(|f| f.extension().is_some_and(|x| x == "log")).count();
    assert!(logs <= 1, "the checkpoint deleted the log it covers: {files:?}");
    assert!(std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "ckpt")));
    drop(db);
    let db = Database::open(dir.path(), opts).unwrap();
    assert_eq!(db.snapshot().unwrap().graph().count(NodeRef::ROOT, p.clients).unwrap(), 10_000);
}

/// The in-memory bound alone (the log's bound out of reach) starts checkpoints: after a load
/// several times the bound, the data is in checkpoint files, mapped, and reads the same after
/// a reopen.
#[test]
fn the_in_memory_bound_starts_checkpoints_that_map_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let opts = DatabaseOptions {
        durability: Durability::None,
        checkpoint_log_bytes: u64::MAX,
        memory_bytes: 1 << 20,
        ..Default::default()
    };
    let db = Database::create(dir.path(), compile(SCHEMA).unwrap(), opts.clone()).unwrap();
    let p = props(db.schema());
    let long = "y".repeat(100);
    for batch in 0..40 {
        db.write(|g| -> Result<(), E> {
            for i in 0..500 {
                add_client(g, &p, &format!("c{batch}-{i}"), &format!("{long}{batch}-{i}"))?;
            }
            Ok(())
        })
        .unwrap();
    }
    let ckpts = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "ckpt"))
            .count()
    };
    assert!(ckpts() >= 1, "the bound started a checkpoint");
    drop(db);
    let db = Database::open(dir.path(), opts).unwrap();
    assert!(db.recovered().checkpoint > 0, "recovery starts from a checkpoint");
    assert_eq!(db.snapshot().unwrap().graph().count(NodeRef::ROOT, p.clients).unwrap(), 20_000);
}

/// Detached writes (the server's path) and waiting writes share one queue: every request is
/// answered exactly once with its own result, failures roll back alone, versions are the
/// commit order, and the feed sees each commit once. Both ways of leading a batch: on the
/// submitting thread (no fsync) and on the writer thread (fsync per commit).
#[test]
fn detached_and_waiting_writers_share_batches_and_each_get_one_answer() {
    for (durability, lead_here) in [(Durability::None, true), (Durability::Sync, false)] {
        let dir = tempfile::tempdir().unwrap();
        let opts = DatabaseOptions { durability, max_batch: 16, ..Default::default() };
        let db = Database::create(dir.path(), compile(SCHEMA).unwrap(), opts).unwrap();
        let mut feed = db.subscribe(4096);
        let p = Arc::new(props(db.schema()));
        let (tx, rx) = std::sync::mpsc::channel::<(String, Result<u64, String>)>();
        let submitters: Vec<_> = (0..4)
            .map(|t| {
                let (db, p, tx) = (db.clone(), p.clone(), tx.clone());
                std::thread::spawn(move || {
                    for i in 0..60 {
                        // Every 6th request repeats the previous key and must fail alone.
                        let key = if i % 6 == 5 { format!("d{t}-{}", i - 1) } else { format!("d{t}-{i}") };
                        let tx = tx.clone();
                        let k = key.clone();
                        let p = p.clone();
                        db.write_detached(
                            move |g: &mut WriteGraph<'_, '_>| -> Result<(), E> {
                                add_client(g, &p, &k, "detached")?;
                                Ok(())
                            },
                            lead_here,
                            move |r| {
                                tx.send((key, r.map(|c| c.version).map_err(|e| e.to_string()))).unwrap();
                            },
                        );
                    }
                })
            })
            .collect();
        let waiters: Vec<_> = (0..2)
            .map(|t| {
                let (db, p) = (db.clone(), p.clone());
                std::thread::spawn(move || {
                    (0..40)
                        .map(|i| db.write(|g| add_client(g, &p, &format!("w{t}-{i}"), "waiting")).unwrap().version)
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        drop(tx);
        for s in submitters {
            s.join().unwrap();
        }
        let mut versions: Vec<u64> = waiters.into_iter().flat_map(|w| w.join().unwrap()).collect();
        let answers: Vec<_> = rx.iter().collect(); // ends when every detached request answered
        assert_eq!(answers.len(), 240, "one answer per detached request ({durability:?})");
        let mut failed = 0;
        for (key, r) in &answers {
            match r {
                Ok(v) => versions.push(*v),
                Err(e) => {
                    assert!(e.contains("already has an entry"), "{key}: {e}");
                    failed += 1;
                }
            }
        }
        assert_eq!(failed, 40);
        versions.sort_unstable();
        let expected: Vec<u64> = (2..2 + 200 + 80).collect();
        assert_eq!(versions, expected, "every commit has its own version, none skipped");
        assert_eq!(db.version(), 1 + 280);
        let snap = db.snapshot().unwrap();
        assert_eq!(snap.graph().count(NodeRef::ROOT, p.clients).unwrap(), 280);
        let mut seen = Vec::new();
        while let Some(espalier_transaction::FeedItem::Changes(set)) = feed.try_next() {
            seen.push(set.version);
        }
        assert_eq!(seen, expected, "the feed sees each commit once, in order");
    }
}

/// Dropping the last handle to a database ends its writer thread; the data stays readable.
#[test]
fn a_database_with_a_writer_thread_closes_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        let p = Arc::new(props(db.schema()));
        let (tx, rx) = std::sync::mpsc::channel();
        let p2 = p.clone();
        db.write_detached(
            move |g: &mut WriteGraph<'_, '_>| -> Result<(), E> {
                add_client(g, &p2, "c1", "one")?;
                Ok(())
            },
            false,
            move |r| tx.send(r.is_ok()).unwrap(),
        );
        assert!(rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap());
    }
    let db = Database::open(dir.path(), DatabaseOptions::default()).expect("the environment was closed");
    let p = props(db.schema());
    assert_eq!(db.snapshot().unwrap().graph().count(NodeRef::ROOT, p.clients).unwrap(), 1);
}

/// A database is open once: a second open (here in the same process, in another process
/// likewise) is refused with the typed lock error while the first is open, and succeeds once
/// it has closed.
#[test]
fn a_second_open_is_refused_while_the_first_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let p = props(db.schema());
    db.write(|g| -> Result<(), E> { Ok(g.set_number(NodeRef::ROOT, p.counter, 7).map(|_| ())?) }).unwrap();
    let version = db.version();
    match Database::open(dir.path(), DatabaseOptions::default()) {
        Err(TxError::Locked(e)) => {
            assert!(matches!(*e, espalier_storage::LockError::HeldHere { .. }), "{e}");
            assert!(e.to_string().contains("already open in this process"), "{e}");
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened twice"),
    }
    assert!(Database::create(dir.path(), compile(SCHEMA).unwrap(), DatabaseOptions::default()).is_err());
    // The first open is untouched and goes on writing.
    db.write(|g| -> Result<(), E> { Ok(g.set_number(NodeRef::ROOT, p.counter, 8).map(|_| ())?) }).unwrap();
    assert_eq!(db.version(), version + 1);
    drop(db);
    let db = Database::open(dir.path(), DatabaseOptions::default()).unwrap();
    assert_eq!(db.version(), version + 1);
}
