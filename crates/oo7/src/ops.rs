//! The operations, what they answer, and the random choices a run of one makes.

use espalier_bench::suite::SplitMix;
use serde::Serialize;

use crate::model::{title, Oo7};

/// One OO7 operation (§5 of the paper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Op {
    /// Raw traversal: the assembly hierarchy, each base assembly's private composite parts, a
    /// depth-first search of each one's atomic parts; the number of atomic parts visited.
    T1,
    /// T1 as code navigating object to object (Espalier's data API, SQLite's prepared
    /// statements), every run in one read transaction ("one").
    T1One,
    /// The same, each run its own read transaction ("many").
    T1Many,
    /// T1 swapping (x, y) of the root part of each composite part visited.
    T2a,
    /// T1 swapping (x, y) of every atomic part visited.
    T2b,
    /// T1 swapping (x, y) of every atomic part visited four times.
    T2c,
    /// T2a on the indexed build date (odd: +1, even: −1).
    T3a,
    /// T2b on the build date.
    T3b,
    /// T2c on the build date.
    T3c,
    /// Sparse traversal: as T1, visiting only each composite part's root part.
    T6,
    /// Count the occurrences of 'I' in the manual.
    T8,
    /// Whether the manual's first and last characters are the same (1) or not (0).
    T9,
    /// Cached update: T1 twice and T2a in one transaction, timed without the T1s.
    Cu,
    /// Ten atomic parts looked up by random id.
    Q1,
    /// Atomic parts in the last 1% of build dates.
    Q2,
    /// Atomic parts in the last 10% of build dates.
    Q3,
    /// For 100 random document titles, the base assemblies using the document's part.
    Q4,
    /// Base assemblies using a composite part built later than themselves.
    Q5,
    /// Scan of all atomic parts.
    Q7,
    /// Pairs of a document and an atomic part whose doc id is the document's id.
    Q8,
    /// Q8 coded by hand as the paper ran it in every system: an indexed nested loop (each
    /// atomic part's doc id probed in the documents' id index).
    Q8Coded,
    /// Five new composite parts (with their atomic parts, connections and documents), each
    /// used by two random base assemblies.
    Insert,
    /// The five composite parts of the insert deleted again, and their uses.
    Delete,
}

impl Op {
    /// The read-only operations, run hot and cold.
    pub const READS: [Op; 12] =
        [Op::T1, Op::T6, Op::T8, Op::T9, Op::Q1, Op::Q2, Op::Q3, Op::Q4, Op::Q5, Op::Q7, Op::Q8, Op::Q8Coded];
    /// T1 in the paper's two transaction variants.
    pub const VARIANTS: [Op; 2] = [Op::T1One, Op::T1Many];
    /// The traversals that update.
    pub const UPDATES: [Op; 7] = [Op::T2a, Op::T2b, Op::T2c, Op::T3a, Op::T3b, Op::T3c, Op::Cu];

    /// Every operation, in the order a run makes them.
    pub const ALL: [Op; 23] = [
        Op::T1,
        Op::T6,
        Op::T8,
        Op::T9,
        Op::Q1,
        Op::Q2,
        Op::Q3,
        Op::Q4,
        Op::Q5,
        Op::Q7,
        Op::Q8,
        Op::Q8Coded,
        Op::T1One,
        Op::T1Many,
        Op::T2a,
        Op::T2b,
        Op::T2c,
        Op::T3a,
        Op::T3b,
        Op::T3c,
        Op::Cu,
        Op::Insert,
        Op::Delete,
    ];

    /// The operation called `name` (as [`Op::name`] spells it, any case; `-` or `_` for the
    /// space), if any.
    pub fn parse(name: &str) -> Option<Op> {
        let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], " ");
        Op::ALL.into_iter().find(|op| norm(op.name()) == norm(name))
    }

    /// The operation's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::T1 => "T1",
            Op::T1One => "T1 one",
            Op::T1Many => "T1 many",
            Op::T2a => "T2a",
            Op::T2b => "T2b",
            Op::T2c => "T2c",
            Op::T3a => "T3a",
            Op::T3b => "T3b",
            Op::T3c => "T3c",
            Op::T6 => "T6",
            Op::T8 => "T8",
            Op::T9 => "T9",
            Op::Cu => "CU",
            Op::Q1 => "Q1",
            Op::Q2 => "Q2",
            Op::Q3 => "Q3",
            Op::Q4 => "Q4",
            Op::Q5 => "Q5",
            Op::Q7 => "Q7",
            Op::Q8 => "Q8",
            Op::Q8Coded => "Q8 coded",
            Op::Insert => "insert",
            Op::Delete => "delete",
        }
    }
}

/// What an operation answers: a count (parts visited, updates made, rows found) and a
/// checksum of what it found (the sum of ids or values, wrapping), so that two systems
/// that find as many but different things disagree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// How many things the operation found, visited or updated.
    pub count: u64,
    /// The wrapping sum of what it found.
    pub sum: u64,
}

impl Answer {
    /// Counts one found thing with checksum contribution `v`.
    pub fn add(&mut self, v: i64) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(v as u64);
    }
}

/// The date range of Q2 (the last 1% of the atomic parts' dates, 1000–1999) and Q3 (10%).
pub const Q2_RANGE: (i64, i64) = (1990, 1999);
/// See [`Q2_RANGE`].
pub const Q3_RANGE: (i64, i64) = (1900, 1999);
/// Atomic parts Q1 looks up per run.
pub const Q1_LOOKUPS: usize = 10;
/// Document titles Q4 looks up per run.
pub const Q4_LOOKUPS: usize = 100;
/// Composite parts the structural insert creates.
pub const INSERTED: usize = 5;

/// The random choices of one run of an operation, the same for both systems.
#[derive(Debug, Clone, Default)]
pub struct Draw {
    /// Q1's atomic part ids.
    pub ids: Vec<i64>,
    /// Q4's document titles.
    pub titles: Vec<String>,
}

impl Draw {
    /// The choices of run `run` of `op` on `db`.
    pub fn new(db: &Oo7, op: Op, run: u64) -> Draw {
        let mut rng = SplitMix::new(db.seed ^ ((op as u64) << 32) ^ run.wrapping_mul(0x9E37_79B9));
        match op {
            Op::Q1 => {
                let n = db.max_atomic_id().max(1);
                Draw { ids: (0..Q1_LOOKUPS).map(|_| rng.below(n) as i64 + 1).collect(), titles: Vec::new() }
            }
            Op::Q4 => {
                let n = (db.composites.len() as u64).max(1);
                Draw { ids: Vec::new(), titles: (0..Q4_LOOKUPS).map(|_| title(rng.below(n) + 1)).collect() }
            }
            _ => Draw::default(),
        }
    }
}

/// T8's count: how many times `byte` occurs in `text`, the same code for every system. Counted
/// in blocks of 255 into a byte-wide sum, which the compiler vectorises: a filter-count over
/// each byte took about 230 µs of the medium manual's megabyte, most of T8 in both systems,
/// so that the operation measured the counting loop more than the database.
pub fn count_byte(text: &[u8], byte: u8) -> u64 {
    text.chunks(255).map(|block| u64::from(block.iter().fold(0u8, |n, &b| n + u8::from(b == byte)))).sum()
}

/// Applies T3's update to a build date: odd dates go up by one, even ones down.
pub fn toggle_date(d: i64) -> i64 {
    if d % 2 != 0 {
        d + 1
    } else {
        d - 1
    }
}

/// A summary of the whole database's mutable state, to compare two systems after updates:
/// how many of each thing, and a checksum over every atomic part's (id, x, y, build date).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fingerprint {
    /// Composite parts in the database.
    pub composite_parts: u64,
    /// Atomic parts in the database.
    pub atomic_parts: u64,
    /// Documents in the database.
    pub documents: u64,
    /// Links from base assemblies to their private composite parts.
    pub private_links: u64,
    /// The order-independent checksum of every atomic part's id, x, y and build date.
    pub checksum: u64,
}

impl Fingerprint {
    /// Adds one atomic part to the checksum (order does not matter).
    pub fn atom(&mut self, id: i64, x: i64, y: i64, date: i64) {
        self.atomic_parts += 1;
        let v = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (x as u64).wrapping_mul(31)
            ^ (y as u64).wrapping_mul(1_000_003).rotate_left(17)
            ^ (date as u64).rotate_left(40);
        self.checksum = self.checksum.wrapping_add(v);
    }
}

#[cfg(test)]
mod tests {
    use super::count_byte;

    #[test]
    fn count_byte_equals_a_plain_count() {
        // Lengths around the 255-byte blocks, texts of only the byte (a full block's sum is
        // 255, the most a byte holds) and of none, and a mixed one.
        let mixed: Vec<u8> =
            (0..5000u32).map(|i| if i % 7 == 0 || i % 11 == 0 { b'I' } else { b'a' + (i % 20) as u8 }).collect();
        for len in [0, 1, 254, 255, 256, 510, 511, 4999] {
            for text in [vec![b'I'; len], vec![b'x'; len], mixed[..len].to_vec()] {
                let plain = text.iter().filter(|&&b| b == b'I').count() as u64;
                assert_eq!(count_byte(&text, b'I'), plain, "length {len}");
            }
        }
    }
}
