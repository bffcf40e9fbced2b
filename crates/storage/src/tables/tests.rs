//! The database on tables against a model: random writes, savepoints, rollbacks, commits and
//! reopenings; every snapshot keeps what it saw, and recovery gives back every commit.

use std::collections::BTreeMap;

use std::path::Path;

use proptest::prelude::*;

use super::*;

const WIDTHS: [u32; 3] = [16, 40, 0];

fn shape() -> Shape {
    Shape { tables: WIDTHS.to_vec(), indexes: 2 }
}

fn options() -> TablesOptions {
    TablesOptions { durability: Durability::None, segment_size: 1 << 20, ..TablesOptions::default() }
}

/// What a version holds, read back whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Model {
    rows: BTreeMap<(u32, u32), Vec<u8>>,
    keys: BTreeMap<(u32, u32, Vec<u8>), u32>,
    strings: BTreeMap<u64, (u64, Vec<u8>)>,
    meta: BTreeMap<Vec<u8>, Vec<u8>>,
    version: u64,
}

fn read_all(r: &dyn Read, strings: &StringsVersion) -> Model {
    let mut m = Model { version: r.version(), ..Model::default() };
    for (t, w) in WIDTHS.iter().enumerate() {
        if *w == 0 {
            continue;
        }
        for (row, bytes) in r.table(t as u32).unwrap().rows() {
            m.rows.insert((t as u32, row), bytes.to_vec());
        }
    }
    for i in 0..2 {
        for e in r.index(i).unwrap().iter() {
            m.keys.insert((i, e.owner, e.key.to_vec()), e.row);
        }
    }
    for (id, count, bytes) in strings.iter() {
        m.strings.insert(id, (count, bytes.to_vec()));
    }
    for name in [&b"a"[..], b"b"] {
        if let Some(v) = r.meta(name) {
            m.meta.insert(name.to_vec(), v.to_vec());
        }
    }
    m
}

#[derive(Debug, Clone)]
enum Step {
    Insert(u8, u8),
    Put(u8, u8, u8),
    Free(u8, u8),
    KeyPut(u8, u8, u8),
    KeyRemove(u8, u8),
    Acquire(u8),
    Release(u8),
    Meta(bool, u8),
    Savepoint,
    Rollback,
    Commit,
    Abort,
    Snapshot,
    Reopen,
    Checkpoint,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..2, any::<u8>()).prop_map(|(t, b)| Step::Insert(t, b)),
        3 => (0u8..2, any::<u8>(), any::<u8>()).prop_map(|(t, r, b)| Step::Put(t, r, b)),
        2 => (0u8..2, any::<u8>()).prop_map(|(t, r)| Step::Free(t, r)),
        3 => (0u8..2, 0u8..4, any::<u8>()).prop_map(|(i, o, k)| Step::KeyPut(i, o, k)),
        2 => (0u8..2, any::<u8>()).prop_map(|(i, k)| Step::KeyRemove(i, k)),
        3 => (0u8..6).prop_map(Step::Acquire),
        2 => any::<u8>().prop_map(Step::Release),
        1 => (any::<bool>(), any::<u8>()).prop_map(|(n, v)| Step::Meta(n, v)),
        1 => Just(Step::Savepoint),
        1 => Just(Step::Rollback),
        3 => Just(Step::Commit),
        1 => Just(Step::Abort),
        1 => Just(Step::Snapshot),
        1 => Just(Step::Reopen),
        1 => Just(Step::Checkpoint),
    ]
}

fn row_bytes(table: u32, b: u8) -> Vec<u8> {
    vec![b; WIDTHS[table as usize] as usize]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn tables_match_the_model_and_snapshots_never_change(steps in proptest::collection::vec(step(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Tables::create(dir.path(), shape(), b"catalog", options()).unwrap();
        let mut committed = Model::default();
        let mut version = 0;
        let mut savepoints: Vec<(Savepoint, Model)> = Vec::new();
        let mut kept: Vec<(Arc<Snapshot>, Model)> = Vec::new();
        let mut live: Vec<(u32, u32)> = Vec::new();
        for s in steps {
            let mut w = db.writer();
            live.retain(|&(t, r)| w.row(t, r).is_some());
            let rows_of = |t: u32, live: &[(u32, u32)]| live.iter().filter(|(tt, _)| *tt == t).map(|(_, r)| *r).collect::<Vec<_>>();
            match s {
                Step::Insert(t, b) => {
                    let t = u32::from(t);
                    let row = w.insert(t, &row_bytes(t, b)).unwrap();
                    live.push((t, row));
                }
                Step::Put(t, r, b) => {
                    let t = u32::from(t);
                    let rows = rows_of(t, &live);
                    if let Some(&row) = rows.get(r as usize % rows.len().max(1)) {
                        if w.row(t, row).is_some() { w.put(t, row, &row_bytes(t, b)).unwrap(); }
                    }
                }
                Step::Free(t, r) => {
                    let t = u32::from(t);
                    let rows = rows_of(t, &live);
                    if let Some(&row) = rows.get(r as usize % rows.len().max(1)) {
                        w.free(t, row).unwrap();
                    }
                }
                Step::KeyPut(i, o, k) => { w.index_put(u32::from(i), u32::from(o), &[k], u32::from(k) + 1).unwrap(); }
                Step::KeyRemove(i, k) => { w.index_remove(u32::from(i), u32::from(k % 4), &[k]).unwrap(); }
                Step::Acquire(n) => { w.acquire(format!("text {n}").as_bytes()).unwrap(); }
                Step::Release(n) => {
                    let ids: Vec<u64> = w.strings.current().iter().map(|(id, _, _)| id).collect();
                    if let Some(&id) = ids.get(n as usize % ids.len().max(1)) { w.release(id).unwrap(); }
                }
                Step::Meta(name, v) => { w.set_meta(if name { b"a" } else { b"b" }, &[v]).unwrap(); }
                Step::Savepoint => {
                    let m = read_all(&*w, &w.strings.current());
                    savepoints.push((w.savepoint(), m));
                }
                Step::Rollback => {
                    if let Some((sp, m)) = savepoints.pop() {
                        w.rollback_to(&sp);
                        let mut now = read_all(&*w, &w.strings.current());
                        now.version = m.version;
                        prop_assert_eq!(now, m);
                    }
                }
                Step::Commit => {
                    version += 1;
                    let snap = w.commit(version).unwrap();
                    committed = read_all(&*snap, snap.strings());
                    prop_assert_eq!(committed.version, version);
                    savepoints.clear();
                }
                Step::Abort => {
                    w.abort();
                    let now = read_all(&*w, &w.strings.current());
                    prop_assert_eq!(&now, &committed);
                    savepoints.clear();
                }
                Step::Snapshot => {
                    drop(w);
                    let snap = db.snapshot();
                    let m = read_all(&*snap, snap.strings());
                    prop_assert_eq!(&m, &committed);
                    kept.push((snap, m));
                }
                Step::Checkpoint => {
                    drop(w);
                    db.checkpoint().unwrap();
                    // What the checkpoint holds is what was committed.
                    let snap = db.snapshot();
                    prop_assert_eq!(read_all(&*snap, snap.strings()), committed.clone());
                }
                Step::Reopen => {
                    drop(w);
                    drop(db);
                    kept.clear();
                    savepoints.clear();
                    db = Tables::open(dir.path(), shape(), options()).unwrap();
                    let snap = db.snapshot();
                    prop_assert_eq!(read_all(&*snap, snap.strings()), committed.clone());
                }
            }
        }
        for (snap, m) in &kept {
            prop_assert_eq!(&read_all(&**snap, snap.strings()), m);
        }
        db.writer().abort();
        drop(db);
        let db = Tables::open(dir.path(), shape(), options()).unwrap();
        let snap = db.snapshot();
        prop_assert_eq!(read_all(&*snap, snap.strings()), committed);
    }
}

#[test]
fn the_shape_and_the_catalog_are_kept_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    drop(Tables::create(dir.path(), shape(), b"the schema", options()).unwrap());
    let (stored, catalog) = Tables::read_manifest(dir.path()).unwrap();
    assert_eq!(stored, shape());
    assert_eq!(catalog, b"the schema");
    let other = Shape { tables: vec![16], indexes: 0 };
    assert!(matches!(Tables::open(dir.path(), other, options()), Err(TablesError::ShapeMismatch { .. })));
    assert!(matches!(Tables::create(dir.path(), shape(), b"x", options()), Err(TablesError::Exists(_))));
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(Tables::open(empty.path(), shape(), options()), Err(TablesError::NotADatabase(_))));
}

#[test]
fn a_second_open_is_refused_by_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    assert!(matches!(Tables::open(dir.path(), shape(), options()), Err(TablesError::Locked(_))));
    drop(db);
    Tables::open(dir.path(), shape(), options()).unwrap();
}

#[test]
fn a_damaged_manifest_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    drop(Tables::create(dir.path(), shape(), b"catalog", options()).unwrap());
    let path = dir.path().join(MANIFEST);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let e = Tables::open(dir.path(), shape(), options()).unwrap_err();
    assert!(matches!(e, TablesError::Manifest { .. }), "{e}");
}

#[test]
fn a_commit_larger_than_a_log_record_is_replayed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let big = vec![7u8; 9 << 20];
    {
        let db =
            Tables::create(dir.path(), shape(), b"", TablesOptions { segment_size: 64 << 20, ..options() }).unwrap();
        let mut w = db.writer();
        let a = w.acquire(&big).unwrap();
        let mut other = big.clone();
        other[0] = 8;
        w.acquire(&other).unwrap();
        w.commit(1).unwrap();
        assert_eq!(w.string(a).map(<[u8]>::len), Some(big.len()));
    }
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(snap.version(), 1);
    assert_eq!(snap.strings().iter().count(), 2);
}

#[test]
fn a_torn_last_write_is_cut_and_the_commits_before_it_stay() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
        let mut w = db.writer();
        w.insert(0, &[1; 16]).unwrap();
        w.commit(1).unwrap();
        w.insert(0, &[2; 16]).unwrap();
        w.commit(2).unwrap();
    }
    // Tear the last record: flip a byte of its payload.
    let seg = std::fs::read_dir(dir.path().join("log")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&seg).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap();
    bytes[end] ^= 0xFF;
    std::fs::write(&seg, &bytes).unwrap();
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    assert!(db.recovered().torn.is_some());
    let snap = db.snapshot();
    assert_eq!(snap.version(), 1);
    assert_eq!(snap.table(0).unwrap().len(), 1);
    // The writer continues after the cut.
    let mut w = db.writer();
    w.insert(0, &[3; 16]).unwrap();
    w.commit(2).unwrap();
    drop(w);
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    assert_eq!(db.snapshot().table(0).unwrap().len(), 2);
}

#[test]
fn a_failed_fsync_fails_the_commit_and_stops_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        Tables::create(dir.path(), shape(), b"", TablesOptions { durability: Durability::Sync, ..options() }).unwrap();
    let mut w = db.writer();
    w.insert(0, &[1; 16]).unwrap();
    w.commit(1).unwrap();
    w.log_faults().fail_next_sync();
    w.insert(0, &[2; 16]).unwrap();
    let e = w.commit(2).unwrap_err();
    assert!(matches!(e, TablesError::Log(_)), "{e}");
    assert!(matches!(w.insert(0, &[3; 16]), Err(TablesError::Poisoned { .. })));
    assert_eq!(db.snapshot().version(), 1);
    assert_eq!(w.table(0).unwrap().len(), 1, "the failed commit's writes are undone");
}

#[test]
fn a_full_disk_fails_the_commit_whole_and_later_commits_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let sync = TablesOptions { durability: Durability::Sync, ..options() };
    let db = Tables::create(dir.path(), shape(), b"", sync.clone()).unwrap();
    let mut w = db.writer();
    w.insert(0, &[1; 16]).unwrap();
    w.commit(1).unwrap();
    drop(w);
    drop(db);
    // A reopened log starts a new segment at its first commit: the preparation meets ENOSPC.
    let db = Tables::open(dir.path(), shape(), sync.clone()).unwrap();
    let mut w = db.writer();
    w.log_faults().fail_next_prepare();
    w.insert(0, &[2; 16]).unwrap();
    w.acquire(b"not kept").unwrap();
    let e = w.commit(2).unwrap_err();
    assert!(e.is_storage_full(), "{e}");
    assert!(e.to_string().contains("no space left"), "{e}");
    assert_eq!(db.snapshot().version(), 1);
    assert_eq!(w.table(0).unwrap().len(), 1, "the failed commit's writes are undone");
    assert_eq!(w.string_table().iter().count(), 0);
    // Not poisoned: once space is there again, the same commit goes through.
    w.insert(0, &[2; 16]).unwrap();
    w.commit(2).unwrap();
    drop(w);
    drop(db);
    let db = Tables::open(dir.path(), shape(), sync).unwrap();
    assert_eq!(db.snapshot().version(), 2);
    assert_eq!(db.snapshot().table(0).unwrap().len(), 2);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.len() <= 1, "a failed preparation leaves no file behind: {leftovers:?}");
}

#[test]
fn rows_are_reused_only_after_the_snapshots_that_saw_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    let row = {
        let mut w = db.writer();
        let row = w.insert(0, &[1; 16]).unwrap();
        w.commit(1).unwrap();
        row
    };
    let seen = db.snapshot();
    {
        let mut w = db.writer();
        w.free(0, row).unwrap();
        w.commit(2).unwrap();
        let again = w.insert(0, &[2; 16]).unwrap();
        assert_ne!(again, row, "a snapshot still sees row {row}");
        w.commit(3).unwrap();
    }
    assert_eq!(seen.row(0, row), Some(&[1u8; 16][..]));
    drop(seen);
    let mut w = db.writer();
    w.commit(4).unwrap();
    assert_eq!(w.insert(0, &[3; 16]).unwrap(), row, "reused once nobody sees it");
}

#[test]
fn a_flipped_byte_before_valid_records_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
        let mut w = db.writer();
        for v in 1..=3u8 {
            w.insert(0, &[v; 16]).unwrap();
            w.commit(u64::from(v)).unwrap();
        }
    }
    // Damage the first commit's row bytes: later commits verify, so this is not a torn tail.
    let seg = std::fs::read_dir(dir.path().join("log")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.windows(16).position(|w| w == [1u8; 16]).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let e = Tables::open(dir.path(), shape(), options()).unwrap_err();
    assert!(matches!(e, TablesError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("damaged"), "{e}");
    // Nothing was cut: the damage stays for `check` and the operator to see.
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);
}

#[test]
fn a_failed_log_write_fails_the_commit_and_undoes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    let mut w = db.writer();
    w.insert(0, &[1; 16]).unwrap();
    w.commit(1).unwrap();
    w.log_faults().fail_next_write();
    w.insert(0, &[2; 16]).unwrap();
    w.acquire(b"lost").unwrap();
    assert!(w.commit(2).is_err());
    assert_eq!(w.table(0).unwrap().len(), 1);
    assert_eq!(w.string_table().iter().count(), 0);
    drop(w);
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    assert_eq!(db.snapshot().version(), 1);
    assert_eq!(db.snapshot().table(0).unwrap().len(), 1);
}

#[test]
fn a_checkpoint_replaces_the_log_it_covers_and_recovery_starts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TablesOptions { segment_size: 4096, ..options() };
    let db = Tables::create(dir.path(), shape(), b"catalog", opts.clone()).unwrap();
    // Enough commits for several 4 KiB segments (a commit's redo is about 70 bytes).
    const COMMITS: u64 = 400;
    for v in 1..=COMMITS {
        let mut w = db.writer();
        let row = w.insert(1, &[v as u8; 40]).unwrap();
        w.index_put(0, 1, &v.to_be_bytes(), row).unwrap();
        w.acquire(format!("text {}", v % 7).as_bytes()).unwrap();
        w.commit(v).unwrap();
    }
    let segments = |d: &Path| std::fs::read_dir(d.join("log")).unwrap().count();
    let before = segments(dir.path());
    assert!(before > 5, "{before} segments");
    assert!(db.log_bytes_since_checkpoint() > 0);
    let done = db.checkpoint().unwrap().expect("a checkpoint");
    assert!(done.segments_deleted > 0 && segments(dir.path()) < before, "{done:?}");
    assert_eq!(db.log_bytes_since_checkpoint(), 0);
    assert_eq!(db.checkpoint().unwrap(), None, "nothing new to cover");
    // Nothing was committed after it: the segment being written went too, and a database
    // opened on the checkpoint alone has every commit.
    let log_segments = |d: &Path| {
        std::fs::read_dir(d.join("log"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "log")
            .count()
    };
    assert_eq!(log_segments(dir.path()), 0);
    drop(db);
    let db = Tables::open(dir.path(), shape(), opts.clone()).unwrap();
    assert_eq!((db.recovered().commits, db.snapshot().version()), (0, COMMITS));
    // Commits after it come from the log.
    {
        let mut w = db.writer();
        w.insert(1, &[9; 40]).unwrap();
        w.commit(COMMITS + 1).unwrap();
    }
    let expected = {
        let snap = db.snapshot();
        read_all(&*snap, snap.strings())
    };
    drop(db);
    let db = Tables::open(dir.path(), shape(), opts.clone()).unwrap();
    assert_eq!(db.recovered().checkpoint, done.log_version);
    assert_eq!(db.recovered().commits, 1, "only the commit after the checkpoint is replayed");
    let snap = db.snapshot();
    assert_eq!(read_all(&*snap, snap.strings()), expected);
    drop(snap);
    drop(db);
    // A damaged checkpoint is reported, never served.
    let ckpt = dir.path().join(checkpoint::file_name(done.log_version));
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&ckpt, bytes).unwrap();
    let e = Tables::open(dir.path(), shape(), opts).unwrap_err();
    assert!(matches!(e, TablesError::Checkpoint { .. }), "{e}");
}

fn checkpoint_files(d: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("checkpoint-"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_checkpoint_maps_what_it_wrote_and_the_next_writes_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"catalog", options()).unwrap();
    let mut rows = Vec::new();
    {
        let mut w = db.writer();
        for v in 0..2000u32 {
            let row = w.insert(1, &[v as u8; 40]).unwrap();
            w.index_put(0, 1, &v.to_be_bytes(), row).unwrap();
            rows.push(row);
        }
        w.commit(1).unwrap();
    }
    let before = db.snapshot();
    let first = db.checkpoint().unwrap().expect("a checkpoint");
    assert!(first.written > 20, "{first:?}");
    assert_eq!(first.swapped, first.written, "nothing changed since: every page and leaf is swapped");
    {
        let w = db.writer();
        let t = w.table(1).unwrap();
        assert!(t.present_pages().iter().all(|&p| t.page(p).unwrap().is_mapped()));
        assert!(w.index(0).unwrap().leaves().iter().all(|l| l.place.is_some()));
    }
    // A snapshot taken before keeps its heap pages and reads the same.
    let expected = read_all(&*before, before.strings());
    drop(before);
    // One row changed: the next checkpoint writes its page (and no leaf), and names the first
    // file for the rest.
    {
        let mut w = db.writer();
        w.put(1, rows[5], &[0xAB; 40]).unwrap();
        w.commit(2).unwrap();
    }
    let second = db.checkpoint().unwrap().expect("a checkpoint");
    assert_eq!(second.written, 1, "{second:?}");
    assert_eq!(checkpoint_files(dir.path()).len(), 2);
    let now = {
        let snap = db.snapshot();
        read_all(&*snap, snap.strings())
    };
    assert_ne!(now, expected);
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(read_all(&*snap, snap.strings()), now);
    assert!(snap.table(1).unwrap().page(0).unwrap().is_mapped(), "reopened pages are mapped");
    assert_eq!(snap.index(0).unwrap().get(1, &7u32.to_be_bytes()), Some(rows[7]));
    drop(snap);
    // Rewriting every row leaves the first file mostly dead: the checkpoint after rewrites
    // everything and the older files go.
    for round in 0..2u8 {
        {
            let mut w = db.writer();
            for &row in &rows {
                w.put(1, row, &[round; 40]).unwrap();
            }
            w.commit(3 + u64::from(round)).unwrap();
        }
        db.checkpoint().unwrap().expect("a checkpoint");
    }
    assert_eq!(checkpoint_files(dir.path()).len(), 1, "{:?}", checkpoint_files(dir.path()));
    let last = {
        let snap = db.snapshot();
        read_all(&*snap, snap.strings())
    };
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(read_all(&*snap, snap.strings()), last);
}

#[test]
fn a_flipped_byte_in_an_older_checkpoint_file_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    {
        let mut w = db.writer();
        for v in 0..500u32 {
            w.insert(1, &[7; 40]).unwrap();
            w.index_put(1, 2, &v.to_be_bytes(), v + 1).unwrap();
        }
        w.commit(1).unwrap();
    }
    let first = db.checkpoint().unwrap().unwrap();
    {
        let mut w = db.writer();
        w.insert(0, &[1; 16]).unwrap();
        w.commit(2).unwrap();
    }
    db.checkpoint().unwrap().unwrap();
    drop(db);
    let older = dir.path().join(checkpoint::file_name(first.log_version));
    assert!(older.exists(), "the second checkpoint names the first file");
    let mut bytes = std::fs::read(&older).unwrap();
    bytes[200] ^= 0x10; // inside the first page image
    std::fs::write(&older, bytes).unwrap();
    let e = Tables::open(dir.path(), shape(), options()).unwrap_err();
    assert!(matches!(e, TablesError::Checkpoint { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn a_checkpoint_of_the_first_format_is_loaded_and_the_next_is_written_in_the_third() {
    let dir = tempfile::tempdir().unwrap();
    drop(Tables::create(dir.path(), shape(), b"catalog", options()).unwrap());
    // A format-1 file as earlier builds wrote it: redo chunks that rebuild the snapshot.
    let mut ops = redo::RedoBuf::default();
    ops.push(redo::Op::Put { table: 1, row: 3, bytes: &[4; 40] });
    ops.push(redo::Op::KeyPut { index: 0, owner: 1, row: 3, key: b"k" });
    ops.push(redo::Op::StringStored { id: 1, bytes: b"text" });
    ops.push(redo::Op::Version(9));
    let bytes = ops.parts().collect::<Vec<_>>().concat();
    let mut file = b"ESPCKP01".to_vec();
    file.extend_from_slice(&5u64.to_le_bytes());
    file.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
    file.extend_from_slice(&bytes);
    file.extend_from_slice(&[0; 8]);
    std::fs::write(dir.path().join(checkpoint::file_name(5)), file).unwrap();
    write_atomic(dir.path(), MANIFEST, &encode_manifest(&shape(), b"catalog", 5)).unwrap();
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(snap.version(), 9);
    assert_eq!(snap.row(1, 3), Some(&[4u8; 40][..]));
    assert_eq!(snap.index(0).unwrap().get(1, b"k"), Some(3));
    let model = read_all(&*snap, snap.strings());
    drop(snap);
    {
        let mut w = db.writer();
        w.set_meta(b"a", b"x").unwrap();
        w.commit(10).unwrap();
    }
    let expected = {
        let snap = db.snapshot();
        read_all(&*snap, snap.strings())
    };
    assert_ne!(expected, model);
    let done = db.checkpoint().unwrap().unwrap();
    drop(db);
    let bytes = std::fs::read(dir.path().join(checkpoint::file_name(done.log_version))).unwrap();
    assert_eq!(&bytes[..8], b"ESPCKP03");
    assert_eq!(checkpoint_files(dir.path()).len(), 1);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(read_all(&*snap, snap.strings()), expected);
}

/// The strings as (id, count, text), by id.
fn strings_of(s: &StringsVersion) -> Vec<(u64, u64, Vec<u8>)> {
    s.iter().map(|(id, c, b)| (id, c, b.to_vec())).collect()
}

#[test]
fn texts_survive_checkpoints_and_reopening_and_are_read_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    let text = |i: u32| format!("text number {i} {}", "x".repeat((i % 50) as usize)).into_bytes();
    let mut ids = Vec::new();
    {
        let mut w = db.writer();
        for i in 0..3000 {
            ids.push(w.acquire(&text(i)).unwrap());
        }
        w.acquire(&text(1)).unwrap();
        w.commit(1).unwrap();
    }
    let first = db.checkpoint().unwrap().unwrap();
    let snap = db.snapshot();
    assert_eq!(snap.strings().heap_texts_len(), 3000, "the snapshot checkpointed keeps its heap texts");
    let before = strings_of(snap.strings());
    drop(snap);
    {
        let w = db.writer();
        assert_eq!(w.string_table().heap_texts_len(), 0, "the writer reads them from the file");
        assert_eq!(w.string(ids[7]), Some(&text(7)[..]));
    }
    // A snapshot from before the next changes and checkpoints keeps reading its texts.
    let held = db.snapshot();
    {
        let mut w = db.writer();
        for &id in &ids[..1500] {
            w.release(id).unwrap();
        }
        w.release(ids[1]).unwrap();
        w.commit(2).unwrap();
    }
    {
        // Freed ids are reused by new texts, which must win over the places in the file.
        let mut w = db.writer();
        for i in 5000..5600 {
            w.acquire(&text(i)).unwrap();
        }
        w.commit(3).unwrap();
    }
    let second = db.checkpoint().unwrap().unwrap();
    assert!(second.log_version > first.log_version);
    let now = strings_of(db.snapshot().strings());
    assert_eq!(strings_of(held.strings()), before);
    for round in 0..3u32 {
        // Changing most texts makes the older files mostly dead: a checkpoint rewrites all.
        {
            let mut w = db.writer();
            for i in 0..1000 {
                // Frees text 1500 + i if it is still there (the first round).
                let id = w.acquire(&text(1500 + i)).unwrap();
                w.release(id).unwrap();
                if w.string_count(id).is_some() {
                    w.release(id).unwrap();
                }
                w.acquire(&text(10_000 * (round + 1) + i)).unwrap();
            }
            w.commit(4 + u64::from(round)).unwrap();
        }
        db.checkpoint().unwrap().unwrap();
        assert_eq!(strings_of(held.strings()), before, "round {round}");
        assert_eq!(held.string(ids[7]), Some(&text(7)[..]));
        let mut w = db.writer();
        for i in 0..1000 {
            let id = w.acquire(&text(10_000 * (round + 1) + i)).unwrap();
            w.release(id).unwrap();
        }
        w.commit(100 + u64::from(round)).unwrap();
    }
    drop(held);
    let files = checkpoint_files(dir.path());
    assert!(files.len() <= 2, "the dead texts made a checkpoint rewrite everything: {files:?}");
    assert_ne!(strings_of(db.snapshot().strings()), now);
    let expected = strings_of(db.snapshot().strings());
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(strings_of(snap.strings()), expected);
    assert_eq!(snap.strings().heap_texts_len(), 0, "open loads no text");
    drop(snap);
    // The writer finds the texts it did not load: a hold on an old one counts, not stores.
    {
        let mut w = db.writer();
        let id = w.acquire(&text(2999)).unwrap();
        assert_eq!(id, ids[2999], "found by its hash");
        assert_eq!(w.string_count(id), Some(2));
        w.commit(200).unwrap();
    }
    db.checkpoint().unwrap().unwrap();
    let expected = strings_of(db.snapshot().strings());
    drop(db);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    assert_eq!(strings_of(db.snapshot().strings()), expected);
    assert_eq!(db.snapshot().strings().heap_texts_len(), 0);
}

#[test]
fn a_flipped_byte_in_a_text_of_a_checkpoint_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
    {
        let mut w = db.writer();
        for i in 0..100 {
            w.acquire(format!("a text to damage {i}").as_bytes()).unwrap();
        }
        w.commit(1).unwrap();
    }
    let done = db.checkpoint().unwrap().unwrap();
    drop(db);
    let path = dir.path().join(checkpoint::file_name(done.log_version));
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = b"a text to damage 42";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the text is in the file");
    bytes[at + 3] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let e = Tables::open(dir.path(), shape(), options()).unwrap_err();
    assert!(matches!(e, TablesError::Checkpoint { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn a_checkpoint_of_the_second_format_is_loaded_and_the_next_is_written_in_the_third() {
    let dir = tempfile::tempdir().unwrap();
    drop(Tables::create(dir.path(), shape(), b"catalog", options()).unwrap());
    // A format-2 file as earlier builds wrote it, with no pages or leaves: the strings, meta
    // values and version as redo chunks, a catalog of empty tables and indexes, a trailer.
    let mut ops = redo::RedoBuf::default();
    ops.push(redo::Op::StringStored { id: 1, bytes: b"old text" });
    ops.push(redo::Op::StringCount { id: 1, count: 3 });
    ops.push(redo::Op::StringStored { id: 2, bytes: b"another" });
    ops.push(redo::Op::Version(9));
    let bytes = ops.parts().collect::<Vec<_>>().concat();
    let mut file = b"ESPCKP02".to_vec();
    file.extend_from_slice(&5u64.to_le_bytes());
    let redo_offset = file.len() as u64;
    file.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
    file.extend_from_slice(&bytes);
    file.extend_from_slice(&[0; 8]);
    let mut cat = Vec::new();
    cat.extend_from_slice(&(WIDTHS.len() as u32).to_le_bytes());
    for w in WIDTHS {
        for v in [w.max(1), 1, 0, 0] {
            cat.extend_from_slice(&v.to_le_bytes());
        }
    }
    cat.extend_from_slice(&2u32.to_le_bytes());
    for _ in 0..2 {
        cat.extend_from_slice(&0u64.to_le_bytes());
        cat.extend_from_slice(&0u32.to_le_bytes());
    }
    cat.extend_from_slice(&0u32.to_le_bytes());
    let catalog_offset = file.len() as u64;
    file.extend_from_slice(&cat);
    file.extend_from_slice(&redo_offset.to_le_bytes());
    file.extend_from_slice(&catalog_offset.to_le_bytes());
    file.extend_from_slice(&(cat.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32c::crc32c(&cat).to_le_bytes());
    file.extend_from_slice(&[0; 4]);
    file.extend_from_slice(b"ESPCKEND");
    std::fs::write(dir.path().join(checkpoint::file_name(5)), file).unwrap();
    write_atomic(dir.path(), MANIFEST, &encode_manifest(&shape(), b"catalog", 5)).unwrap();
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let expected = vec![(1, 3, b"old text".to_vec()), (2, 1, b"another".to_vec())];
    assert_eq!(strings_of(db.snapshot().strings()), expected);
    assert_eq!(db.snapshot().strings().heap_texts_len(), 2, "format 2's strings are loaded");
    {
        let mut w = db.writer();
        assert_eq!(w.acquire(b"another").unwrap(), 2);
        w.commit(10).unwrap();
    }
    let done = db.checkpoint().unwrap().unwrap();
    drop(db);
    let bytes = std::fs::read(dir.path().join(checkpoint::file_name(done.log_version))).unwrap();
    assert_eq!(&bytes[..8], b"ESPCKP03");
    assert_eq!(checkpoint_files(dir.path()), vec![checkpoint::file_name(done.log_version)]);
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let snap = db.snapshot();
    assert_eq!(strings_of(snap.strings()), vec![(1, 3, b"old text".to_vec()), (2, 2, b"another".to_vec())]);
    assert_eq!(snap.strings().heap_texts_len(), 0);
    assert_eq!(snap.version(), 10);
}

#[test]
fn a_slot_swapped_in_place_is_logged_as_its_row_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let row = {
        let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
        let mut w = db.writer();
        let row = w.insert(0, &[1u8; 16]).unwrap();
        let mut bytes = 0x0102_0304_0506_0708u64.to_le_bytes();
        w.swap_at(0, row, 8, &mut bytes).unwrap();
        assert_eq!(bytes, [1u8; 8], "the bytes the row held come back");
        // Past the row's end, or a row that is not there: refused, the row unchanged.
        assert!(matches!(w.swap_at(0, row, 12, &mut [0u8; 8]), Err(TablesError::Span { at: 12, len: 8, .. })));
        assert!(matches!(w.swap_at(0, row, usize::MAX, &mut [0u8; 8]), Err(TablesError::Span { .. })));
        assert!(matches!(w.swap_at(0, row + 1, 0, &mut [0u8; 8]), Err(TablesError::NoRow { .. })));
        w.commit(1).unwrap();
        row
    };
    // Recovered from the log alone: the swap's record holds the whole row.
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let mut want = vec![1u8; 8];
    want.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
    assert_eq!(db.snapshot().row(0, row), Some(&want[..]));
}

#[test]
fn a_row_written_many_times_in_a_commit_is_logged_once_and_recovered_as_last_written() {
    let dir = tempfile::tempdir().unwrap();
    let (kept, undone) = {
        let db = Tables::create(dir.path(), shape(), b"", options()).unwrap();
        let mut w = db.writer();
        let kept = w.insert(0, &[1u8; 16]).unwrap();
        let undone = w.insert(0, &[2u8; 16]).unwrap();
        w.commit(1).unwrap();
        let before = w.pending_bytes();
        for i in 0..100u64 {
            w.swap_at(0, kept, 8, &mut i.to_le_bytes()).unwrap();
        }
        let one_image = w.pending_bytes() - before;
        w.swap_at(0, kept, 0, &mut 7u64.to_le_bytes()).unwrap();
        assert_eq!(w.pending_bytes() - before, one_image, "the row's image is overwritten, not logged again");
        // A request rolled back: the image logged before its savepoint is as it was.
        let sp = w.savepoint();
        w.swap_at(0, kept, 0, &mut 8u64.to_le_bytes()).unwrap();
        w.swap_at(0, undone, 0, &mut 9u64.to_le_bytes()).unwrap();
        w.rollback_to(&sp);
        w.commit(2).unwrap();
        (kept, undone)
    };
    // Recovered from the log alone.
    let db = Tables::open(dir.path(), shape(), options()).unwrap();
    let mut want = 7u64.to_le_bytes().to_vec();
    want.extend_from_slice(&99u64.to_le_bytes());
    assert_eq!(db.snapshot().row(0, kept), Some(&want[..]));
    assert_eq!(db.snapshot().row(0, undone), Some(&[2u8; 16][..]));
}
