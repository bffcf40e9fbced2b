//! Tests of the redo log: round trips, segment rolling, torn tails at every offset, flipped
//! bytes everywhere, injected write and `fdatasync` failures, recovery and continued appends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;

use super::format::record_len;
use super::*;
use crate::Durability;

type Records = Vec<(u64, Vec<u8>)>;

fn options(segment_size: u64, preparation: Preparation, durability: Durability) -> LogOptions {
    LogOptions { durability, segment_size, preparation }
}

fn payload(version: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (version as usize * 31 + i * 7) as u8).collect()
}

/// Appends batches of the given payload lengths from `next`; returns the records written.
fn append(writer: &mut LogWriter, batches: &[Vec<usize>]) -> Records {
    let mut written = Vec::new();
    let mut batch = LogBatch::new();
    for lens in batches {
        batch.clear();
        for &len in lens {
            let version = writer.next_version() + batch.len() as u64;
            let p = payload(version, len);
            batch.push(version, &p).expect("push");
            written.push((version, p));
        }
        writer.append(&mut batch).expect("append");
    }
    written
}

fn read_all(dir: &Path, from: u64) -> (Records, LogEnd) {
    let mut reader = LogReader::open(dir, from).expect("open reader");
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().expect("read") {
        out.push((r.version, r.payload.to_vec()));
    }
    (out, reader.end().expect("end"))
}

fn segments(dir: &Path) -> Vec<(u64, PathBuf)> {
    segment::list_segments(&log_dir(dir)).expect("list")
}

#[test]
fn round_trip_cut_and_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    for prep in [Preparation::PreZeroed, Preparation::Fallocate, Preparation::Append] {
        let db = dir.path().join(format!("{prep:?}"));
        let mut w = LogWriter::open(&db, options(1 << 16, prep, Durability::Sync), 1).expect("open");
        let mut written = append(&mut w, &[vec![100], vec![0, 7, 200], vec![150]]);
        w.close().expect("close");
        // Closing cuts the segment to its data and removes the next segment's preparation.
        let data = SEGMENT_HEADER_LEN + written.iter().map(|(_, p)| record_len(p.len())).sum::<usize>();
        assert_eq!(std::fs::metadata(&segments(&db)[0].1).expect("meta").len(), data as u64);
        assert_eq!(std::fs::read_dir(log_dir(&db)).expect("dir").count(), 1);
        let (read, end) = read_all(&db, 0);
        assert_eq!(read, written);
        assert_eq!(end.tail, Tail::Clean);
        assert_eq!(end.last_version, Some(5));
        end.cut().expect("cut");
        let mut w = LogWriter::open(&db, options(1 << 16, prep, Durability::Sync), 6).expect("reopen");
        written.extend(append(&mut w, &[vec![120, 130]]));
        drop(w);
        let (read, end) = read_all(&db, 0);
        assert_eq!(read, written);
        assert_eq!(end.tail, Tail::Clean);
        assert_eq!(segments(&db).len(), 2, "a writer starts a new segment when it opens");
        // Reading from a version hands out that version on.
        let (read, _) = read_all(&db, 4);
        assert_eq!(read, written[3..]);
    }
}

#[test]
fn segments_roll_and_truncate_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(4096, Preparation::PreZeroed, Durability::None), 10).expect("open");
    let batches: Vec<Vec<usize>> = (0..120).map(|i| vec![90 + i % 40; 1 + i % 4]).collect();
    let written = append(&mut w, &batches);
    drop(w);
    let segs = segments(db);
    assert!(segs.len() >= 8, "{} segments", segs.len());
    for (first, path) in &segs {
        assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(format!("{first:020}.log").as_str()));
        assert!(std::fs::metadata(path).expect("meta").len() <= 4096);
    }
    let (read, end) = read_all(db, 0);
    assert_eq!(read, written);
    assert_eq!(end.tail, Tail::Clean);
    // A checkpoint at the third segment's first version less one covers the first two.
    let v = segs[2].0;
    assert_eq!(truncate_before(db, v).expect("truncate"), 2);
    assert_eq!(segments(db)[0].0, v);
    let (read, end) = read_all(db, v);
    assert_eq!(read, written[(v - 10) as usize..]);
    assert_eq!(end.tail, Tail::Clean);
    assert!(matches!(LogReader::open(db, v - 1), Err(LogError::Gap { .. })));
    // The last segment is never deleted.
    truncate_before(db, u64::MAX).expect("truncate all");
    assert_eq!(segments(db).len(), 1);
}

#[test]
fn segments_start_small_and_double_up_to_the_segment_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    // Largest 64 × 4 KiB: segments of 4, 8, 16, … KiB, then 256 KiB each.
    let largest = 64 * 4096;
    let mut w = LogWriter::open(db, options(largest, Preparation::PreZeroed, Durability::None), 1).expect("open");
    let batches: Vec<Vec<usize>> = (0..1500).map(|i| vec![300 + i % 200; 2]).collect();
    let written = append(&mut w, &batches);
    drop(w);
    let sizes = segment_lengths(db);
    assert!(sizes.len() >= 7, "{sizes:?}");
    let want: Vec<u64> = (0..sizes.len()).map(|i| (4096u64 << i).min(largest)).collect();
    assert_eq!(sizes, want, "each segment twice the one before, up to the largest");
    reads_back_clean(db, &written);
}

#[test]
fn a_batch_larger_than_a_small_segment_lengthens_it_and_the_next_fits_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(1 << 20, Preparation::PreZeroed, Durability::Sync), 1).expect("open");
    // The first segment is 16 KiB; a 40 KB batch goes into it whole, then small batches.
    let mut written = append(&mut w, &[vec![40_000], vec![100]]);
    written.extend(append(&mut w, &[vec![50_000], vec![100; 3]]));
    drop(w);
    let sizes = segment_lengths(db);
    assert!(sizes[0] > 40_000 && sizes[0] < 48 << 10, "{sizes:?}");
    assert!(sizes[1] >= 80_000, "the next segment holds twice what overflowed the first: {sizes:?}");
    reads_back_clean(db, &written);
}

#[test]
fn a_segment_a_checkpoint_covers_is_retired_and_the_next_starts_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let largest = 64 * 4096;
    let mut w = LogWriter::open(db, options(largest, Preparation::PreZeroed, Durability::Sync), 1).expect("open");
    // Enough to reach segments of the largest size.
    let written = append(&mut w, &(0..1500).map(|i| vec![300 + i % 200; 2]).collect::<Vec<_>>());
    let last = written.len() as u64;
    assert!(!w.retire_covered(last - 1).expect("retire"), "a checkpoint before the last version covers less");
    assert!(!segments(db).is_empty());
    // A checkpoint at the last version: the older segments go as always, then the current.
    assert!(w.truncate_before(last + 1).expect("truncate") > 0);
    assert_eq!(segments(db).len(), 1, "the segment being written stays");
    assert!(w.retire_covered(last).expect("retire"), "a checkpoint at the last version covers it all");
    assert!(segments(db).is_empty(), "{:?}", segments(db));
    assert!(!w.retire_covered(last).expect("retire again"), "nothing left to retire");
    // An empty log after the checkpoint reads as the end of the data.
    let (read, end) = read_all(db, last + 1);
    assert!(read.is_empty());
    assert_eq!(end.tail, Tail::Clean);
    // Appends go on in a new segment of the first size, from the next version.
    let more = append(&mut w, &[vec![100], vec![200, 300]]);
    assert_eq!(more[0].0, last + 1);
    drop(w);
    assert_eq!(segments(db)[0].0, last + 1);
    assert_eq!(segment_lengths(db), vec![4096]);
    let (read, end) = read_all(db, last + 1);
    assert_eq!(read, more);
    assert_eq!(end.tail, Tail::Clean);
    // Only the one prepared segment waits beside it, of the next size.
    let prepared: Vec<u64> = std::fs::read_dir(log_dir(db))
        .expect("dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "tmp"))
        .map(|e| e.metadata().expect("meta").len())
        .collect();
    assert!(prepared.iter().all(|&l| l <= 8192), "{prepared:?}");
}

/// The lengths of the log's segment files, in order.
fn segment_lengths(db: &Path) -> Vec<u64> {
    segments(db).iter().map(|(_, p)| std::fs::metadata(p).expect("meta").len()).collect()
}

/// The whole log reads back as `written`, with a clean tail.
fn reads_back_clean(db: &Path, written: &Records) {
    let (read, end) = read_all(db, 0);
    assert_eq!(&read, written);
    assert_eq!(end.tail, Tail::Clean);
}

/// Writes a log whose last batch is one record, returns (records, segment, the last
/// record's offset and length).
fn log_with_last_record(db: &Path, prep: Preparation) -> (Records, PathBuf, usize, usize) {
    let mut w = LogWriter::open(db, options(1 << 16, prep, Durability::None), 1).expect("open");
    let written = append(&mut w, &[vec![40, 60], vec![10], vec![33, 0, 17]]);
    let offset = SEGMENT_HEADER_LEN + written.iter().map(|(_, p)| record_len(p.len())).sum::<usize>();
    let last = append(&mut w, &[vec![150]]);
    drop(w);
    let segs = segments(db);
    assert_eq!(segs.len(), 1);
    (written.into_iter().chain(last).collect(), segs[0].1.clone(), offset, record_len(150))
}

#[test]
fn torn_last_record_at_every_offset() {
    for prep in [Preparation::PreZeroed, Preparation::Append] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path();
        let (written, segment, offset, len) = log_with_last_record(db, prep);
        let original = std::fs::read(&segment).expect("read");
        let before = &written[..written.len() - 1];
        for keep in 0..len {
            for zeros in [false, true] {
                // Torn: the last record's first `keep` bytes reached the disk; after them the
                // file ends (appending segment) or holds zeros (pre-zeroed segment).
                let mut bytes = original[..offset + keep].to_vec();
                if zeros {
                    bytes.resize(original.len().max(offset + len), 0);
                }
                std::fs::write(&segment, &bytes).expect("write");
                let (read, end) = read_all(db, 0);
                if zeros && keep >= RECORD_HEADER_LEN + 150 {
                    // Only (zero) padding was missing: the record is whole.
                    assert_eq!((read, end.tail), (written.clone(), Tail::Clean), "keep {keep}");
                    continue;
                }
                assert_eq!(read, before, "keep {keep}");
                let expected = if keep == 0 {
                    Tail::Clean
                } else {
                    Tail::Torn { segment: segment.clone(), offset: offset as u64 }
                };
                assert_eq!(end.tail, expected, "keep {keep} zeros {zeros}");
                assert_eq!(end.last_version, Some(before.len() as u64));
            }
        }
        // Cut it and go on appending: the new record follows the last good one.
        let mut bytes = original[..offset + len / 2].to_vec();
        bytes.resize(original.len(), 0);
        std::fs::write(&segment, &bytes).expect("write");
        let (_, end) = read_all(db, 0);
        end.cut().expect("cut");
        assert_eq!(std::fs::metadata(&segment).expect("meta").len(), offset as u64);
        let next = end.last_version.unwrap_or(0) + 1;
        let mut w = LogWriter::open(db, options(1 << 16, prep, Durability::Sync), next).expect("reopen");
        let more = append(&mut w, &[vec![80, 90]]);
        drop(w);
        let (read, end) = read_all(db, 0);
        assert_eq!(read, before.iter().cloned().chain(more).collect::<Records>());
        assert_eq!(end.tail, Tail::Clean);
    }
}

#[test]
fn flipped_byte_anywhere_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(1 << 16, Preparation::Append, Durability::None), 1).expect("open");
    let batches = [vec![20], vec![5, 0, 31], vec![12], vec![40, 9]];
    let written = append(&mut w, &batches);
    drop(w);
    let segment = segments(db)[0].1.clone();
    let original = std::fs::read(&segment).expect("read");
    // Where each record begins, and where the last batch begins.
    let mut starts = vec![SEGMENT_HEADER_LEN];
    for (_, p) in &written {
        starts.push(starts[starts.len() - 1] + record_len(p.len()));
    }
    assert_eq!(starts[starts.len() - 1], original.len());
    let last_batch = starts[written.len() - batches[batches.len() - 1].len()];
    for at in 0..original.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bytes = original.clone();
            bytes[at] ^= flip;
            std::fs::write(&segment, &bytes).expect("write");
            let (read, end) = read_all(db, 0);
            // Records before the damaged one read back; nothing from it on.
            let damaged = starts.iter().rposition(|&s| s <= at).unwrap_or(0);
            let intact = if at < SEGMENT_HEADER_LEN { 0 } else { damaged };
            assert_eq!(read, written[..intact], "byte {at} ^ {flip:#x}");
            let offset = if at < SEGMENT_HEADER_LEN { 0 } else { starts[damaged] as u64 };
            match end.tail {
                Tail::Torn { offset: o, .. } => {
                    assert_eq!(o, offset, "byte {at}");
                    assert!(at >= last_batch, "damage at {at}, before the last write, called torn");
                }
                Tail::Corrupt { offset: o, version, resumes_at, .. } => {
                    assert_eq!(o, offset, "byte {at}");
                    assert_eq!(version, intact as u64);
                    assert!(resumes_at > version);
                    assert!(at < last_batch, "damage at {at} in the last write called corrupt");
                }
                Tail::Clean => panic!("flipped byte {at} ^ {flip:#x} not detected"),
            }
        }
    }
}

#[test]
fn corruption_in_an_earlier_segment_is_not_cut_silently() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(4096, Preparation::PreZeroed, Durability::None), 1).expect("open");
    let written = append(&mut w, &vec![vec![200]; 60]);
    drop(w);
    let segs = segments(db);
    assert!(segs.len() >= 3);
    // The last record of the first segment: damage followed only by zeros in its segment,
    // but later segments exist.
    let count = (segs[1].0 - segs[0].0) as usize;
    let at = SEGMENT_HEADER_LEN + (count - 1) * record_len(200) + 30;
    let mut bytes = std::fs::read(&segs[0].1).expect("read");
    bytes[at] ^= 0x10;
    std::fs::write(&segs[0].1, &bytes).expect("write");
    let (read, end) = read_all(db, 0);
    assert_eq!(read, written[..count - 1]);
    let Tail::Corrupt { segment, version, resumes_at, .. } = &end.tail else { panic!("{:?}", end.tail) };
    assert_eq!((segment, *version, *resumes_at), (&segs[0].1, count as u64 - 1, segs[1].0));
    // Cutting is the caller's decision; once cut, the log continues after the damage.
    end.cut().expect("cut");
    assert_eq!(segments(db).len(), 1);
    let mut w =
        LogWriter::open(db, options(4096, Preparation::PreZeroed, Durability::None), count as u64).expect("reopen");
    let more = append(&mut w, &[vec![10]]);
    drop(w);
    let (read, end) = read_all(db, 0);
    assert_eq!(read, written[..count - 1].iter().cloned().chain(more).collect::<Records>());
    assert_eq!(end.tail, Tail::Clean);
}

#[test]
fn a_missing_segment_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(4096, Preparation::Append, Durability::None), 1).expect("open");
    append(&mut w, &vec![vec![300]; 40]);
    drop(w);
    let segs = segments(db);
    std::fs::remove_file(&segs[1].1).expect("remove");
    let (read, end) = read_all(db, 0);
    assert_eq!(read.len() as u64, segs[1].0 - 1);
    assert!(
        matches!(end.tail, Tail::Corrupt { resumes_at, offset: 0, .. } if resumes_at == segs[2].0),
        "{:?}",
        end.tail
    );
}

#[test]
fn failing_fsync_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let mut w = LogWriter::open(db, options(1 << 16, Preparation::PreZeroed, Durability::Sync), 1).expect("open");
    append(&mut w, &[vec![100]]);
    w.faults().fail_next_sync();
    let mut batch = LogBatch::new();
    batch.push(2, b"lost").expect("push");
    let err = w.append(&mut batch).expect_err("the sync fails");
    let LogError::Sync { path, offset, .. } = &err else { panic!("{err}") };
    assert_eq!((path, *offset), (&segments(db)[0].1, (SEGMENT_HEADER_LEN + record_len(100) + record_len(4)) as u64));
    assert!(err.to_string().contains("00000000000000000001.log"), "{err}");
    // Never retried, never pretended: every later call fails.
    assert!(matches!(w.append(&mut batch), Err(LogError::Poisoned { .. })));
    assert!(matches!(w.sync(), Err(LogError::Poisoned { .. })));
    let mut next = LogBatch::new();
    next.push(3, b"after").expect("push");
    let err = w.append(&mut next).expect_err("poisoned");
    assert!(err.to_string().contains("fdatasync"), "the reason names the first failure: {err}");
}

#[test]
fn failing_write_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = LogWriter::open(dir.path(), LogOptions::default(), 1).expect("open");
    w.faults().fail_next_write();
    let mut batch = LogBatch::new();
    batch.push(1, b"x").expect("push");
    assert!(matches!(w.append(&mut batch), Err(LogError::Write { offset: 0, .. })));
    assert!(matches!(w.append(&mut batch), Err(LogError::Poisoned { .. })));
}

#[test]
fn failing_background_sync_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let periodic = Durability::Periodic(Duration::from_millis(5));
    let mut w = LogWriter::open(db, options(1 << 16, Preparation::PreZeroed, periodic), 1).expect("open");
    append(&mut w, &[vec![10]]);
    w.faults().fail_next_sync();
    append(&mut w, &[vec![10]]);
    let mut batch = LogBatch::new();
    batch.push(3, b"x").expect("push");
    for _ in 0..400 {
        std::thread::sleep(Duration::from_millis(5));
        if let Err(e) = w.append(&mut batch) {
            assert!(matches!(e, LogError::Poisoned { .. }), "{e}");
            return;
        }
        batch.clear();
        batch.push(w.next_version(), b"x").expect("push");
    }
    panic!("the failed background fdatasync did not poison the writer");
}

#[test]
fn recovery_after_a_short_write() {
    // `sync` writes with `pwrite`, `none` copies into the mapped segment: a torn write is
    // found and cut the same way.
    for (rolling, durability) in [false, true].into_iter().flat_map(|r| [(r, Durability::Sync), (r, Durability::None)])
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path();
        let opts = options(4096, Preparation::PreZeroed, durability);
        let mut w = LogWriter::open(db, opts.clone(), 1).expect("open");
        let written = append(&mut w, &[vec![1000], vec![1000, 1000]]);
        // A batch that fits the segment, or one that starts the next segment.
        let lens = if rolling { vec![1000, 1000] } else { vec![300, 200] };
        let mut batch = LogBatch::new();
        for (i, len) in lens.iter().enumerate() {
            batch.push(4 + i as u64, &payload(4, *len)).expect("push");
        }
        w.faults().short_next_write(40);
        assert!(matches!(w.append(&mut batch), Err(LogError::Write { .. })));
        assert!(matches!(w.append(&mut batch), Err(LogError::Poisoned { .. })));
        drop(w);
        let (read, end) = read_all(db, 0);
        assert_eq!(read, written);
        if rolling {
            // The new segment was never named: the log ends cleanly before it.
            assert_eq!(end.tail, Tail::Clean);
        } else {
            let offset = (SEGMENT_HEADER_LEN + 3 * record_len(1000)) as u64;
            assert_eq!(end.tail, Tail::Torn { segment: segments(db)[0].1.clone(), offset });
        }
        end.cut().expect("cut");
        let mut w = LogWriter::open(db, opts, 4).expect("reopen");
        let more = append(&mut w, &[vec![500], vec![600]]);
        drop(w);
        let (read, end) = read_all(db, 0);
        assert_eq!(read, written.into_iter().chain(more).collect::<Records>());
        assert_eq!(end.tail, Tail::Clean);
    }
}

#[test]
fn unsynced_modes_write_pre_zeroed_segments_through_memory_and_read_back_without_a_sync() {
    let periodic = Durability::Periodic(Duration::from_secs(3600));
    for (durability, prep, mapped) in [
        (Durability::None, Preparation::PreZeroed, true),
        (periodic, Preparation::PreZeroed, true),
        (Durability::Sync, Preparation::PreZeroed, false),
        (Durability::None, Preparation::Fallocate, false),
        (Durability::None, Preparation::Append, false),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path();
        // First segments of 4 KiB: the 6,000-byte batch is larger than the mapping, so it goes
        // past it with `pwrite`, and the batches after it land beyond the mapped part too.
        let mut w = LogWriter::open(db, options(4 << 20, prep, durability), 1).expect("open");
        let mut written = append(&mut w, &[vec![100], vec![0, 7, 200]]);
        assert_eq!(w.is_mapped(), mapped, "{durability:?} {prep:?}");
        written.extend(append(&mut w, &[vec![6000], vec![50], vec![3000, 3000, 3000]]));
        // Dropped without a sync or a close: the process's end, which the page cache outlives.
        drop(w);
        let (read, end) = read_all(db, 0);
        assert_eq!(read, written, "{durability:?} {prep:?}");
        assert_eq!(end.tail, Tail::Clean);
    }
}

#[test]
fn bounds_and_order_are_typed_errors() {
    let mut batch = LogBatch::new();
    let big = vec![0u8; MAX_PAYLOAD + 1];
    assert!(matches!(batch.push(1, &big), Err(LogError::PayloadTooLarge { .. })));
    let max = vec![0u8; MAX_PAYLOAD];
    batch.push(1, &max).expect("a full payload");
    batch.push(2, &max[..MAX_PAYLOAD - 64]).expect("a second one");
    assert!(matches!(batch.push(3, &max), Err(LogError::BatchTooLarge { max: MAX_BATCH_BYTES, .. })));
    assert_eq!(batch.len(), 2, "a refused push leaves the batch as it was");
    assert!(matches!(batch.push(5, b""), Err(LogError::VersionOrder { expected: 3, got: 5 })));
    assert!(matches!(LogBatch::new().push(0, b""), Err(LogError::VersionOrder { .. })));

    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path();
    let opts = options(4096, Preparation::Append, Durability::None);
    let mut w = LogWriter::open(db, opts.clone(), 7).expect("open");
    assert!(matches!(w.append(&mut LogBatch::new()), Err(LogError::EmptyBatch)));
    let mut b = LogBatch::new();
    b.push(8, b"x").expect("push");
    assert!(matches!(w.append(&mut b), Err(LogError::VersionOrder { expected: 7, got: 8 })));
    let mut b = LogBatch::new();
    b.push(7, &[1u8; 5000]).expect("push");
    assert!(matches!(w.append(&mut b), Err(LogError::BatchTooLarge { max: 4072, .. })));
    append(&mut w, &[vec![10]]);
    drop(w);
    assert!(matches!(LogWriter::open(db, opts.clone(), 7), Err(LogError::Overlap { first: 7, .. })));
    assert!(matches!(
        LogWriter::open(db, options(1000, Preparation::Append, Durability::None), 8),
        Err(LogError::Options(_))
    ));
}

/// A segment file of arbitrary bytes: the reader ends somewhere, with no panic.
fn read_garbage(bytes: &[u8], valid_header: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let log = log_dir(dir.path());
    std::fs::create_dir_all(&log).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut content = if valid_header { format::segment_header(5).to_vec() } else { Vec::new() };
    content.extend_from_slice(bytes);
    std::fs::write(log.join(segment::segment_name(5)), &content).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut reader = LogReader::open(dir.path(), 0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    while reader.next_record().map_err(|e| TestCaseError::fail(e.to_string()))?.is_some() {}
    let end = reader.end().map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(end.last_version.is_none_or(|v| v >= 5));
    Ok(())
}

fn arb_batches() -> impl Strategy<Value = Vec<Vec<usize>>> {
    prop::collection::vec(prop::collection::vec(0usize..400, 1..6), 1..40)
}

fn arb_preparation() -> impl Strategy<Value = Preparation> {
    prop_oneof![Just(Preparation::PreZeroed), Just(Preparation::Fallocate), Just(Preparation::Append)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random batches read back exactly, across segment rolls; any prefix of the log (cut
    /// at any byte of any segment, later segments gone) reads back as a prefix of the
    /// records and is never called corrupt.
    #[test]
    fn random_batches_round_trip(
        batches in arb_batches(),
        segment_kib in prop_oneof![Just(4u64), Just(8), Just(64)],
        prep in arb_preparation(),
        start in 1u64..1_000_000,
        cut_at in any::<prop::sample::Index>(),
        cut_segment in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let db = dir.path();
        let mut w = LogWriter::open(db, options(segment_kib << 10, prep, Durability::None), start)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let written = append(&mut w, &batches);
        drop(w);
        let (read, end) = read_all(db, 0);
        prop_assert_eq!(&read, &written);
        prop_assert_eq!(end.tail, Tail::Clean);
        prop_assert_eq!(end.last_version, Some(start + written.len() as u64 - 1));

        let segs = segments(db);
        let i = cut_segment.index(segs.len());
        for (_, later) in &segs[i + 1..] {
            std::fs::remove_file(later).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let bytes = std::fs::read(&segs[i].1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let keep = cut_at.index(bytes.len() + 1);
        let mut cut = bytes[..keep].to_vec();
        if prep == Preparation::PreZeroed {
            cut.resize(bytes.len(), 0);
        }
        std::fs::write(&segs[i].1, &cut).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (read, end) = read_all(db, 0);
        prop_assert!(read.len() <= written.len());
        prop_assert_eq!(&read[..], &written[..read.len()]);
        prop_assert!(!matches!(end.tail, Tail::Corrupt { .. }), "{:?}", end.tail);
        end.cut().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let next = end.last_version.unwrap_or(start - 1) + 1;
        if next >= start {
            let mut w = LogWriter::open(db, options(segment_kib << 10, prep, Durability::None), next)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let more = append(&mut w, &[vec![64, 65]]);
            drop(w);
            let (again, end) = read_all(db, 0);
            prop_assert_eq!(&again[..read.len()], &read[..]);
            prop_assert_eq!(&again[read.len()..], &more[..]);
            prop_assert_eq!(end.tail, Tail::Clean);
        }
    }

    /// The reader survives any bytes, with or without a valid segment header in front.
    #[test]
    fn reader_survives_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2000), header in any::<bool>()) {
        read_garbage(&bytes, header)?;
    }

    /// Plausible-looking garbage: record headers with random lengths and versions.
    #[test]
    fn reader_survives_plausible_headers(
        words in prop::collection::vec((any::<u32>(), any::<u32>(), 0u64..10), 0..100),
    ) {
        let mut bytes = Vec::new();
        for (len, crc, version) in words {
            bytes.extend_from_slice(&((len % 600) | (len & format::BATCH_START)).to_le_bytes());
            bytes.extend_from_slice(&crc.to_le_bytes());
            bytes.extend_from_slice(&(version + 5).to_le_bytes());
        }
        read_garbage(&bytes, true)?;
    }
}

proptest! {
    /// A record pushed from parts is the record of the parts joined, whatever their lengths
    /// (a short first part shares the version's checksum call).
    #[test]
    fn a_record_from_parts_is_the_record_of_them_joined(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..5),
        version in 1u64..1_000_000,
    ) {
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let mut from_parts = LogBatch::new();
        from_parts.push_parts(version, &slices).expect("push_parts");
        let mut joined = LogBatch::new();
        joined.push(version, &parts.concat()).expect("push");
        prop_assert_eq!(from_parts.records_bytes(), joined.records_bytes());
    }
}
