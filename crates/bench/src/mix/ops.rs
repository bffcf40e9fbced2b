//! The operations of the mix (seed 004, §3.5.3, the Sparksee workload): read, update, insert,
//! scan (up to `max_scan` records from a key) and read-modify-write, drawn in the configured
//! proportions from a seeded generator per client, on YCSB's `usertable`: a key and ten
//! text fields of 100 bytes, plus a `count` that every update and read-modify-write adds one
//! to — what the final state is checked against.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Fields of a record besides its key and its count (YCSB's default: ten).
pub const FIELDS: usize = 10;
/// Bytes of each field's value (YCSB's default: 100).
pub const FIELD_BYTES: usize = 100;

/// One operation of the mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read a whole record by key.
    Read {
        /// A loaded key.
        key: String,
    },
    /// Set one field and add one to the count.
    Update {
        /// A loaded key.
        key: String,
        /// Which field (0..FIELDS).
        field: usize,
        /// Its new value.
        value: String,
    },
    /// Add a new record (count 0).
    Insert {
        /// A key no other operation uses.
        key: String,
        /// The value of every field (with the field's number in front).
        value: String,
    },
    /// Read up to `limit` records in key order from `key` on.
    Scan {
        /// A loaded key: the first record returned.
        key: String,
        /// At most this many records.
        limit: u64,
    },
    /// Read a record, then set one field and write the count read plus one (inside a
    /// transaction the write depends on the read; see each system's module for how).
    ReadModifyWrite {
        /// A loaded key.
        key: String,
        /// Which field.
        field: usize,
        /// Its new value.
        value: String,
    },
}

impl Op {
    /// Whether the operation adds one to a record's count when it succeeds.
    pub fn increments(&self) -> bool {
        matches!(self, Op::Update { .. } | Op::ReadModifyWrite { .. })
    }
}

/// The proportions of the five kinds, in percent; they add up to 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Mix {
    /// Reads.
    pub read: u32,
    /// Updates.
    pub update: u32,
    /// Inserts.
    pub insert: u32,
    /// Scans.
    pub scan: u32,
    /// Read-modify-writes.
    pub rmw: u32,
}

impl Mix {
    /// The seed's Sparksee workload: 20% of each.
    pub const SEED: Mix = Mix { read: 20, update: 20, insert: 20, scan: 20, rmw: 20 };

    /// Parses `read,update,insert,scan,rmw` percentages (`20,20,20,20,20`).
    pub fn parse(s: &str) -> Result<Mix, String> {
        let parts: Vec<u32> = s
            .split(',')
            .map(|p| p.trim().parse::<u32>().map_err(|_| format!("--mix: {p:?} is not a whole percentage")))
            .collect::<Result<_, _>>()?;
        let [read, update, insert, scan, rmw] = parts[..] else {
            return Err(format!("--mix: give five percentages (read,update,insert,scan,rmw), not {}", parts.len()));
        };
        let mix = Mix { read, update, insert, scan, rmw };
        if read + update + insert + scan + rmw != 100 {
            return Err(format!("--mix: {s} adds up to {}, not 100", read + update + insert + scan + rmw));
        }
        Ok(mix)
    }
}

/// The key of loaded record `i` (`u00000042`): keys sort as their numbers do.
pub fn key(i: u64) -> String {
    format!("u{i:08}")
}

/// The value of field `field` of loaded record `i`.
pub fn loaded_value(i: u64, field: usize) -> String {
    fill(&format!("{field}:{i}:"))
}

/// `prefix` padded to [`FIELD_BYTES`] with letters.
fn fill(prefix: &str) -> String {
    let mut s = String::with_capacity(FIELD_BYTES);
    s.push_str(prefix);
    let mut c = b'a';
    while s.len() < FIELD_BYTES {
        s.push(char::from(c));
        c = if c == b'z' { b'a' } else { c + 1 };
    }
    s.truncate(FIELD_BYTES);
    s
}

/// One client's operations: a seeded stream, inserting keys of its own.
pub struct Generator {
    rng: StdRng,
    client: usize,
    inserted: u64,
    records: u64,
    max_scan: u64,
    mix: Mix,
    /// Distinguishes the keys of points run one after another on the same data.
    round: u64,
}

impl Generator {
    /// Client `client`'s stream over `records` loaded records; `round` makes its insert keys
    /// differ from those of earlier points.
    pub fn new(seed: u64, round: u64, client: usize, records: u64, max_scan: u64, mix: Mix) -> Generator {
        let s = seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (client as u64).wrapping_mul(0xd1b5_4a32_d192_ed03);
        Generator { rng: StdRng::seed_from_u64(s), client, inserted: 0, records, max_scan, mix, round }
    }

    fn loaded_key(&mut self) -> String {
        key(self.rng.random_range(0..self.records.max(1)))
    }

    fn value(&mut self) -> String {
        let n: u64 = self.rng.random();
        fill(&format!("{n:016x}"))
    }

    /// The next operation.
    pub fn next_op(&mut self) -> Op {
        let m = self.mix;
        let roll = self.rng.random_range(0..100u32);
        let field = self.rng.random_range(0..FIELDS);
        if roll < m.read {
            Op::Read { key: self.loaded_key() }
        } else if roll < m.read + m.update {
            Op::Update { key: self.loaded_key(), field, value: self.value() }
        } else if roll < m.read + m.update + m.insert {
            // After the loaded key of the same number, so scans meet inserted records too.
            let at = self.rng.random_range(0..self.records.max(1));
            let key = format!("{}.{:03}.{:03}.{:08}", key(at), self.round, self.client, self.inserted);
            self.inserted += 1;
            Op::Insert { key, value: self.value() }
        } else if roll < m.read + m.update + m.insert + m.scan {
            let limit = self.rng.random_range(1..=self.max_scan.max(1));
            Op::Scan { key: self.loaded_key(), limit }
        } else {
            Op::ReadModifyWrite { key: self.loaded_key(), field, value: self.value() }
        }
    }

    /// The next `n` operations.
    pub fn batch(&mut self, n: usize) -> Vec<Op> {
        (0..n).map(|_| self.next_op()).collect()
    }
}

/// Checks a scan's keys: the first is `start` (a loaded key is never removed), they ascend
/// strictly, there are at most `limit`, and fewer only if the scan reached `last` (the
/// greatest loaded key) or beyond. `None` when right, else what is wrong.
pub fn check_scan(start: &str, limit: u64, keys: &[String], last: &str) -> Option<String> {
    if keys.first().map(String::as_str) != Some(start) {
        return Some(format!("scan from {start:?}: first key {:?}", keys.first()));
    }
    if let Some(w) = keys.windows(2).find(|w| w[0] >= w[1]) {
        return Some(format!("scan from {start:?}: {:?} before {:?}", w[0], w[1]));
    }
    let n = keys.len() as u64;
    if n > limit {
        return Some(format!("scan from {start:?}: {n} records, limit {limit}"));
    }
    if n < limit && keys.last().is_some_and(|k| k.as_str() < last) {
        return Some(format!(
            "scan from {start:?}: {n} of {limit} records, ending at {:?} before {last:?}",
            keys.last()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_seeded_and_follow_the_mix() {
        let a = Generator::new(7, 0, 1, 1000, 300, Mix::SEED).batch(50);
        let b = Generator::new(7, 0, 1, 1000, 300, Mix::SEED).batch(50);
        assert_eq!(a, b);
        let ops = Generator::new(7, 0, 1, 1000, 300, Mix::SEED).batch(10_000);
        let scans = ops.iter().filter(|o| matches!(o, Op::Scan { .. })).count();
        assert!((1700..2300).contains(&scans), "{scans}");
        let only_reads = Mix::parse("100,0,0,0,0").unwrap();
        assert!(Generator::new(1, 0, 0, 10, 5, only_reads).batch(100).iter().all(|o| matches!(o, Op::Read { .. })));
        assert!(Mix::parse("20,20,20,20").unwrap_err().contains("five"));
        assert!(Mix::parse("20,20,20,20,21").unwrap_err().contains("101"));
        assert_eq!(loaded_value(3, 2).len(), FIELD_BYTES);
    }

    #[test]
    fn scans_are_checked() {
        let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(check_scan("b", 3, &k(&["b", "c", "d"]), "z"), None);
        assert_eq!(check_scan("b", 3, &k(&["b", "z"]), "z"), None);
        assert!(check_scan("b", 3, &k(&["c"]), "z").is_some());
        assert!(check_scan("b", 3, &k(&["b", "b"]), "z").is_some());
        assert!(check_scan("b", 3, &k(&["b", "c"]), "z").is_some());
        assert!(check_scan("b", 1, &k(&["b", "c"]), "z").is_some());
    }
}
