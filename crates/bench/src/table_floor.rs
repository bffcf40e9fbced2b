//! What the `table_floor` examples (`espalier-trainbenchmark`'s Train Benchmark floor and this
//! crate's `table_floor_b7`) lay out by hand the same way: interned texts with counts, and the
//! 8-byte entry-key slot of a row (`docs/storage.md`, "Tables"). A floor's stand-in for the
//! storage layer's string table until that is built; not used by the engine.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Where an entry row's key slot starts: after its 4-byte parent row.
pub const KEY: usize = 4;
/// In a key slot's last byte: the key is a text id (its first four bytes), not inline.
pub const KEY_INTERNED: u8 = 0xff;

/// Interned texts: id → (count, bytes in one heap); the writer's hash index finds a text's id.
/// Id 0 is the empty string and never stored.
#[derive(Clone)]
pub struct Strings {
    /// Per id: start in `heap`, length, count.
    table: Vec<(u64, u32, u32)>,
    heap: Vec<u8>,
    /// hash → id of the first text with that hash; later ones with the same hash in `collisions`.
    index: HashMap<u64, u32, Identity>,
    collisions: HashMap<u64, Vec<u32>>,
}

/// The hash index's keys are already hashes.
#[derive(Clone, Copy, Default)]
struct Identity;

impl BuildHasher for Identity {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl Default for Strings {
    fn default() -> Strings {
        Strings::new()
    }
}

impl Strings {
    /// No texts but the empty one (id 0).
    pub fn new() -> Strings {
        Strings {
            table: vec![(0, 0, 0)],
            heap: Vec::new(),
            index: HashMap::with_hasher(Identity),
            collisions: HashMap::new(),
        }
    }

    /// The text of `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &str {
        let (start, len, _) = self.table[id as usize];
        std::str::from_utf8(&self.heap[start as usize..start as usize + len as usize]).expect("UTF-8")
    }

    /// The id of `s`, counting one more use of it (a new id for a new text).
    pub fn intern(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let h = xxhash_rust::xxh3::xxh3_64(s.as_bytes());
        let found = match self.index.get(&h) {
            Some(&id) if self.get(id) == s => Some(id),
            Some(_) => self.collisions.get(&h).and_then(|ids| ids.iter().copied().find(|&id| self.get(id) == s)),
            None => None,
        };
        if let Some(id) = found {
            self.table[id as usize].2 += 1;
            return id;
        }
        let id = self.table.len() as u32;
        self.table.push((self.heap.len() as u64, s.len() as u32, 1));
        self.heap.extend_from_slice(s.as_bytes());
        match self.index.entry(h) {
            std::collections::hash_map::Entry::Occupied(_) => self.collisions.entry(h).or_default().push(id),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(id);
            }
        }
        id
    }

    /// Bytes on disk: the id table (start 8, length 4, count 4), the heap, and the hash index
    /// (hash 8 and id 4 per text).
    pub fn disk_bytes(&self) -> u64 {
        (self.table.len() * 16 + self.heap.len() + self.table.len() * 12) as u64
    }
}

/// Writes an entry key into its 8-byte slot at [`KEY`]: up to 7 bytes inline with the length in
/// the last byte; a longer key interned, its text id in the first four bytes. Keys are unique
/// within their collection, so interning them buys nothing but costs a string table entry and
/// a hash index entry each (about 30 bytes); most keys are short.
pub fn put_key(row: &mut [u8], key: &str, strings: &mut Strings) {
    let slot = &mut row[KEY..KEY + 8];
    slot.fill(0);
    if key.len() <= 7 {
        slot[..key.len()].copy_from_slice(key.as_bytes());
        slot[7] = key.len() as u8;
    } else {
        slot[..4].copy_from_slice(&strings.intern(key).to_le_bytes());
        slot[7] = KEY_INTERNED;
    }
}

/// An entry's key from its row.
#[inline]
pub fn key_of<'a>(row: &'a [u8], strings: &'a Strings) -> &'a str {
    let len = row[KEY + 7];
    if len == KEY_INTERNED {
        strings.get(u32::from_le_bytes(row[KEY..KEY + 4].try_into().expect("4 bytes")))
    } else {
        std::str::from_utf8(&row[KEY..KEY + len as usize]).expect("UTF-8 key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_inline_and_interned_and_texts_are_counted() {
        let mut strings = Strings::new();
        let mut row = [0u8; 12];
        for key in ["", "m1", "1234567", "a longer key than seven"] {
            put_key(&mut row, key, &mut strings);
            assert_eq!(key_of(&row, &strings), key);
        }
        assert_eq!(strings.intern(""), 0);
        let a = strings.intern("acme");
        assert_eq!(strings.intern("acme"), a);
        assert_ne!(strings.intern("other"), a);
        assert_eq!(strings.get(a), "acme");
    }
}
