//! The redo operations of a commit, as the bytes of its log payload, and their decoding.
//!
//! A commit's payload is a sequence of operations, each a tag byte and little-endian fields.
//! They record what happened, with the rows chosen (so replay puts every row where it was,
//! whatever free rows replay would have picked):
//!
//! | tag | operation | fields |
//! |---|---|---|
//! | 10 | put row | table, row, length (each a varint), bytes |
//! | 11 | key index put | index, owner, row, key length (each a varint), key |
//! | 1 | put row, as builds before the varints wrote it | table u32, row u32, length u32, bytes |
//! | 2 | free row | table u32, row u32 |
//! | 3 | key index put, as builds before the varints wrote it | index u32, owner u32, row u32, key length u32, key |
//! | 4 | key index remove | index u32, owner u32, key length u32, key |
//! | 5 | string stored (count 1) | id u32, length u32, bytes |
//! | 6 | string count | id u32, count u64 |
//! | 7 | string freed | id u32 |
//! | 8 | meta | name length u32, name, value length u32, value |
//! | 9 | version | u64 (the data layer's commit version) |
//!
//! A varint is LEB128: seven bits a byte, low first, the high bit set on all but the last; at
//! most five bytes for a u32. Puts of rows and keys are nearly every operation of a commit (a
//! bulk load's are millions), and their numbers are small: as varints a put's header is about
//! six bytes instead of thirteen, and the log a third smaller. Tags 1 and 3 still decode, so a
//! log written before them replays.
//!
//! A commit larger than one log record is split over several: each record's payload starts
//! with a flags byte, [`FIRST`] on the commit's first record and [`LAST`] on its last; replay
//! applies a commit only once its last record is read, so a commit is applied whole or not
//! at all, and drops the records of an unfinished commit when the next one's first arrives
//! (a crash between two appends of one large commit leaves them, never acknowledged).

/// Flag: the commit's first record.
pub const FIRST: u8 = 2;
/// Flag: the commit's last record.
pub const LAST: u8 = 1;

/// A decoded operation, borrowing its bytes from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// Row `row` of `table` is live and holds `bytes`.
    Put {
        /// The table.
        table: u32,
        /// The row.
        row: u32,
        /// Its bytes, one row wide.
        bytes: &'a [u8],
    },
    /// Row `row` of `table` is freed.
    Free {
        /// The table.
        table: u32,
        /// The row.
        row: u32,
    },
    /// Key index `index` maps `(owner, key)` to `row`.
    KeyPut {
        /// The key index.
        index: u32,
        /// The row of the collection's holder.
        owner: u32,
        /// The entry's row.
        row: u32,
        /// The key's bytes.
        key: &'a [u8],
    },
    /// Key index `index` no longer has `(owner, key)`.
    KeyRemove {
        /// The key index.
        index: u32,
        /// The row of the collection's holder.
        owner: u32,
        /// The key's bytes.
        key: &'a [u8],
    },
    /// String `id` is stored with count 1.
    StringStored {
        /// The string's id.
        id: u32,
        /// Its bytes.
        bytes: &'a [u8],
    },
    /// String `id` has `count` holders.
    StringCount {
        /// The string's id.
        id: u32,
        /// How many slots hold it.
        count: u64,
    },
    /// String `id` is gone.
    StringFreed {
        /// The string's id.
        id: u32,
    },
    /// Meta value `name` is `value`.
    Meta {
        /// The value's name.
        name: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// The data layer's version after this commit.
    Version(u64),
}

/// Row images put lately that a put of the same row overwrites instead of logging another:
/// how many. A traversal that sets a row's fields one by one (OO7's T2c and T3c set an
/// atomic part's numbers eight and four times at each visit) and an entry count bumped for
/// every entry added (a load) put the same row again and again, a few puts apart.
const RECENT_PUTS: usize = 4;

/// A `recent` slot that matches no put: row `u32::MAX` is never handed out.
const NO_PUT: (u32, u32, usize, usize) = (u32::MAX, u32::MAX, 0, 0);

/// Bytes of operations a part of a [`RedoBuf`] holds before the next operation starts a new
/// part. A bulk load's redo is tens of MiB: in one growing buffer every doubling copied all of
/// it into fresh memory (half the page faults of loading the Train Benchmark at size 64).
pub const PART_BYTES: usize = 4 << 20;

/// Appends operations to a payload, kept in parts of about [`PART_BYTES`], each holding whole
/// operations.
#[derive(Debug)]
pub struct RedoBuf {
    /// The part being written.
    bytes: Vec<u8>,
    /// The parts before it, full.
    sealed: Vec<Vec<u8>>,
    /// Bytes in `sealed`: where `bytes` starts in the operations.
    sealed_len: usize,
    /// (table, row, where its image starts, its length) of the last few row puts, replaced
    /// in turn; offsets count from the first operation.
    recent: [(u32, u32, usize, usize); RECENT_PUTS],
    next: usize,
    /// Images before this offset never change: a savepoint was marked after them, and a
    /// rollback to it must find them as they were.
    floor: usize,
}

impl Default for RedoBuf {
    fn default() -> Self {
        RedoBuf {
            bytes: Vec::new(),
            sealed: Vec::new(),
            sealed_len: 0,
            recent: [NO_PUT; RECENT_PUTS],
            next: 0,
            floor: 0,
        }
    }
}

impl RedoBuf {
    /// The encoded operations so far, in parts: each holds whole operations, and together in
    /// order they are the operations.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.sealed.iter().map(Vec::as_slice).chain(std::iter::once(self.bytes.as_slice())).filter(|p| !p.is_empty())
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.sealed_len + self.bytes.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A savepoint's mark: the bytes written so far, which stay as they are until a rollback
    /// to this mark or before it.
    pub fn mark(&mut self) -> usize {
        self.floor = self.len();
        self.floor
    }

    /// Forgets everything after `len` (a rollback to a mark).
    pub fn truncate(&mut self, len: usize) {
        // Bounded by the sealed parts: each turn takes one back.
        while len < self.sealed_len {
            let Some(part) = self.sealed.pop() else { break };
            self.sealed_len -= part.len();
            self.bytes = part;
        }
        self.bytes.truncate(len - self.sealed_len.min(len));
        self.forget_recent(len);
    }

    /// Forgets everything (after a commit), keeping the part being written unless it grew
    /// large.
    pub fn clear(&mut self) {
        self.sealed.clear();
        self.sealed_len = 0;
        self.bytes.clear();
        if self.bytes.capacity() > PART_BYTES {
            self.bytes.shrink_to(1 << 20);
        }
        self.forget_recent(0);
    }

    /// Starts a new part if the one being written is full (before an operation, so that no
    /// operation spans two parts).
    #[inline]
    fn seal_if_full(&mut self) {
        if self.bytes.len() >= PART_BYTES {
            let full = std::mem::replace(&mut self.bytes, Vec::with_capacity(PART_BYTES + (PART_BYTES >> 3)));
            self.sealed_len += full.len();
            self.sealed.push(full);
        }
    }

    /// The `len` bytes at offset `at` of the operations, if they lie in one part.
    fn image_mut(&mut self, at: usize, len: usize) -> Option<&mut [u8]> {
        if at >= self.sealed_len {
            let at = at - self.sealed_len;
            return self.bytes.get_mut(at..at + len);
        }
        // An older part: the images looked for are recent, so walk back from the newest.
        let mut start = self.sealed_len;
        for part in self.sealed.iter_mut().rev() {
            start -= part.len();
            if at >= start {
                return part.get_mut(at - start..at - start + len);
            }
        }
        None
    }

    fn forget_recent(&mut self, floor: usize) {
        self.recent = [NO_PUT; RECENT_PUTS];
        self.floor = floor;
    }

    /// Logs that row `row` of `table` holds `bytes`: an operation [`Op::Put`], or, if one of
    /// the last few puts was of the same row since the last mark, that put's image
    /// overwritten. Replay applies a commit whole and a row's image is independent of every
    /// other operation, so the row's last image is what counts, wherever it stands.
    pub fn put_row(&mut self, table: u32, row: u32, bytes: &[u8]) {
        // A table's rows are all one width: an image of another length is never the case, and
        // would be logged anew.
        let floor = self.floor;
        let found =
            self.recent.iter().find(|&&(t, r, at, len)| t == table && r == row && at >= floor && len == bytes.len());
        if let Some(&(_, _, at, _)) = found {
            if let Some(image) = self.image_mut(at, bytes.len()) {
                image.copy_from_slice(bytes);
                return;
            }
        }
        self.push(Op::Put { table, row, bytes });
        self.recent[self.next % RECENT_PUTS] = (table, row, self.len() - bytes.len(), bytes.len());
        self.next = self.next.wrapping_add(1);
    }

    /// Logs that row `row` of `table` was freed.
    pub fn free_row(&mut self, table: u32, row: u32) {
        for slot in &mut self.recent {
            if slot.0 == table && slot.1 == row {
                *slot = NO_PUT;
            }
        }
        self.push(Op::Free { table, row });
    }

    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// `v` as a varint (LEB128).
    #[inline]
    fn var(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.bytes.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
    }

    /// `b`'s length as a varint, then `b` (the bounds are the callers', as for
    /// `bytes_with_len`).
    fn var_with_len(&mut self, b: &[u8]) {
        self.var(b.len() as u32);
        self.bytes.extend_from_slice(b);
    }

    fn bytes_with_len(&mut self, b: &[u8]) {
        // Bounded by the callers: rows ≤ 4 KiB, keys ≤ MAX_KEY_LEN, strings and meta values by
        // the data layer's limits (far below 4 GiB).
        self.u32(b.len() as u32);
        self.bytes.extend_from_slice(b);
    }

    /// Appends `op`.
    pub fn push(&mut self, op: Op<'_>) {
        self.seal_if_full();
        match op {
            Op::Put { table, row, bytes } => {
                self.bytes.push(10);
                self.var(table);
                self.var(row);
                // A row is at most 4 KiB wide (the table layer's bound).
                self.var_with_len(bytes);
            }
            Op::Free { table, row } => {
                self.bytes.push(2);
                self.u32(table);
                self.u32(row);
            }
            Op::KeyPut { index, owner, row, key } => {
                self.bytes.push(11);
                self.var(index);
                self.var(owner);
                self.var(row);
                // A key is at most MAX_KEY_LEN bytes.
                self.var_with_len(key);
            }
            Op::KeyRemove { index, owner, key } => {
                self.bytes.push(4);
                self.u32(index);
                self.u32(owner);
                self.bytes_with_len(key);
            }
            Op::StringStored { id, bytes } => {
                self.bytes.push(5);
                self.u32(id);
                self.bytes_with_len(bytes);
            }
            Op::StringCount { id, count } => {
                self.bytes.push(6);
                self.u32(id);
                self.bytes.extend_from_slice(&count.to_le_bytes());
            }
            Op::StringFreed { id } => {
                self.bytes.push(7);
                self.u32(id);
            }
            Op::Meta { name, value } => {
                self.bytes.push(8);
                self.bytes_with_len(name);
                self.bytes_with_len(value);
            }
            Op::Version(v) => {
                self.bytes.push(9);
                self.bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// A payload that does not decode: the log record verified, so this is a bug or a log from
/// another build, never a torn write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("redo operation at byte {at} does not decode: {why}")]
pub struct DecodeError {
    /// Where in the commit's operations.
    pub at: usize,
    /// What was wrong.
    pub why: &'static str,
}

/// Reads operations from a commit's payload.
pub struct Ops<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Ops<'a> {
    /// The operations in `bytes`.
    pub fn new(bytes: &'a [u8]) -> Ops<'a> {
        Ops { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(DecodeError { at: self.at, why: "truncated" })?;
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn with_len(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// A varint (LEB128) of at most five bytes that fits a u32.
    #[inline]
    fn var(&mut self) -> Result<u32, DecodeError> {
        let mut v = 0u32;
        // Bounded: five bytes hold 35 bits, and the fifth may only carry the top four.
        for i in 0..5 {
            let b = self.take(1)?[0];
            if i == 4 && b > 0x0F {
                return Err(DecodeError { at: self.at - 1, why: "a varint over 32 bits" });
            }
            v |= u32::from(b & 0x7F) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError { at: self.at - 1, why: "a varint over 32 bits" })
    }

    fn var_len(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.var()? as usize;
        self.take(n)
    }

    /// The next operation, `None` at the end.
    pub fn next_op(&mut self) -> Result<Option<Op<'a>>, DecodeError> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        let start = self.at;
        let tag = self.take(1)?[0];
        let op = match tag {
            1 => Op::Put { table: self.u32()?, row: self.u32()?, bytes: self.with_len()? },
            2 => Op::Free { table: self.u32()?, row: self.u32()? },
            3 => Op::KeyPut { index: self.u32()?, owner: self.u32()?, row: self.u32()?, key: self.with_len()? },
            4 => Op::KeyRemove { index: self.u32()?, owner: self.u32()?, key: self.with_len()? },
            5 => Op::StringStored { id: self.u32()?, bytes: self.with_len()? },
            6 => Op::StringCount { id: self.u32()?, count: self.u64()? },
            7 => Op::StringFreed { id: self.u32()? },
            8 => Op::Meta { name: self.with_len()?, value: self.with_len()? },
            9 => Op::Version(self.u64()?),
            10 => Op::Put { table: self.var()?, row: self.var()?, bytes: self.var_len()? },
            11 => Op::KeyPut { index: self.var()?, owner: self.var()?, row: self.var()?, key: self.var_len()? },
            _ => return Err(DecodeError { at: start, why: "unknown tag" }),
        };
        Ok(Some(op))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_operation_round_trips() {
        let ops = [
            Op::Put { table: 3, row: 7, bytes: b"abcdefgh" },
            Op::Free { table: 3, row: 7 },
            Op::KeyPut { index: 1, owner: 2, row: 9, key: b"key" },
            Op::KeyRemove { index: 1, owner: 2, key: b"" },
            Op::StringStored { id: 4, bytes: "é".as_bytes() },
            Op::StringCount { id: 4, count: u64::MAX },
            Op::StringFreed { id: 4 },
            Op::Meta { name: b"schema", value: b"root {}" },
            Op::Version(42),
        ];
        let mut buf = RedoBuf::default();
        for op in ops {
            buf.push(op);
        }
        assert_eq!(decoded(&buf), ops);
    }

    #[test]
    fn puts_have_varint_numbers_and_decode_at_every_width() {
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, 1 << 21, (1 << 28) - 1, 1 << 28, u32::MAX] {
            let key = vec![7u8; (v % 300) as usize];
            let mut buf = RedoBuf::default();
            buf.push(Op::Put { table: v, row: v, bytes: &key });
            buf.push(Op::KeyPut { index: v, owner: v, row: v, key: &key });
            assert_eq!(
                decoded(&buf),
                [Op::Put { table: v, row: v, bytes: &key }, Op::KeyPut { index: v, owner: v, row: v, key: &key }]
            );
        }
        // A load's put of a 24-byte row in table 3 at row 100,000: six header bytes, not 13.
        let mut buf = RedoBuf::default();
        buf.push(Op::Put { table: 3, row: 100_000, bytes: &[0; 24] });
        assert_eq!(buf.len(), 6 + 24);
    }

    #[test]
    fn puts_as_earlier_builds_wrote_them_still_decode() {
        // Tag 1 and tag 3, with fixed-width u32 fields: a log left by a build before varints.
        let mut bytes = vec![1];
        for v in [3u32, 7, 2] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(b"ab");
        bytes.push(3);
        for v in [1u32, 2, 9, 3] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(b"key");
        let mut read = Ops::new(&bytes);
        assert_eq!(read.next_op().unwrap(), Some(Op::Put { table: 3, row: 7, bytes: b"ab" }));
        assert_eq!(read.next_op().unwrap(), Some(Op::KeyPut { index: 1, owner: 2, row: 9, key: b"key" }));
        assert_eq!(read.next_op().unwrap(), None);
    }

    #[test]
    fn a_varint_too_long_or_cut_short_is_an_error() {
        // Five bytes whose fifth carries more than the top four bits of a u32.
        let too_long = [10, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0, 0];
        assert_eq!(Ops::new(&too_long).next_op().unwrap_err().why, "a varint over 32 bits");
        // Six continuation bytes.
        let six = [11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert!(Ops::new(&six).next_op().is_err());
        // A put whose row's varint is cut off.
        assert_eq!(Ops::new(&[10, 3, 0x80]).next_op().unwrap_err().why, "truncated");
    }

    /// The operations of `buf`, each part decoded on its own (a part holds whole operations).
    fn decoded(buf: &RedoBuf) -> Vec<Op<'_>> {
        buf.parts()
            .flat_map(|part| {
                let mut read = Ops::new(part);
                std::iter::from_fn(move || read.next_op().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_large_redo_is_kept_in_parts_of_whole_operations() {
        let mut buf = RedoBuf::default();
        let image = |row: u32| [row as u8; 24];
        // Enough puts for three parts; each put's image is overwritten once right after it.
        let mut row = 0u32;
        let mut mark = None;
        while buf.len() < 2 * PART_BYTES + PART_BYTES / 2 {
            buf.put_row(1, row, &[0; 24]);
            buf.put_row(1, row, &image(row));
            if mark.is_none() && buf.len() > PART_BYTES + PART_BYTES / 4 {
                mark = Some((buf.mark(), row + 1));
            }
            row += 1;
        }
        assert_eq!(buf.parts().count(), 3);
        assert_eq!(buf.parts().map(<[u8]>::len).sum::<usize>(), buf.len());
        let ops = decoded(&buf);
        assert_eq!(ops.len(), row as usize);
        for (r, op) in ops.iter().enumerate() {
            assert_eq!(*op, Op::Put { table: 1, row: r as u32, bytes: &image(r as u32) });
        }
        // A put of the last row before a part ended, again: its image in the sealed part is
        // overwritten, not logged anew.
        let mut buf2 = RedoBuf::default();
        let mut r = 0;
        while buf2.len() < PART_BYTES {
            buf2.put_row(2, r, &image(r));
            r += 1;
        }
        buf2.put_row(2, r, &image(r)); // starts the second part
        buf2.put_row(2, r - 1, &image(99));
        assert_eq!(buf2.parts().count(), 2);
        let ops2 = decoded(&buf2);
        assert_eq!(ops2.len(), r as usize + 1);
        assert_eq!(ops2[r as usize - 1], Op::Put { table: 2, row: r - 1, bytes: &image(99) });
        // A rollback to a mark in the second part drops the third and the end of the second.
        let (mark, rows) = mark.unwrap();
        buf.truncate(mark);
        assert_eq!(buf.len(), mark);
        assert_eq!(buf.parts().count(), 2);
        let ops = decoded(&buf);
        assert_eq!(ops.len(), rows as usize);
        assert_eq!(ops.last(), Some(&Op::Put { table: 1, row: rows - 1, bytes: &image(rows - 1) }));
        buf.put_row(1, 7, &image(7));
        assert_eq!(decoded(&buf).len(), rows as usize + 1);
        buf.clear();
        assert!(buf.is_empty() && buf.parts().next().is_none());
    }

    #[test]
    fn a_row_put_again_overwrites_its_image() {
        let mut buf = RedoBuf::default();
        buf.put_row(1, 5, &[1; 8]);
        buf.push(Op::KeyPut { index: 0, owner: 1, row: 5, key: b"k" });
        buf.put_row(2, 5, &[7; 4]); // another table's row 5
        buf.put_row(1, 5, &[2; 8]);
        buf.put_row(1, 5, &[3; 8]);
        assert_eq!(
            decoded(&buf),
            [
                Op::Put { table: 1, row: 5, bytes: &[3; 8] },
                Op::KeyPut { index: 0, owner: 1, row: 5, key: b"k" },
                Op::Put { table: 2, row: 5, bytes: &[7; 4] },
            ]
        );
    }

    #[test]
    fn only_the_last_few_rows_are_overwritten() {
        let mut buf = RedoBuf::default();
        for row in 1..=RECENT_PUTS as u32 + 1 {
            buf.put_row(1, row, &[row as u8; 4]);
        }
        // Row 1 was put RECENT_PUTS + 1 puts ago: logged again, not found.
        buf.put_row(1, 1, &[9; 4]);
        let ops = decoded(&buf);
        assert_eq!(ops.len(), RECENT_PUTS + 2);
        assert_eq!(ops[0], Op::Put { table: 1, row: 1, bytes: &[1; 4] });
        assert_eq!(ops[RECENT_PUTS + 1], Op::Put { table: 1, row: 1, bytes: &[9; 4] });
    }

    #[test]
    fn an_image_before_a_mark_stays_as_it_was() {
        let mut buf = RedoBuf::default();
        buf.put_row(1, 5, &[1; 8]);
        let mark = buf.mark();
        buf.put_row(1, 5, &[2; 8]);
        buf.put_row(1, 5, &[3; 8]); // overwrites the image after the mark only
        assert_eq!(
            decoded(&buf),
            [Op::Put { table: 1, row: 5, bytes: &[1; 8] }, Op::Put { table: 1, row: 5, bytes: &[3; 8] }]
        );
        // The rollback finds the image before the mark untouched, and a put after it logs anew.
        buf.truncate(mark);
        assert_eq!(decoded(&buf), [Op::Put { table: 1, row: 5, bytes: &[1; 8] }]);
        buf.put_row(1, 5, &[4; 8]);
        assert_eq!(
            decoded(&buf),
            [Op::Put { table: 1, row: 5, bytes: &[1; 8] }, Op::Put { table: 1, row: 5, bytes: &[4; 8] }]
        );
    }

    #[test]
    fn a_freed_row_and_a_commit_end_the_overwriting() {
        let mut buf = RedoBuf::default();
        buf.put_row(1, 5, &[1; 8]);
        buf.free_row(1, 5);
        buf.put_row(1, 5, &[2; 8]);
        assert_eq!(
            decoded(&buf),
            [
                Op::Put { table: 1, row: 5, bytes: &[1; 8] },
                Op::Free { table: 1, row: 5 },
                Op::Put { table: 1, row: 5, bytes: &[2; 8] },
            ]
        );
        buf.clear();
        buf.put_row(1, 5, &[3; 8]);
        assert_eq!(decoded(&buf), [Op::Put { table: 1, row: 5, bytes: &[3; 8] }]);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut read = Ops::new(&bytes);
            for _ in 0..bytes.len() + 1 {
                match read.next_op() {
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
