//! The ordered key index of a collection: (owner row, key bytes) → entry row, as a persistent
//! copy-on-write B+tree (`docs/storage.md`, "Keys and indexes").
//!
//! - Order: by owner row, then key bytes lexicographically (a text key is its UTF-8 bytes, a
//!   matrix key its target row big-endian, so byte order is key order).
//! - Nodes hold about [`NODE_BYTES`] of entries, keys inline: a leaf is three arrays (search
//!   words, key ends, rows) and one key heap. A search word is the owner and the key's first
//!   four bytes as one `u64`, so a lookup binary-searches integers and compares key bytes only
//!   on a tie (matrix keys, four bytes, never). Inner nodes keep the number of entries under
//!   each child, so counts of an owner's entries or of a prefix take one descent each
//!   ([`KeyIndex::count`]).
//! - A lookup reads one buffer per level: a node's header, search words, rows, key bytes and
//!   (inner nodes) its children's buffers' addresses are one allocation, and the version holds
//!   its root's buffer's address, so a cold descent does not go through the `Arc`s, the node
//!   structs and a separate children array (B7 key lookup, `table_floor_b7`: 4.9 → 4.3 µs,
//!   1.68 → 2.06–2.26× SQLite).
//! - Writes copy the path from the root to the leaf they change if a published version still
//!   shares it (`Arc::make_mut`), so a published [`KeyIndex`] never changes; publishing is
//!   handing out an `Arc` of the root ([`KeyIndexWriter::publish`]).
//! - Removal merges a node into a neighbour when both fit in one node, and lifts the root's
//!   only child, so the tree stays shallow; there is no redistribution between siblings (an
//!   underfull node that cannot merge stays as it is).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

mod words;

use words::{HeapWords, Words};

use crate::table::{FilePlace, StableBytes};

/// Bytes of entries a node holds before it splits.
#[cfg(not(test))]
pub const NODE_BYTES: usize = 4096;
/// Small nodes in tests, so that a few hundred entries make trees several levels deep.
#[cfg(test)]
pub const NODE_BYTES: usize = 256;
/// Longest key the index accepts.
pub const MAX_KEY_LEN: usize = 4096;

/// A key longer than [`MAX_KEY_LEN`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a key of {len} bytes is longer than the limit of {MAX_KEY_LEN} bytes")]
pub struct KeyTooLong {
    /// The key's bytes.
    pub len: usize,
}

/// Bytes an entry costs in a leaf besides its key: owner, key end, row.
const LEAF_ENTRY: usize = 12;
/// Bytes a child costs in an inner node besides its separator: owner and key end of the
/// separator, the child reference and its entry count.
const INNER_ENTRY: usize = 24;

#[inline]
fn cmp_key(a_owner: u32, a: &[u8], b_owner: u32, b: &[u8]) -> Ordering {
    a_owner.cmp(&b_owner).then_with(|| cmp_bytes(a, b))
}

/// Byte order; keys of up to 8 bytes (matrix keys, most text keys) compare as big-endian
/// integers instead of through a `memcmp` call, which cost more than the comparison.
#[inline]
fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() <= 8 && b.len() <= 8 {
        let word = |k: &[u8]| k.iter().enumerate().fold(0u64, |w, (i, &x)| w | u64::from(x) << (56 - 8 * i));
        word(a).cmp(&word(b)).then(a.len().cmp(&b.len()))
    } else {
        a.cmp(b)
    }
}

/// `owner << 32 |` the first four bytes of `key`, big-endian, zero-padded: equal keys have
/// equal words, and a smaller word means a smaller key.
#[inline]
fn search_word(owner: u32, key: &[u8]) -> u64 {
    let mut b = [0u8; 4];
    let n = key.len().min(4);
    b[..n].copy_from_slice(&key[..n]);
    u64::from(owner) << 32 | u64::from(u32::from_be_bytes(b))
}

/// The number of `words` below `word` (`words` sorted), without data-dependent branches.
#[inline]
fn words_below(words: &[u64], word: u64) -> usize {
    if words.is_empty() {
        return 0;
    }
    let (mut base, mut n) = (0usize, words.len());
    while n > 1 {
        let half = n / 2;
        base = if words[base + half - 1] < word { base + half } else { base };
        n -= half;
    }
    base + usize::from(words[base] < word)
}

/// Words per block under one fence (two cache lines).
const FENCE: usize = 16;

/// The first eight bytes of `key`, big-endian, zero-padded: the search word of a key in a run
/// whose keys all have one owner.
#[inline]
fn prefix8(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// A sorted run of (owner, key) pairs, each with a `u32` value (a leaf's rows; unused in an
/// inner node's separators), packed into **one** buffer: search words, fences, values, key
/// ends, key bytes. One allocation per node, so that a lookup in a cold node touches the few
/// cache lines it reads and one or two 4 KiB pages, not one page per array (a cold page costs
/// a TLB miss, which on a virtual machine is several memory loads). Reads go straight to the
/// buffer; a write moves the parts within it, in place when no snapshot shares the node
/// (`insert_in_place`, `remove_in_place`; a node is about 4 KiB).
#[derive(Clone)]
struct Keys {
    /// Two header words (`len | heap_len << 32`; the shared owner, [`SHARED`] if there is one,
    /// [`INNER`] for an inner node's separators), then `words[len]`, `fences[len / FENCE]`
    /// (every [`FENCE`]th word, the last of each block: a search reads these, then one
    /// block), then as `u32`s `values[len]` and `ends[len]` (`ends[i]` is where key `i` ends
    /// in the heap), then the key heap; an inner node's separators are followed by its
    /// children's buffers' addresses ([`Inner::sync`]), so that a descent goes from buffer to
    /// buffer, one allocation per level.
    ///
    /// While every key has one owner (a node of one big collection, or of one owner's
    /// entries) the search words are the keys' first eight bytes, so that keys of up to eight
    /// bytes never tie. Otherwise each word is `owner << 32 |` the key's first four bytes
    /// (matrix keys, four bytes, never tie either).
    buf: Words,
}

/// Header words before a run's search words.
const HDR: usize = 2;
/// In the second header word: the low half is the shared owner.
const SHARED: u64 = 1 << 32;
/// In the second header word: the run is an inner node's separators, followed by children.
const INNER: u64 = 2 << 32;

fn header(len: usize, heap_len: usize, shared: Option<u32>) -> [u64; 2] {
    [len as u64 | (heap_len as u64) << 32, shared.map_or(0, |o| SHARED | u64::from(o))]
}

impl Default for Keys {
    fn default() -> Keys {
        Keys { buf: Words::heap(&header(0, 0, None)) }
    }
}

impl std::ops::Deref for Keys {
    type Target = KeysBuf;

    #[inline]
    fn deref(&self) -> &KeysBuf {
        KeysBuf::new(self.buf.as_slice())
    }
}

/// A run's buffer, read in place (behind a [`Keys`], or reached from a parent's child
/// address).
#[repr(transparent)]
struct KeysBuf([u64]);

/// A run being edited: its parts as vectors.
struct Parts {
    shared: Option<u32>,
    words: Vec<u64>,
    values: Vec<u32>,
    ends: Vec<u32>,
    heap: Vec<u8>,
}

impl Parts {
    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.heap[start..self.ends[i] as usize]
    }

    fn word(&self, owner: u32, key: &[u8]) -> u64 {
        match self.shared {
            Some(_) => prefix8(key),
            None => search_word(owner, key),
        }
    }

    /// Before adding a key of `owner`: an empty run takes the owner as shared; a run whose
    /// shared owner differs turns mixed (its words recomputed).
    fn admit(&mut self, owner: u32) {
        if self.words.is_empty() {
            self.shared = Some(owner);
        } else if let Some(o) = self.shared {
            if o != owner {
                self.shared = None;
                self.words = (0..self.words.len()).map(|i| search_word(o, self.key(i))).collect();
            }
        }
    }

    fn insert(&mut self, i: usize, owner: u32, key: &[u8], value: u32) {
        self.admit(owner);
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.heap.splice(start..start, key.iter().copied());
        for e in &mut self.ends[i..] {
            *e += key.len() as u32;
        }
        let word = self.word(owner, key);
        self.words.insert(i, word);
        self.values.insert(i, value);
        self.ends.insert(i, (start + key.len()) as u32);
    }

    fn pack(self) -> Keys {
        let len = self.words.len();
        let halves = |n: usize| n.div_ceil(2);
        let mut buf = HeapWords::with_capacity(HDR + len + len / FENCE + 2 * halves(len) + self.heap.len().div_ceil(8));
        buf.extend(header(len, self.heap.len(), self.shared));
        buf.extend(self.words.iter().copied());
        buf.extend(self.words.iter().skip(FENCE - 1).step_by(FENCE).copied());
        // Native byte order throughout, so that reading the buffer back as u32s or bytes
        // (`Keys::u32s`, `Keys::heap`) gives these values on any machine.
        let pairs = |v: &[u32]| {
            v.chunks(2)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..4].copy_from_slice(&c[0].to_ne_bytes());
                    b[4..].copy_from_slice(&c.get(1).copied().unwrap_or(0).to_ne_bytes());
                    u64::from_ne_bytes(b)
                })
                .collect::<Vec<_>>()
        };
        buf.extend(pairs(&self.values));
        buf.extend(pairs(&self.ends));
        buf.extend(self.heap.chunks(8).map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_ne_bytes(b)
        }));
        Keys { buf: Words::Heap(buf) }
    }
}

/// Word offsets in a run of `len` keys and `heap_len` bytes of key heap: where its values,
/// key ends and key heap start, and where it ends (its tail).
fn layout(len: usize, heap_len: usize) -> [usize; 4] {
    let values = HDR + len + len / FENCE;
    let ends = values + len.div_ceil(2);
    let heap = ends + len.div_ceil(2);
    [values, ends, heap, heap + heap_len.div_ceil(8)]
}

/// Inserts key `i` of the run in `buf` (`(len, heap_len)` before it): its search word, value
/// and bytes, which go at heap byte `start`. Every part moves right within the buffer, so
/// they move back to front (heap, ends, values, words) and each byte is written once: no new
/// buffer and no zeroed one, which is what a load spends its time on otherwise.
fn insert_in_place(
    buf: &mut HeapWords,
    (n, heap_len): (usize, usize),
    i: usize,
    (word, value, key): (u64, u32, &[u8]),
    start: usize,
) {
    let k = key.len();
    let [v0, e0, h0, t0] = layout(n, heap_len);
    let [v1, e1, h1, t1] = layout(n + 1, heap_len + k);
    assert!(i <= n && start <= heap_len && buf.len() >= t0, "an insert within the run");
    debug_assert!(v1 > v0 && e1 > e0 && h1 > h0 && t1 > t0);
    // An inner run's children's addresses follow; `Inner::sync` writes them anew.
    buf.truncate(t0);
    if buf.capacity() < t1 {
        // Room for a few more keys, not the doubling `resize` would take.
        buf.reserve_exact(t1 - t0 + t1 / 8);
    }
    buf.resize(t1, 0);
    {
        // SAFETY: u64 is at least as aligned as u8, and every bit pattern is valid for both.
        let (_, bytes, _) = unsafe { buf.align_to_mut::<u8>() };
        let (h0, h1) = (h0 * 8, h1 * 8);
        bytes.copy_within(h0 + start..h0 + heap_len, h1 + start + k);
        bytes.copy_within(h0..h0 + start, h1);
        bytes[h1 + start..h1 + start + k].copy_from_slice(key);
        bytes[h1 + heap_len + k..t1 * 8].fill(0);
    }
    {
        // SAFETY: as above, for u32 (stored in native byte order, as `Parts::pack` does).
        let (_, u32s, _) = unsafe { buf.align_to_mut::<u32>() };
        let (e0, e1) = (e0 * 2, e1 * 2);
        u32s.copy_within(e0 + i..e0 + n, e1 + i + 1);
        for e in &mut u32s[e1 + i + 1..e1 + n + 1] {
            *e += k as u32;
        }
        u32s[e1 + i] = (start + k) as u32;
        u32s.copy_within(e0..e0 + i, e1);
        let (v0, v1) = (v0 * 2, v1 * 2);
        u32s.copy_within(v0 + i..v0 + n, v1 + i + 1);
        u32s[v1 + i] = value;
        u32s.copy_within(v0..v0 + i, v1);
        if n % 2 == 0 {
            // The odd count's unused last u32 of each array.
            u32s[v1 + n + 1] = 0;
            u32s[e1 + n + 1] = 0;
        }
    }
    buf.copy_within(HDR + i..HDR + n, HDR + i + 1);
    buf[HDR + i] = word;
    for f in 0..(n + 1) / FENCE {
        buf[HDR + n + 1 + f] = buf[HDR + f * FENCE + FENCE - 1];
    }
    buf[0] = header(n + 1, heap_len + k, None)[0];
}

/// Removes key `i` of the run in `buf` (`(len, heap_len)` before it), whose bytes are `bytes`
/// of the heap. Every part moves left within the buffer, so they move front to back (words,
/// values, ends, heap), the reverse of [`insert_in_place`].
fn remove_in_place(buf: &mut HeapWords, (n, heap_len): (usize, usize), i: usize, bytes: std::ops::Range<usize>) {
    let (start, end) = (bytes.start, bytes.end);
    let k = end - start;
    let [v0, e0, h0, t0] = layout(n, heap_len);
    let [v1, e1, h1, t1] = layout(n - 1, heap_len - k);
    assert!(i < n && start <= end && end <= heap_len && buf.len() >= t0, "a removal within the run");
    buf.copy_within(HDR + i + 1..HDR + n, HDR + i);
    for f in 0..(n - 1) / FENCE {
        buf[HDR + n - 1 + f] = buf[HDR + f * FENCE + FENCE - 1];
    }
    {
        // SAFETY: u64 is at least as aligned as u32, and every bit pattern is valid for both.
        let (_, u32s, _) = unsafe { buf.align_to_mut::<u32>() };
        let (v0, v1) = (v0 * 2, v1 * 2);
        u32s.copy_within(v0..v0 + i, v1);
        u32s.copy_within(v0 + i + 1..v0 + n, v1 + i);
        let (e0, e1) = (e0 * 2, e1 * 2);
        u32s.copy_within(e0..e0 + i, e1);
        u32s.copy_within(e0 + i + 1..e0 + n, e1 + i);
        for e in &mut u32s[e1 + i..e1 + n - 1] {
            *e -= k as u32;
        }
        if n % 2 == 0 {
            // The odd count's unused last u32 of each array.
            u32s[v1 + n - 1] = 0;
            u32s[e1 + n - 1] = 0;
        }
    }
    {
        // SAFETY: as above, for u8.
        let (_, bytes, _) = unsafe { buf.align_to_mut::<u8>() };
        let (h0, h1) = (h0 * 8, h1 * 8);
        bytes.copy_within(h0..h0 + start, h1);
        bytes.copy_within(h0 + end..h0 + heap_len, h1 + start);
        bytes[h1 + heap_len - k..t1 * 8].fill(0);
    }
    // An inner run's children's addresses went with the tail; `Inner::sync` writes them anew.
    buf.truncate(t1);
    buf[0] = header(n - 1, heap_len - k, None)[0];
}

impl KeysBuf {
    #[inline]
    fn new(buf: &[u64]) -> &KeysBuf {
        // SAFETY: KeysBuf is a transparent wrapper of [u64].
        unsafe { &*(buf as *const [u64] as *const KeysBuf) }
    }

    /// The run whose buffer starts at `at`.
    ///
    /// # Safety
    /// `at` must be the start of a live run's buffer ([`Keys::buf`]) that is neither changed
    /// nor freed while the returned reference lives.
    #[inline]
    unsafe fn at<'a>(at: *const u64) -> &'a KeysBuf {
        // SAFETY: the caller's promise: the header words and everything the header counts are
        // initialised words of the buffer (an inner run's children included, `Inner::sync`).
        unsafe {
            let head = KeysBuf::new(std::slice::from_raw_parts(at, HDR));
            let n = head.tail() + if head.is_inner() { head.len() + 1 } else { 0 };
            KeysBuf::new(std::slice::from_raw_parts(at, n))
        }
    }

    /// Whether the run is an inner node's separators (followed by its children).
    #[inline]
    fn is_inner(&self) -> bool {
        self.0[1] & INNER != 0
    }

    #[inline]
    fn shared(&self) -> Option<u32> {
        (self.0[1] & SHARED != 0).then_some(self.0[1] as u32)
    }

    /// Where the key heap ends (an inner node's children start).
    #[inline]
    fn tail(&self) -> usize {
        HDR + self.len() + self.len() / FENCE + 2 * self.len().div_ceil(2) + self.heap_len().div_ceil(8)
    }

    /// The buffer of an inner node's child `c`.
    #[inline]
    fn child(&self, c: usize) -> *const u64 {
        debug_assert!(self.is_inner());
        self.0[self.tail() + c] as usize as *const u64
    }

    #[inline]
    fn len(&self) -> usize {
        self.0[0] as u32 as usize
    }

    /// Bytes of key heap.
    fn heap_len(&self) -> usize {
        (self.0[0] >> 32) as usize
    }

    #[inline]
    fn words(&self) -> &[u64] {
        &self.0[HDR..HDR + self.len()]
    }

    #[inline]
    fn fences(&self) -> &[u64] {
        &self.0[HDR + self.len()..HDR + self.len() + self.len() / FENCE]
    }

    /// The `n` `u32`s that start at word `at` of the buffer.
    #[inline]
    fn u32s(&self, at: usize, n: usize) -> &[u32] {
        let words = &self.0[at..at + n.div_ceil(2)];
        // SAFETY: u64 is at least as aligned as u32 (so the prefix is empty) and every bit
        // pattern is a valid u32; `Parts::pack` stored the u32s in native byte order.
        let (head, mid, _) = unsafe { words.align_to::<u32>() };
        debug_assert!(head.is_empty());
        &mid[..n]
    }

    #[inline]
    fn values(&self) -> &[u32] {
        self.u32s(HDR + self.len() + self.len() / FENCE, self.len())
    }

    #[inline]
    fn ends(&self) -> &[u32] {
        self.u32s(HDR + self.len() + self.len() / FENCE + self.len().div_ceil(2), self.len())
    }

    #[inline]
    fn heap(&self) -> &[u8] {
        let at = HDR + self.len() + self.len() / FENCE + 2 * self.len().div_ceil(2);
        // SAFETY: u8 has alignment 1 and every bit pattern is valid; `Parts::pack` stored the
        // heap's bytes in memory order (native byte order of each word).
        let (_, bytes, _) = unsafe { self.0[at..].align_to::<u8>() };
        &bytes[..self.heap_len()]
    }

    #[inline]
    fn value(&self, i: usize) -> u32 {
        self.values()[i]
    }

    fn parts(&self) -> Parts {
        Parts {
            shared: self.shared(),
            words: self.words().to_vec(),
            values: self.values().to_vec(),
            ends: self.ends().to_vec(),
            heap: self.heap().to_vec(),
        }
    }

    #[inline]
    fn word(&self, owner: u32, key: &[u8]) -> u64 {
        match self.shared() {
            Some(_) => prefix8(key),
            None => search_word(owner, key),
        }
    }

    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        let ends = self.ends();
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        &self.heap()[start..ends[i] as usize]
    }

    #[inline]
    fn owner(&self, i: usize) -> u32 {
        match self.shared() {
            Some(o) => o,
            None => (self.words()[i] >> 32) as u32,
        }
    }

    #[inline]
    fn get(&self, i: usize) -> (u32, &[u8]) {
        (self.owner(i), self.key(i))
    }

    /// The number of keys for which `before` holds (it must hold for a prefix of them).
    #[inline]
    fn partition(&self, mut before: impl FnMut(u32, &[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (o, k) = self.get(mid);
            if before(o, k) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The number of keys below `(owner, key)` (`or_equal`: at or below): a binary search on
    /// the search words, comparing key bytes only where the words tie.
    #[inline]
    fn search(&self, owner: u32, key: &[u8], or_equal: bool) -> usize {
        if let Some(o) = self.shared() {
            if owner != o {
                return if owner < o { 0 } else { self.len() };
            }
        }
        let word = self.word(owner, key);
        let words = self.words();
        // Branch-free over the fences, then over one block of words (a mispredicted branch
        // per step cost more than the step), then by key bytes among the keys whose word ties,
        // if any.
        let block = words_below(self.fences(), word) * FENCE;
        let mut lo = block + words_below(&words[block..(block + FENCE).min(words.len())], word);
        if lo < words.len() && words[lo] == word {
            let mut hi = lo + words[lo..].partition_point(|&w| w == word);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let before = match cmp_bytes(self.key(mid), key) {
                    Ordering::Less => true,
                    Ordering::Equal => or_equal,
                    Ordering::Greater => false,
                };
                if before {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
        }
        lo
    }

    /// Whether key `i` is `(owner, key)`.
    #[inline]
    fn is(&self, i: usize, owner: u32, key: &[u8]) -> bool {
        i < self.len()
            && self.owner(i) == owner
            && self.words()[i] == self.word(owner, key)
            && cmp_bytes(self.key(i), key) == Ordering::Equal
    }
}

impl Keys {
    fn insert(&mut self, i: usize, owner: u32, key: &[u8], value: u32) {
        if self.len() > 0 && self.shared().is_some_and(|o| o != owner) || self.len() == 0 {
            // A change of form (the first key, or a second owner): through the parts.
            let mut p = self.parts();
            p.insert(i, owner, key, value);
            *self = p.pack();
            return;
        }
        let word = self.word(owner, key);
        let (n, heap_len) = (self.len(), self.heap_len());
        let start = if i == 0 { 0 } else { self.ends()[i - 1] as usize };
        self.buf.edit(|buf| insert_in_place(buf, (n, heap_len), i, (word, value, key), start));
    }

    fn set_value(&mut self, i: usize, value: u32) -> u32 {
        let at = HDR + self.len() + self.len() / FENCE;
        let n = self.len().div_ceil(2);
        self.buf.edit(|buf| {
            let words = &mut buf[at..at + n];
            // SAFETY: as in `u32s`: an aligned, valid view of the values in native byte order.
            let (_, values, _) = unsafe { words.align_to_mut::<u32>() };
            std::mem::replace(&mut values[i], value)
        })
    }

    /// Gives key `i` the key `key` (of `owner`, the key's own, and as long as key `i`) and
    /// `value`, and moves it to position `t` (counted without it): only the parts between the
    /// two positions move, where a removal and an insertion would each move the whole run.
    /// The caller has checked that `t` keeps the run in order. Returns the old value.
    fn move_within(&mut self, i: usize, t: usize, owner: u32, key: &[u8], value: u32) -> u32 {
        let (n, heap_len, k) = (self.len(), self.heap_len(), key.len());
        let ends = self.ends();
        let start_of = |p: usize| if p == 0 { 0 } else { ends[p - 1] as usize };
        let (old_start, start_t, end_t) = (start_of(i), start_of(t), ends[t] as usize);
        assert!(i < n && t < n && ends[i] as usize - old_start == k, "a move of a key of one length within the run");
        let (word, was) = (self.word(owner, key), self.value(i));
        let [v0, e0, h0, _] = layout(n, heap_len);
        self.buf.edit(|buf| {
            if i < t {
                buf.copy_within(HDR + i + 1..HDR + t + 1, HDR + i);
            } else {
                buf.copy_within(HDR + t..HDR + i, HDR + t + 1);
            }
            buf[HDR + t] = word;
            for f in 0..n / FENCE {
                buf[HDR + n + f] = buf[HDR + f * FENCE + FENCE - 1];
            }
            {
                // SAFETY: as in `insert_in_place`: u32s in native byte order.
                let (_, u32s, _) = unsafe { buf.align_to_mut::<u32>() };
                let (v, e) = (v0 * 2, e0 * 2);
                if i < t {
                    // Keys i+1..=t move down one place and k bytes; the moved key ends where
                    // key t ended.
                    u32s.copy_within(v + i + 1..v + t + 1, v + i);
                    for p in i..t {
                        u32s[e + p] = u32s[e + p + 1] - k as u32;
                    }
                } else {
                    // Keys t..i move up one place and k bytes; the moved key starts where key
                    // t started.
                    u32s.copy_within(v + t..v + i, v + t + 1);
                    for p in (t + 1..=i).rev() {
                        u32s[e + p] = u32s[e + p - 1] + k as u32;
                    }
                    u32s[e + t] = (start_t + k) as u32;
                }
                u32s[v + t] = value;
            }
            // SAFETY: u8 has alignment 1 and every bit pattern is valid.
            let (_, bytes, _) = unsafe { buf.align_to_mut::<u8>() };
            let h = h0 * 8;
            if i < t {
                bytes.copy_within(h + old_start + k..h + end_t, h + old_start);
                bytes[h + end_t - k..h + end_t].copy_from_slice(key);
            } else {
                bytes.copy_within(h + start_t..h + old_start, h + start_t + k);
                bytes[h + start_t..h + start_t + k].copy_from_slice(key);
            }
        });
        was
    }

    /// Removes key `i`; returns its value.
    fn remove(&mut self, i: usize) -> u32 {
        let ends = self.ends();
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        let (end, value) = (ends[i] as usize, self.value(i));
        let (n, heap_len) = (self.len(), self.heap_len());
        self.buf.edit(|buf| remove_in_place(buf, (n, heap_len), i, start..end));
        value
    }

    /// Moves keys `at..` into a new run.
    fn split_off(&mut self, at: usize) -> Keys {
        let mut p = self.parts();
        let start = if at == 0 { 0 } else { p.ends[at - 1] as usize };
        let right = Parts {
            shared: p.shared,
            words: p.words.split_off(at),
            values: p.values.split_off(at),
            ends: p.ends.split_off(at).into_iter().map(|e| e - start as u32).collect(),
            heap: p.heap.split_off(start),
        };
        *self = p.pack();
        right.pack()
    }

    /// Appends `(owner, key, value)` items (in order, after every key of the run).
    fn extend<'a>(&mut self, items: impl IntoIterator<Item = (u32, &'a [u8], u32)>) {
        let mut p = self.parts();
        for (owner, key, value) in items {
            let n = p.words.len();
            p.insert(n, owner, key, value);
        }
        *self = p.pack();
    }

    fn append(&mut self, other: &Keys) {
        self.extend((0..other.len()).map(|i| (other.owner(i), other.key(i), other.value(i))));
    }
}

/// A leaf: its keys with the entry rows as their values.
#[derive(Clone)]
struct Leaf {
    keys: Keys,
}

#[derive(Clone)]
struct Inner {
    /// `seps.get(i)` is ≤ every key under `children[i + 1]` and > every key under
    /// `children[..=i]`.
    seps: Keys,
    children: Vec<Arc<Node>>,
    /// Entries under each child.
    counts: Vec<u64>,
}

#[derive(Clone)]
enum Node {
    Leaf(Leaf),
    Inner(Inner),
}

impl Inner {
    /// After an entry was removed under child `c`: its count, the rebalancing, the children's
    /// addresses.
    fn removed_under(&mut self, c: usize) {
        self.counts[c] -= 1;
        rebalance(self, c);
        self.sync();
    }

    /// Writes child `c`'s buffer address after an insert or remove under it moved the buffer
    /// (and changed nothing else of this node's).
    fn sync_child(&mut self, c: usize) {
        let at = self.seps.tail() + c;
        let address = self.children[c].keys().buf.as_slice().as_ptr() as usize as u64;
        if self.seps.buf.as_slice()[at] != address {
            self.seps.buf.edit(|buf| buf[at] = address);
        }
    }

    /// Writes the children's buffer addresses after the separators (and marks the run as an
    /// inner node's): after every change to the separators, the children or a child's buffer.
    fn sync(&mut self) {
        let tail = self.seps.tail();
        let children = &self.children;
        self.seps.buf.edit(|buf| {
            buf.truncate(tail);
            buf.extend(children.iter().map(|c| c.keys().buf.as_slice().as_ptr() as usize as u64));
            buf[1] |= INNER;
        });
    }
}

impl Node {
    /// The node's run: a leaf's keys, an inner node's separators.
    #[inline]
    fn keys(&self) -> &Keys {
        match self {
            Node::Leaf(l) => &l.keys,
            Node::Inner(n) => &n.seps,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Node::Leaf(l) => l.keys.len() * LEAF_ENTRY + l.keys.heap_len(),
            Node::Inner(n) => n.children.len() * INNER_ENTRY + n.seps.heap_len(),
        }
    }

    fn count(&self) -> u64 {
        match self {
            Node::Leaf(l) => l.keys.len() as u64,
            Node::Inner(n) => n.counts.iter().sum(),
        }
    }
}

/// The shortest separator `s` with `left < s ≤ right` (owner first, then bytes): an inner
/// node stores it in place of `right`, so that it holds more children.
fn separator(left: (u32, &[u8]), right: (u32, &[u8])) -> (u32, Vec<u8>) {
    if left.0 != right.0 {
        return (right.0, Vec::new());
    }
    // The shortest prefix of `right` that is greater than `left`.
    let common = left.1.iter().zip(right.1).take_while(|(a, b)| a == b).count();
    (right.0, right.1[..(common + 1).min(right.1.len())].to_vec())
}

/// What a node gives its parent after an insert: the separator and the new right sibling.
type Split = Option<(u32, Vec<u8>, Arc<Node>)>;

/// Where a node that just took an item at `inserted` splits: in the middle by bytes, unless
/// the item went into its last quarter: then right before the item, so that appends (loads in
/// key order, new rows of the last owner) leave full nodes behind instead of half-full ones.
fn split_at(n: usize, inserted: usize, size: impl Fn(usize) -> usize) -> usize {
    if inserted * 4 >= n * 3 {
        inserted.clamp(1, n - 1)
    } else {
        split_point(n, size)
    }
}

fn split_leaf(leaf: &mut Leaf, inserted: usize) -> (u32, Vec<u8>, Arc<Node>) {
    let at = split_at(leaf.keys.len(), inserted, |i| LEAF_ENTRY + leaf.keys.key(i).len());
    let keys = leaf.keys.split_off(at);

    let (owner, sep) = separator(leaf.keys.get(at - 1), keys.get(0));
    (owner, sep, Arc::new(Node::Leaf(Leaf { keys })))
}

fn split_inner(inner: &mut Inner, inserted: usize) -> (u32, Vec<u8>, Arc<Node>) {
    // Children `..at` stay; separator `at - 1` moves up; each side keeps two children.
    let n = inner.children.len();
    let at =
        split_at(n, inserted, |i| INNER_ENTRY + if i == 0 { 0 } else { inner.seps.key(i - 1).len() }).clamp(2, n - 2);
    let mut seps = inner.seps.split_off(at - 1);
    let (owner, sep) = (seps.get(0).0, seps.key(0).to_vec());
    seps.remove(0);
    let children = inner.children.split_off(at);
    let counts = inner.counts.split_off(at);
    inner.sync();
    let mut right = Inner { seps, children, counts };
    right.sync();
    (owner, sep, Arc::new(Node::Inner(right)))
}

/// Where to split `n` items of the given sizes so that both halves hold about half the bytes
/// and each at least one item.
fn split_point(n: usize, size: impl Fn(usize) -> usize) -> usize {
    debug_assert!(n >= 2);
    let total: usize = (0..n).map(&size).sum();
    let mut acc = 0;
    for i in 0..n {
        acc += size(i);
        if acc * 2 >= total {
            return (i + 1).clamp(1, n - 1);
        }
    }
    n - 1
}

/// Inserts into the subtree; returns the row the key had (if any) and the node's split.
fn insert(node: &mut Arc<Node>, owner: u32, key: &[u8], row: u32) -> (Option<u32>, Split) {
    match Arc::make_mut(node) {
        Node::Leaf(leaf) => {
            let i = leaf.keys.search(owner, key, false);
            if leaf.keys.is(i, owner, key) {
                return (Some(leaf.keys.set_value(i, row)), None);
            }
            leaf.keys.insert(i, owner, key, row);
            let full = leaf.keys.len() >= 2 && leaf.keys.len() * LEAF_ENTRY + leaf.keys.heap_len() > NODE_BYTES;
            (None, if full { Some(split_leaf(leaf, i)) } else { None })
        }
        Node::Inner(inner) => {
            let c = inner.seps.search(owner, key, true);
            let (old, split) = insert(&mut inner.children[c], owner, key, row);
            if old.is_none() {
                inner.counts[c] += 1;
            }
            let mut inserted = c;
            if let Some((sep_owner, sep, right)) = split {
                inserted = c + 1;
                let right_count = right.count();
                inner.counts[c] -= right_count;
                inner.seps.insert(c, sep_owner, &sep, 0);
                inner.children.insert(c + 1, right);
                inner.counts.insert(c + 1, right_count);
                inner.sync();
            } else {
                inner.sync_child(c);
            }
            // At least two children stay on each side (a node of a few very long
            // separators may exceed NODE_BYTES).
            let full =
                inner.children.len() >= 4 && inner.children.len() * INNER_ENTRY + inner.seps.heap_len() > NODE_BYTES;
            (old, if full { Some(split_inner(inner, inserted)) } else { None })
        }
    }
}

/// Removes `(owner, key)`, which is in the subtree; returns its row.
fn remove_present(node: &mut Arc<Node>, owner: u32, key: &[u8]) -> u32 {
    match Arc::make_mut(node) {
        Node::Leaf(leaf) => {
            let i = leaf.keys.search(owner, key, false);
            debug_assert!(leaf.keys.is(i, owner, key), "remove_present of a missing key");
            leaf.keys.remove(i)
        }
        Node::Inner(inner) => {
            let c = inner.seps.search(owner, key, true);
            let old = remove_present(&mut inner.children[c], owner, key);
            inner.removed_under(c);
            old
        }
    }
}

/// What [`move_in_leaf`] did.
enum Moved {
    /// The old key's entry now has the new key, in the same leaf; the row the old key held.
    InPlace(u32),
    /// The old key is not in the index: nothing changed.
    Missing,
    /// The old key's entry was removed (the row it held), and the tree rebalanced as after a
    /// removal; the new key belongs at an edge of the leaf or beyond it, is already there, or
    /// would overfill the leaf: the caller inserts it.
    Removed(u32),
}

/// Removes the entry `(owner, old)` if the subtree has it, and gives its leaf the key
/// `new` with row `row` when that key falls strictly between two other keys of the leaf (then
/// it can belong to no other leaf): one descent, the entry counts unchanged, no rebalancing.
/// Schema index entries move so when a node's indexed value changes by a little (OO7's T3c
/// toggles build dates). Otherwise the removal is done as [`remove_present`] does it, and the
/// caller inserts the new key.
fn move_in_leaf(node: &mut Arc<Node>, owner: u32, old: &[u8], new: &[u8], row: u32) -> Moved {
    match Arc::make_mut(node) {
        Node::Leaf(leaf) => {
            let keys = &mut leaf.keys;
            let n = keys.len();
            let i = keys.search(owner, old, false);
            if !keys.is(i, owner, old) {
                return Moved::Missing;
            }
            let j = keys.search(owner, new, false);
            // Below the old key: a smaller key of the leaf precedes the new one; above it: a
            // larger one follows. The old key bounds the other side.
            let inside = if j <= i { j >= 1 } else { j < n };
            let here = inside && !keys.is(j, owner, new);
            let t = if j <= i { j } else { j - 1 };
            if here && new.len() == old.len() {
                return Moved::InPlace(keys.move_within(i, t, owner, new, row));
            }
            let heap = keys.heap_len() - old.len() + new.len();
            let was = keys.remove(i);
            if !here || n * LEAF_ENTRY + heap > NODE_BYTES {
                return Moved::Removed(was);
            }
            keys.insert(t, owner, new, row);
            Moved::InPlace(was)
        }
        Node::Inner(inner) => {
            let c = inner.seps.search(owner, old, true);
            let moved = move_in_leaf(&mut inner.children[c], owner, old, new, row);
            match moved {
                Moved::Removed(_) => inner.removed_under(c),
                // The child may be a copy, or its buffer may have grown: its address is
                // rewritten.
                Moved::InPlace(_) | Moved::Missing => inner.sync_child(c),
            }
            moved
        }
    }
}

/// After a removal under child `c`: drops it if empty, or merges it with a neighbour when
/// both fit in one node.
fn rebalance(inner: &mut Inner, c: usize) {
    if inner.counts[c] == 0 && inner.children.len() > 1 {
        inner.children.remove(c);
        inner.counts.remove(c);
        inner.seps.remove(c.saturating_sub(1));
        return;
    }
    if inner.children[c].bytes() * 4 > NODE_BYTES || inner.children.len() < 2 {
        return;
    }
    let (left, right) = if c + 1 < inner.children.len() { (c, c + 1) } else { (c - 1, c) };
    let (sep_owner, sep) = {
        let (o, k) = inner.seps.get(left);
        (o, k.to_vec())
    };
    let fits = match (&*inner.children[left], &*inner.children[right]) {
        (Node::Leaf(_), Node::Leaf(_)) => inner.children[left].bytes() + inner.children[right].bytes() <= NODE_BYTES,
        (Node::Inner(_), Node::Inner(_)) => {
            inner.children[left].bytes() + inner.children[right].bytes() + INNER_ENTRY + sep.len() <= NODE_BYTES
        }
        _ => false,
    };
    if !fits {
        return;
    }
    let right_node = inner.children.remove(right);
    let right_count = inner.counts.remove(right);
    inner.seps.remove(left);
    inner.counts[left] += right_count;
    match (Arc::make_mut(&mut inner.children[left]), &*right_node) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            l.keys.append(&r.keys);
        }
        (Node::Inner(l), Node::Inner(r)) => {
            l.seps.extend([(sep_owner, &sep[..], 0)]);
            l.seps.append(&r.seps);
            l.children.extend(r.children.iter().cloned());
            l.counts.extend_from_slice(&r.counts);
            l.sync();
        }
        _ => unreachable!("siblings are at the same depth"),
    }
}

#[inline]
fn get(mut node: &Node, owner: u32, key: &[u8]) -> Option<u32> {
    loop {
        match node {
            Node::Leaf(leaf) => {
                let i = leaf.keys.search(owner, key, false);
                return leaf.keys.is(i, owner, key).then(|| leaf.keys.value(i));
            }
            Node::Inner(inner) => {
                let c = inner.seps.search(owner, key, true);
                node = &inner.children[c];
            }
        }
    }
}

/// The number of entries for which `before` holds (a prefix of the order).
fn rank(mut node: &Node, mut before: impl FnMut(u32, &[u8]) -> bool) -> u64 {
    let mut n = 0;
    loop {
        match node {
            Node::Leaf(leaf) => return n + leaf.keys.partition(&mut before) as u64,
            Node::Inner(inner) => {
                let c = inner.seps.partition(&mut before);
                n += inner.counts[..c].iter().sum::<u64>();
                node = &inner.children[c];
            }
        }
    }
}

fn disk_bytes(node: &Node) -> u64 {
    // A node on disk: a 16-byte header and its entries (as `Node::bytes` counts them).
    let own = 16 + node.bytes() as u64;
    match node {
        Node::Leaf(_) => own,
        Node::Inner(inner) => own + inner.children.iter().map(|c| disk_bytes(c)).sum::<u64>(),
    }
}

/// One version of a key index. Published versions are immutable and shared as `Arc`s.
#[derive(Clone, Default)]
pub struct KeyIndex {
    root: Option<Arc<Node>>,
    /// The root's buffer's address (0 without a root): a lookup starts there, one load
    /// sooner than through the root's `Arc`.
    root_buf: usize,
    len: u64,
    version: u64,
}

impl fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyIndex").field("len", &self.len).field("version", &self.version).finish()
    }
}

/// One entry of a key index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The row of the node that holds the collection.
    pub owner: u32,
    /// The entry's key bytes.
    pub key: &'a [u8],
    /// The entry's row.
    pub row: u32,
}

impl KeyIndex {
    /// An empty index.
    pub fn new() -> KeyIndex {
        KeyIndex::default()
    }

    /// The entry row under `(owner, key)`.
    #[inline]
    pub fn get(&self, owner: u32, key: &[u8]) -> Option<u32> {
        let mut node = self.root_run()?;
        loop {
            if node.is_inner() {
                let c = node.search(owner, key, true);
                // SAFETY: an inner run's children addresses are its children's buffers
                // (`Inner::sync` after every change), which this version keeps alive and
                // never changes.
                node = unsafe { KeysBuf::at(node.child(c)) };
            } else {
                let i = node.search(owner, key, false);
                return node.is(i, owner, key).then(|| node.value(i));
            }
        }
    }

    /// The root's run, read in place.
    #[inline]
    fn root_run(&self) -> Option<&KeysBuf> {
        if self.root_buf == 0 {
            return None;
        }
        debug_assert_eq!(self.root_buf, self.root.as_ref().map_or(0, |r| r.keys().buf.as_slice().as_ptr() as usize));
        // SAFETY: `root_buf` is the root's buffer (`sync_root` after every change), kept alive
        // and unchanged by `self.root` while `&self` lives.
        Some(unsafe { KeysBuf::at(self.root_buf as *const u64) })
    }

    /// Records the root's buffer's address, after every change to the tree.
    fn sync_root(&mut self) {
        self.root_buf = self.root.as_ref().map_or(0, |r| r.keys().buf.as_slice().as_ptr() as usize);
    }

    /// Entries in the whole index.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The publish count this version was made at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The number of `owner`'s entries (one descent per bound).
    pub fn count(&self, owner: u32) -> u64 {
        self.count_prefix(owner, &[])
    }

    /// The number of `owner`'s entries whose key starts with `prefix`.
    pub fn count_prefix(&self, owner: u32, prefix: &[u8]) -> u64 {
        let Some(root) = self.root.as_deref() else { return 0 };
        let below = rank(root, |o, k| cmp_key(o, k, owner, prefix) == Ordering::Less);
        let upto =
            rank(root, |o, k| cmp_key(o, k, owner, prefix) == Ordering::Less || (o == owner && k.starts_with(prefix)));
        upto - below
    }

    /// `owner`'s entries in key order.
    pub fn entries(&self, owner: u32) -> Range<'_> {
        self.seek(owner, &[], Bound::Owner(owner))
    }

    /// `owner`'s entries whose key starts with `prefix`, in key order.
    pub fn prefix<'a>(&'a self, owner: u32, prefix: &'a [u8]) -> Range<'a> {
        self.seek(owner, prefix, Bound::Prefix(owner, prefix))
    }

    /// `owner`'s entries from the first key ≥ `from` on, in key order (the next page of a
    /// collection after the key `from`, say).
    pub fn entries_from(&self, owner: u32, from: &[u8]) -> Range<'_> {
        self.seek(owner, from, Bound::Owner(owner))
    }

    /// `owner`'s entries with a key from `from` (inclusive) to `below` (exclusive; `None`:
    /// to the owner's last), in key order. The bound is found once in each leaf, not compared
    /// with every key (a schema index's range read).
    pub fn between<'a>(&'a self, owner: u32, from: &[u8], below: Option<&'a [u8]>) -> Range<'a> {
        let bound = match below {
            Some(end) => Bound::Below(owner, end),
            None => Bound::Owner(owner),
        };
        self.seek(owner, from, bound)
    }

    /// Every entry, in order.
    pub fn iter(&self) -> Range<'_> {
        self.seek(0, &[], Bound::None)
    }

    /// A cursor at the first entry ≥ (owner, key), reading while `bound` holds.
    fn seek<'a>(&'a self, owner: u32, key: &[u8], bound: Bound<'a>) -> Range<'a> {
        let root = self.root_run();
        let found = root.and_then(|r| leaf_at(r, owner, key, true));
        Range {
            root,
            leaf: found.map(|(l, _)| LeafView::of(l)),
            i: found.map_or(0, |(_, i)| i),
            stop: stop_in(bound, found.map(|(l, _)| l)),
            bound,
        }
    }

    /// Bytes the index would take on disk: every node's entries and a small header each.
    pub fn disk_bytes(&self) -> u64 {
        self.root.as_deref().map_or(0, disk_bytes)
    }

    /// Nodes from the root to a leaf (0 when empty).
    pub fn depth(&self) -> usize {
        let mut depth = 0;
        let mut node = self.root.as_deref();
        while let Some(n) = node {
            depth += 1;
            node = match n {
                Node::Leaf(_) => None,
                Node::Inner(inner) => Some(&inner.children[0]),
            };
        }
        depth
    }
}

#[derive(Clone, Copy)]
enum Bound<'a> {
    None,
    Owner(u32),
    Prefix(u32, &'a [u8]),
    /// The owner's keys below this one; `Range::stop` holds where they end in the leaf.
    Below(u32, &'a [u8]),
}

/// A leaf of a key index as a checkpoint writes it: its buffer, and where it already lies in a
/// checkpoint file if it is mapped from one.
#[derive(Debug, Clone, Copy)]
pub struct LeafImage<'a> {
    /// The leaf's buffer (native byte order), as [`check_leaf`] reads it back.
    pub words: &'a [u64],
    /// Where it lies in a checkpoint file, if it is mapped from one.
    pub place: Option<FilePlace>,
}

/// What recovery learnt of a checkpoint's leaf while verifying it ([`check_leaf`]), so that
/// the tree above the leaves is built without reading them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSummary {
    first: (u32, Vec<u8>),
    last: (u32, Vec<u8>),
    count: u64,
}

/// Checks that `words` are a well-formed leaf, as [`KeyIndex::leaves`] gave it: the counts
/// in its header within the buffer, its key ends in order, its search words and fences those
/// of its keys, its keys strictly increasing and after `after`'s (the previous leaf's). A
/// leaf that passes can be read in place without reading past its buffer.
pub fn check_leaf(words: &[u64], after: Option<&LeafSummary>) -> Result<LeafSummary, String> {
    if words.len() < HDR {
        return Err(format!("a leaf of {} words", words.len()));
    }
    let run = KeysBuf::new(words);
    if run.is_inner() {
        return Err("an inner node where a leaf belongs".into());
    }
    let (len, heap_len) = (run.len(), run.heap_len());
    let tail = len
        .checked_add(len / FENCE)
        .and_then(|n| n.checked_add(2 * len.div_ceil(2)))
        .and_then(|n| n.checked_add(heap_len.div_ceil(8)))
        .and_then(|n| n.checked_add(HDR));
    if len == 0 || tail != Some(words.len()) {
        return Err(format!("a leaf header of {len} keys and {heap_len} key bytes in {} words", words.len()));
    }
    let ends = run.ends();
    if ends.windows(2).any(|w| w[0] > w[1]) || ends[len - 1] as usize != heap_len {
        return Err("key ends out of order".into());
    }
    // A search word that is not its key's would make lookups miss it (the fuzzer's
    // `checkpoint_load` found one); the fences are the words' (compared after packing).
    if (0..len).any(|i| run.words()[i] != run.word(run.owner(i), run.key(i))) {
        return Err("search words that do not match the keys".into());
    }
    if Parts::pack(run.parts()).buf.as_slice() != words {
        return Err("fences or padding that do not match the keys".into());
    }
    if let Some(prev) = after {
        let (o, k) = run.get(0);
        if cmp_key(prev.last.0, &prev.last.1, o, k) != Ordering::Less {
            return Err("keys not after the previous leaf's".into());
        }
    }
    for i in 1..len {
        let ((a, ka), (b, kb)) = (run.get(i - 1), run.get(i));
        if cmp_key(a, ka, b, kb) != Ordering::Less {
            return Err(format!("keys {} and {i} out of order", i - 1));
        }
    }
    let (fo, fk) = run.get(0);
    let (lo, lk) = run.get(len - 1);
    Ok(LeafSummary { first: (fo, fk.to_vec()), last: (lo, lk.to_vec()), count: len as u64 })
}

/// Where a checkpoint wrote a copy of a leaf in its file: the offset, the length in words and
/// the crc32c of the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafCopy {
    /// Where the copy starts in the file.
    pub offset: usize,
    /// Its length in words.
    pub words: usize,
    /// Its crc32c.
    pub crc: u32,
}

/// A checkpoint's leaf to build an index of: its buffer's place in a mapped file and what
/// [`check_leaf`] found.
pub struct MappedLeaf {
    /// The mapped file.
    pub owner: Arc<dyn StableBytes>,
    /// Where the leaf starts in it.
    pub offset: usize,
    /// The leaf's length in words.
    pub words: usize,
    /// The crc32c the checkpoint recorded.
    pub crc: u32,
    /// What `check_leaf` found.
    pub summary: LeafSummary,
}

/// A subtree being built from leaves, with its bounds.
struct Built {
    node: Arc<Node>,
    first: (u32, Vec<u8>),
    last: (u32, Vec<u8>),
    count: u64,
}

impl KeyIndex {
    /// The leaves in key order (for writing a checkpoint).
    pub fn leaves(&self) -> Vec<LeafImage<'_>> {
        fn walk<'a>(node: &'a Node, out: &mut Vec<LeafImage<'a>>) {
            match node {
                Node::Leaf(l) => out.push(LeafImage { words: l.keys.buf.as_slice(), place: l.keys.buf.file_place() }),
                Node::Inner(n) => n.children.iter().for_each(|c| walk(c, out)),
            }
        }
        let mut out = Vec::new();
        if let Some(root) = self.root.as_deref() {
            walk(root, &mut out);
        }
        out
    }

    /// Recovery: the index made of checked `leaves` in key order, read in place from their
    /// mappings; the nodes above them are built in memory from the leaves' summaries, without
    /// reading the leaves. `None` if a leaf's place lies outside its mapping.
    pub fn from_leaves(leaves: Vec<MappedLeaf>) -> Option<KeyIndex> {
        let mut level = Vec::with_capacity(leaves.len());
        let mut len = 0;
        for leaf in leaves {
            let buf = Words::mapped(leaf.owner, leaf.offset, leaf.words, leaf.crc)?;
            len += leaf.summary.count;
            let LeafSummary { first, last, count } = leaf.summary;
            level.push(Built { node: Arc::new(Node::Leaf(Leaf { keys: Keys { buf } })), first, last, count });
        }
        // Bounded by the height: each round divides the nodes by at least two.
        while level.len() > 1 {
            level = build_inner_level(level);
        }
        let mut index = KeyIndex { root: level.pop().map(|b| b.node), root_buf: 0, len, version: 0 };
        index.sync_root();
        Some(index)
    }
}

/// The inner nodes above `level` (two or more subtrees in key order): as many children per
/// node as fit in [`NODE_BYTES`], at least two each.
fn build_inner_level(level: Vec<Built>) -> Vec<Built> {
    let mut groups: Vec<(Vec<Built>, Vec<(u32, Vec<u8>)>, usize)> = Vec::new();
    for b in level {
        let fits = groups.last().map(|(children, _, bytes)| {
            let last = &children[children.len() - 1].last;
            let sep = separator((last.0, &last.1), (b.first.0, &b.first.1));
            let fits = children.len() < 2 || bytes + INNER_ENTRY + sep.1.len() <= NODE_BYTES;
            (fits, sep)
        });
        match fits {
            Some((true, sep)) => {
                let g = groups.last_mut().expect("a group");
                g.2 += INNER_ENTRY + sep.1.len();
                g.1.push(sep);
                g.0.push(b);
            }
            _ => groups.push((vec![b], Vec::new(), INNER_ENTRY)),
        }
    }
    // A last node of one child joins the one before it (which may then exceed NODE_BYTES by a
    // child, as a node of long separators may).
    if groups.len() > 1 && groups[groups.len() - 1].0.len() == 1 {
        let (mut children, _, _) = groups.pop().expect("two groups");
        let g = groups.last_mut().expect("a group");
        let b = children.pop().expect("one child");
        let last = &g.0[g.0.len() - 1].last;
        g.1.push(separator((last.0, &last.1), (b.first.0, &b.first.1)));
        g.0.push(b);
    }
    groups
        .into_iter()
        .map(|(children, seps, _)| {
            let mut keys = Keys::default();
            keys.extend(seps.iter().map(|(o, k)| (*o, &k[..], 0)));
            let first = children[0].first.clone();
            let last = children[children.len() - 1].last.clone();
            let counts: Vec<u64> = children.iter().map(|c| c.count).collect();
            let count = counts.iter().sum();
            let mut inner = Inner { seps: keys, children: children.into_iter().map(|c| c.node).collect(), counts };
            inner.sync();
            Built { node: Arc::new(Node::Inner(inner)), first, last, count }
        })
        .collect()
}

/// Entries of a key index in order, from a seek ([`KeyIndex::entries`], [`KeyIndex::prefix`]).
///
/// A cursor is a leaf and a place in it, not a path: when the leaf is done, the next one is
/// found by a descent from the root (once per few hundred entries), which keeps the cursor
/// small enough to move around for free.
pub struct Range<'a> {
    root: Option<&'a KeysBuf>,
    leaf: Option<LeafView<'a>>,
    i: usize,
    /// Entries of the leaf before this place are within a [`Bound::Below`]; the range ends
    /// here (`usize::MAX` for the other bounds, which are checked at each entry).
    stop: usize,
    bound: Bound<'a>,
}

/// Where a [`Bound::Below`] ends in `leaf` (`usize::MAX` for the other bounds).
#[inline]
fn stop_in(bound: Bound<'_>, leaf: Option<&KeysBuf>) -> usize {
    match (bound, leaf) {
        (Bound::Below(owner, end), Some(leaf)) => leaf.search(owner, end, false),
        _ => usize::MAX,
    }
}

/// A leaf's arrays, located once: a range reads entry after entry from them instead of
/// working out each array's place in the buffer for every entry (which cost more than the
/// reads themselves: `Range::next` and `KeysBuf::key` led a matrix walk's profile).
#[derive(Clone, Copy)]
struct LeafView<'a> {
    /// The shared owner, if the leaf has one (else each word holds its key's owner).
    shared: Option<u32>,
    words: &'a [u64],
    values: &'a [u32],
    ends: &'a [u32],
    heap: &'a [u8],
}

impl<'a> LeafView<'a> {
    #[inline]
    fn of(leaf: &'a KeysBuf) -> LeafView<'a> {
        let view = LeafView {
            shared: leaf.shared(),
            words: leaf.words(),
            values: leaf.values(),
            ends: leaf.ends(),
            heap: leaf.heap(),
        };
        debug_assert!(view.words.len() == view.values.len() && view.ends.len() == view.values.len());
        view
    }

    #[inline]
    fn len(&self) -> usize {
        self.values.len()
    }

    /// Entry `i` (below [`LeafView::len`]): its owner, key and row.
    #[inline]
    fn entry(&self, i: usize) -> (u32, &'a [u8], u32) {
        let owner = match self.shared {
            Some(o) => o,
            None => (self.words[i] >> 32) as u32,
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        (owner, &self.heap[start..self.ends[i] as usize], self.values[i])
    }
}

/// The leaf holding the first key after `(owner, key)` (`or_equal`: at or after), and its
/// place in it.
#[inline]
fn leaf_at<'a>(root: &'a KeysBuf, owner: u32, key: &[u8], or_equal: bool) -> Option<(&'a KeysBuf, usize)> {
    // SAFETY (every `KeysBuf::at` below): an inner run's children addresses are its
    // children's buffers (`Inner::sync`), kept alive and unchanged by the version `root`
    // belongs to, which outlives 'a.
    let mut node = root;
    // The subtree right of the descent's path, nearest first: where the next key is when the
    // leaf has none after the target.
    let mut right: Option<&'a KeysBuf> = None;
    loop {
        if node.is_inner() {
            let c = node.search(owner, key, true);
            if c < node.len() {
                // SAFETY: as above.
                right = Some(unsafe { KeysBuf::at(node.child(c + 1)) });
            }
            // SAFETY: as above.
            node = unsafe { KeysBuf::at(node.child(c)) };
        } else {
            let i = node.search(owner, key, !or_equal);
            if i < node.len() {
                return Some((node, i));
            }
            // Only the root leaf can be empty; the leftmost leaf of any other subtree has
            // entries.
            let mut node = right?;
            while node.is_inner() {
                // SAFETY: as above.
                node = unsafe { KeysBuf::at(node.child(0)) };
            }
            return (node.len() > 0).then_some((node, 0));
        }
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = Entry<'a>;

    /// The next entry of the leaf, inline; the move to the next leaf (once per few hundred
    /// entries) is out of line, so that the entry's path stays small where it is inlined.
    #[inline(always)]
    fn next(&mut self) -> Option<Entry<'a>> {
        let leaf = self.leaf.as_ref()?;
        if self.i >= leaf.len() {
            return self.next_leaf();
        }
        if self.i >= self.stop {
            self.leaf = None;
            return None;
        }
        let (owner, key, row) = leaf.entry(self.i);
        self.i += 1;
        let within = match self.bound {
            Bound::None | Bound::Below(..) => true,
            Bound::Owner(o) => owner == o,
            Bound::Prefix(o, p) => owner == o && key.starts_with(p),
        };
        if !within {
            self.leaf = None;
            return None;
        }
        Some(Entry { owner, key, row })
    }
}

impl<'a> Range<'a> {
    /// Fills `out` with the rows of the next entries, in order; returns how many (fewer than
    /// `out.len()` only at the range's end). Where the bound is known to hold for a leaf's
    /// entries (no bound, [`KeyIndex::between`]'s end found in the leaf, one owner's leaf),
    /// they are copied as one slice, without an entry's key; else entry by entry.
    pub fn next_rows(&mut self, out: &mut [u32]) -> usize {
        let mut n = 0;
        // Bounded: each turn fills at least one row or ends the range.
        while n < out.len() {
            let Some(leaf) = self.leaf.as_ref() else { break };
            let whole = match self.bound {
                Bound::None | Bound::Below(..) => true,
                Bound::Owner(o) => leaf.shared == Some(o),
                Bound::Prefix(..) => false,
            };
            let end = leaf.len().min(self.stop);
            if whole && self.i < end {
                let k = (end - self.i).min(out.len() - n);
                out[n..n + k].copy_from_slice(&leaf.values[self.i..self.i + k]);
                self.i += k;
                n += k;
                continue;
            }
            match self.next() {
                Some(e) => {
                    out[n] = e.row;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Moves to the leaf after the current one (a descent from the root) and reads its first
    /// entry; `None` past the last leaf.
    #[cold]
    #[inline(never)]
    fn next_leaf(&mut self) -> Option<Entry<'a>> {
        loop {
            let leaf = self.leaf?;
            if self.i < leaf.len() {
                // `next` reads this entry without coming back here.
                return self.next();
            }
            // The next leaf starts after the done one's last entry (a leaf is never empty).
            let (owner, key, _) = leaf.entry(leaf.len().checked_sub(1)?);
            match self.root.and_then(|root| leaf_at(root, owner, key, false)) {
                Some((next, i)) => {
                    self.leaf = Some(LeafView::of(next));
                    self.i = i;
                    self.stop = stop_in(self.bound, Some(next));
                }
                None => {
                    self.leaf = None;
                    return None;
                }
            }
        }
    }
}

/// The one writer of a key index: its private version, published as immutable `Arc`s.
#[derive(Debug, Default)]
pub struct KeyIndexWriter {
    current: KeyIndex,
}

impl KeyIndexWriter {
    /// An empty index.
    pub fn new() -> KeyIndexWriter {
        KeyIndexWriter::default()
    }

    /// The writer's version as it is now (what its own reads see).
    pub fn current(&self) -> &KeyIndex {
        &self.current
    }

    /// Puts `row` under `(owner, key)`; returns the row it replaced.
    pub fn insert(&mut self, owner: u32, key: &[u8], row: u32) -> Result<Option<u32>, KeyTooLong> {
        if key.len() > MAX_KEY_LEN {
            return Err(KeyTooLong { len: key.len() });
        }
        let root = self.current.root.get_or_insert_with(|| Arc::new(Node::Leaf(Leaf { keys: Keys::default() })));
        let (old, split) = insert(root, owner, key, row);
        if let Some((sep_owner, sep, right)) = split {
            let left = root.clone();
            let (left_count, right_count) = (left.count(), right.count());
            let mut seps = Keys::default();
            seps.extend([(sep_owner, &sep[..], 0)]);
            let mut inner = Inner { seps, children: vec![left, right], counts: vec![left_count, right_count] };
            inner.sync();
            *root = Arc::new(Node::Inner(inner));
        }
        self.current.sync_root();
        if old.is_none() {
            self.current.len += 1;
        }
        Ok(old)
    }

    /// Moves the entry `(owner, old)` to `(owner, new)` with `row`: the same as [`remove`]
    /// of the old key, then (if it was there) [`insert`] of the new one, in one descent when
    /// both keys belong in one leaf. Returns the row the old key held (`None`: it was not
    /// there, and nothing changed).
    ///
    /// [`remove`]: KeyIndexWriter::remove
    /// [`insert`]: KeyIndexWriter::insert
    pub fn move_key(&mut self, owner: u32, old: &[u8], new: &[u8], row: u32) -> Result<Option<u32>, KeyTooLong> {
        if new.len() > MAX_KEY_LEN {
            return Err(KeyTooLong { len: new.len() });
        }
        let Some(root) = self.current.root.as_mut() else { return Ok(None) };
        let moved = move_in_leaf(root, owner, old, new, row);
        self.current.sync_root();
        match moved {
            Moved::InPlace(was) => Ok(Some(was)),
            Moved::Missing => Ok(None),
            Moved::Removed(was) => {
                self.removed();
                self.insert(owner, new, row)?;
                Ok(Some(was))
            }
        }
    }

    /// Removes `(owner, key)`; returns the row it held.
    pub fn remove(&mut self, owner: u32, key: &[u8]) -> Option<u32> {
        let root = self.current.root.as_mut()?;
        // Look first: a miss must not copy the path.
        get(root, owner, key)?;
        let old = remove_present(root, owner, key);
        self.removed();
        Some(old)
    }

    /// After a removal: one entry fewer; lifts a root with one child, drops an empty one.
    fn removed(&mut self) {
        self.current.len -= 1;
        while let Some(root) = self.current.root.as_mut() {
            let only = match &**root {
                Node::Inner(inner) if inner.children.len() == 1 => inner.children[0].clone(),
                Node::Leaf(leaf) if leaf.keys.len() == 0 => {
                    self.current.root = None;
                    break;
                }
                _ => break,
            };
            *root = only;
        }
        self.current.sync_root();
    }

    /// Publishes the writer's version: the returned `Arc` never changes.
    pub fn publish(&mut self) -> Arc<KeyIndex> {
        Arc::new(self.publish_version())
    }

    /// [`KeyIndexWriter::publish`] without the `Arc` (the root is shared either way).
    pub fn publish_version(&mut self) -> KeyIndex {
        self.current.version += 1;
        self.current.clone()
    }

    /// Recovery: a writer that goes on from `index` ([`KeyIndex::from_leaves`]).
    pub fn from_index(index: KeyIndex) -> KeyIndexWriter {
        KeyIndexWriter { current: index }
    }

    /// Replaces the writer's leaves that are still those of `written` (the version a
    /// checkpoint wrote: the same leaves, unchanged since) by their mapped copies, so that
    /// their memory can go. `mapped` holds, for each leaf the checkpoint wrote (by its
    /// buffer's address in `written`), where its copy lies in `owner`, the mapped file. Inner
    /// nodes on the way are copied where a published version shares them. Returns the leaves
    /// swapped.
    pub fn swap_in_mapped(
        &mut self,
        written: &KeyIndex,
        owner: &Arc<dyn StableBytes>,
        mapped: &std::collections::HashMap<usize, LeafCopy>,
    ) -> usize {
        type Copies = std::collections::HashMap<usize, LeafCopy>;
        fn swap(node: &mut Arc<Node>, owner: &Arc<dyn StableBytes>, mapped: &Copies) -> usize {
            match &**node {
                Node::Leaf(l) => {
                    let Some(c) = mapped.get(&(l.keys.buf.as_slice().as_ptr() as usize)) else { return 0 };
                    let Some(buf) = Words::mapped(owner.clone(), c.offset, c.words, c.crc) else { return 0 };
                    *node = Arc::new(Node::Leaf(Leaf { keys: Keys { buf } }));
                    1
                }
                Node::Inner(_) => {
                    let Node::Inner(inner) = Arc::make_mut(node) else { unreachable!("matched an inner node") };
                    let n = inner.children.iter_mut().map(|c| swap(c, owner, mapped)).sum();
                    inner.sync();
                    n
                }
            }
        }
        // The addresses are those of `written`'s leaves, alive (and so not reused) while it is.
        let _ = written;
        let n = self.current.root.as_mut().map_or(0, |root| swap(root, owner, mapped));
        self.current.sync_root();
        n
    }

    /// Makes `version` (a savepoint: an earlier [`KeyIndexWriter::current`] cloned, or a
    /// published version) the writer's version again, undoing every change since. Constant
    /// time: the nodes are shared.
    pub fn rollback_to(&mut self, version: &KeyIndex) {
        self.current = version.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Model = BTreeMap<(u32, Vec<u8>), u32>;

    fn content(ix: &KeyIndex) -> Vec<(u32, Vec<u8>, u32)> {
        ix.iter().map(|e| (e.owner, e.key.to_vec(), e.row)).collect()
    }

    fn model_content(m: &Model) -> Vec<(u32, Vec<u8>, u32)> {
        m.iter().map(|((o, k), r)| (*o, k.clone(), *r)).collect()
    }

    /// Checks the tree's invariants: separators bound their children, counts are exact.
    fn check(node: &Node, lo: Option<(u32, Vec<u8>)>, hi: Option<(u32, Vec<u8>)>) -> u64 {
        let within = |o: u32, k: &[u8]| {
            lo.as_ref().is_none_or(|(lo_o, lo_k)| cmp_key(o, k, *lo_o, lo_k) != Ordering::Less)
                && hi.as_ref().is_none_or(|(hi_o, hi_k)| cmp_key(o, k, *hi_o, hi_k) == Ordering::Less)
        };
        match node {
            Node::Leaf(l) => {
                for i in 0..l.keys.len() {
                    let (o, k) = l.keys.get(i);
                    assert!(within(o, k));
                    if i > 0 {
                        let (po, pk) = l.keys.get(i - 1);
                        assert_eq!(cmp_key(po, pk, o, k), Ordering::Less);
                    }
                }
                l.keys.len() as u64
            }
            Node::Inner(n) => {
                assert_eq!(n.seps.len() + 1, n.children.len());
                let mut total = 0;
                for (c, child) in n.children.iter().enumerate() {
                    let clo = if c == 0 { lo.clone() } else { Some((n.seps.get(c - 1).0, n.seps.key(c - 1).to_vec())) };
                    let chi = if c + 1 == n.children.len() {
                        hi.clone()
                    } else {
                        Some((n.seps.get(c).0, n.seps.key(c).to_vec()))
                    };
                    let count = check(child, clo, chi);
                    assert_eq!(count, n.counts[c]);
                    assert!(count > 0);
                    total += count;
                }
                total
            }
        }
    }

    /// `check_leaf` passes the leaves an index writes and refuses one whose search word is
    /// not its key's, or whose keys are out of order with the leaf before; an index built
    /// from checked leaves finds every entry.
    #[test]
    fn checked_leaves_build_an_index_that_finds_every_entry() {
        let mut w = KeyIndexWriter::new();
        for i in 0..500u32 {
            w.insert(i % 3, format!("key {i}").as_bytes(), i + 1).unwrap();
        }
        let leaves: Vec<Vec<u64>> = w.current().leaves().iter().map(|l| l.words.to_vec()).collect();
        assert!(leaves.len() > 3);
        let mut summaries: Vec<LeafSummary> = Vec::new();
        for words in &leaves {
            summaries.push(check_leaf(words, summaries.last()).unwrap());
        }
        // Out of order: the second leaf after the last.
        assert!(check_leaf(&leaves[1], summaries.last()).unwrap_err().contains("after the previous"));
        let mut bad = leaves[0].clone();
        bad[HDR + 1] ^= 1 << 8;
        assert!(check_leaf(&bad, None).is_err());
        let mut two = KeyIndexWriter::new();
        two.insert(1, b"", 1).unwrap();
        two.insert(2, b"", 2).unwrap();
        let mut words = two.current().leaves()[0].words.to_vec();
        words[HDR + 1] |= 0x800; // a word whose low half is not the (empty) key's
        assert!(check_leaf(&words, None).unwrap_err().contains("search words"), "the fuzzer's case");
        // An index of the checked leaves, each in a buffer of its own, finds every entry.
        let bytes: Vec<u8> = leaves.iter().flat_map(|l| l.iter().flat_map(|w| w.to_ne_bytes())).collect();
        let owner: Arc<dyn StableBytes> = Arc::new(bytes.into_iter().collect::<Vec<u8>>());
        let mut at = 0;
        let mapped = leaves
            .iter()
            .zip(summaries)
            .map(|(l, summary)| {
                let leaf = MappedLeaf { owner: owner.clone(), offset: at, words: l.len(), crc: 0, summary };
                at += l.len() * 8;
                leaf
            })
            .collect();
        let index = KeyIndex::from_leaves(mapped).unwrap();
        assert_eq!(content(&index), content(w.current()));
        for e in w.current().iter() {
            assert_eq!(index.get(e.owner, e.key), Some(e.row));
        }
        assert_eq!((index.count(0), index.count(1), index.count(2)), (167, 167, 166));
    }

    #[test]
    fn long_keys_and_many_entries() {
        let mut w = KeyIndexWriter::new();
        assert_eq!(w.insert(1, &vec![7; MAX_KEY_LEN + 1], 1), Err(KeyTooLong { len: MAX_KEY_LEN + 1 }));
        for i in 0..20_000u32 {
            let key = format!("{:08}", i.wrapping_mul(2_654_435_761) % 100_000);
            w.insert(i % 7, key.as_bytes(), i).unwrap();
        }
        for len in [0, 1, 1000, MAX_KEY_LEN] {
            w.insert(3, &vec![0xff; len], len as u32).unwrap();
        }
        let snap = w.publish();
        check(snap.root.as_deref().unwrap(), None, None);
        assert!(snap.depth() >= 2);
        assert_eq!(snap.get(3, &vec![0xff; MAX_KEY_LEN]), Some(MAX_KEY_LEN as u32));
        let all: Vec<_> = snap.iter().collect();
        assert_eq!(all.len() as u64, snap.len());
        for o in 0..7 {
            assert_eq!(snap.count(o), snap.entries(o).count() as u64);
        }
        // Remove everything: the tree shrinks back to nothing.
        for e in content(&snap) {
            assert_eq!(w.remove(e.0, &e.1), Some(e.2));
            if e.2 % 1000 == 0 {
                check(w.current().root.as_deref().unwrap(), None, None);
            }
        }
        assert!(w.current().root.is_none());
        assert_eq!(content(&snap).len() as u64, snap.len());
    }

    /// The rows of `range` read by [`Range::next_rows`] in batches of `batch`.
    fn rows_in_batches(mut range: Range<'_>, batch: usize) -> Vec<u32> {
        let (mut all, mut buf) = (Vec::new(), vec![0; batch]);
        loop {
            let n = range.next_rows(&mut buf);
            all.extend_from_slice(&buf[..n]);
            if n < batch {
                return all;
            }
        }
    }

    #[test]
    fn a_range_between_two_keys_stops_in_whichever_leaf_its_end_falls() {
        let mut w = KeyIndexWriter::new();
        // Owner 3's keys span many leaves; owners 2 and 4 sit on either side.
        for n in (0..20_000u32).map(|n| n * 3) {
            w.insert(3, &n.to_be_bytes(), n).unwrap();
        }
        for o in [2, 4] {
            for n in 0..500u32 {
                w.insert(o, &n.to_be_bytes(), n).unwrap();
            }
        }
        assert!(w.current().depth() > 1, "the test needs several leaves");
        let rows = |lo: u32, hi: Option<u32>| -> Vec<u32> {
            let hi = hi.map(u32::to_be_bytes);
            w.current().between(3, &lo.to_be_bytes(), hi.as_ref().map(|h| &h[..])).map(|e| e.row).collect()
        };
        let want = |lo: u32, hi: Option<u32>| -> Vec<u32> {
            (0..20_000u32).map(|n| n * 3).filter(|&n| n >= lo && hi.is_none_or(|h| n < h)).collect()
        };
        for (lo, hi) in [
            (0, Some(1)),
            (0, Some(0)),
            (4, Some(4)),
            (1_000, Some(31_000)),
            (30_000, None),
            (0, None),
            (59_997, Some(u32::MAX)),
            (7, Some(8)),
        ] {
            assert_eq!(rows(lo, hi), want(lo, hi), "between {lo} and {hi:?}");
            // The same rows a batch at a time, batches ending inside leaves and on their edges.
            let hi_bytes = hi.map(u32::to_be_bytes);
            for batch in [1, 7, 64, 1_000] {
                let range = w.current().between(3, &lo.to_be_bytes(), hi_bytes.as_ref().map(|h| &h[..]));
                assert_eq!(rows_in_batches(range, batch), want(lo, hi), "between {lo} and {hi:?} by {batch}");
            }
        }
        assert_eq!(rows_in_batches(w.current().entries(3), 64).len(), 20_000);
        assert_eq!(rows_in_batches(w.current().iter(), 64).len(), 21_000);
        // A bound past the owner's keys stops at them: the next owner's are not in the range.
        assert_eq!(w.current().between(2, &[], Some(&[0xFF; 8])).count(), 500);
        assert_eq!(w.current().between(3, &[], None).count(), 20_000);
    }

    #[test]
    fn a_key_moved_a_little_stays_in_its_leaf_and_one_moved_far_goes_to_its_own() {
        let mut w = KeyIndexWriter::new();
        let mut model = Model::new();
        for i in 0..2_000u32 {
            let key = format!("{:06}", i * 10);
            w.insert(4, key.as_bytes(), i).unwrap();
            model.insert((4, key.into_bytes()), i);
        }
        let snap = w.publish();
        let leaves = w.current().leaves().len();
        // Between two keys of one leaf (the published snapshot shares it: the path is copied).
        let root = w.current.root.as_mut().unwrap();
        assert!(matches!(move_in_leaf(root, 4, b"005000", b"005003", 77), Moved::InPlace(500)));
        w.current.sync_root();
        model.remove(&(4, b"005000".to_vec()));
        model.insert((4, b"005003".to_vec()), 77);
        // Missing, already there, past the last key: nothing changes.
        let root = w.current.root.as_mut().unwrap();
        assert!(matches!(move_in_leaf(root, 4, b"005001", b"005002", 1), Moved::Missing));
        w.current.sync_root();
        // Onto a key that is there, and past the last key: removed, for the caller to insert.
        for (old, new, row) in [(&b"005010"[..], &b"005020"[..], 501), (b"019990", b"999999", 1999)] {
            let root = w.current.root.as_mut().unwrap();
            assert!(matches!(move_in_leaf(root, 4, old, new, 9), Moved::Removed(r) if r == row));
            w.removed();
            assert_eq!(w.current().get(4, old), None);
            model.remove(&(4, old.to_vec()));
            check(w.current().root.as_deref().unwrap(), None, None);
        }
        // Through the writer: near and far moves, and a missing key.
        for i in 0..2_000u32 {
            let old = format!("{:06}", i * 10);
            let new =
                if i % 3 == 0 { format!("{:06}", i * 10 + 4) } else { format!("{:06}", (i * 7_919) % 20_000 * 10 + 5) };
            let was = model.remove(&(4, old.clone().into_bytes()));
            if was.is_some() {
                model.insert((4, new.clone().into_bytes()), i + 1);
            }
            assert_eq!(w.move_key(4, old.as_bytes(), new.as_bytes(), i + 1).unwrap(), was, "{old} → {new}");
        }
        check(w.current().root.as_deref().unwrap(), None, None);
        assert_eq!(content(w.current()), model_content(&model));
        assert_eq!(w.current().len(), model.len() as u64);
        assert!(w.current().leaves().len() >= leaves / 2);
        // The snapshot published before is as it was.
        assert_eq!(snap.len(), 2_000);
        assert_eq!(snap.get(4, b"005000"), Some(500));
        assert_eq!(snap.get(4, b"005003"), None);
        assert_eq!(w.move_key(4, b"x", &vec![0; MAX_KEY_LEN + 1], 1), Err(KeyTooLong { len: MAX_KEY_LEN + 1 }));
    }

    #[test]
    fn one_owner_text_keys_then_another_owner() {
        // Nodes of one owner search eight key bytes; a second owner turns a node mixed.
        let mut w = KeyIndexWriter::new();
        let mut model = Model::new();
        for i in 0..20_000u32 {
            let key = (i.wrapping_mul(2_654_435_761) % 1_000_000).to_string();
            w.insert(7, key.as_bytes(), i).unwrap();
            model.insert((7, key.into_bytes()), i);
        }
        for (o, k) in [(7, &b"12345678901"[..]), (7, b"1234567890"), (7, b"1\0"), (7, b""), (3, b"5"), (9, b"0")] {
            w.insert(o, k, 1).unwrap();
            model.insert((o, k.to_vec()), 1);
        }
        check(w.current().root.as_deref().unwrap(), None, None);
        assert_eq!(content(w.current()), model_content(&model));
        for ((o, k), r) in &model {
            assert_eq!(w.current().get(*o, k), Some(*r));
        }
        assert_eq!(
            w.current().count_prefix(7, b"12"),
            model.keys().filter(|(o, k)| *o == 7 && k.starts_with(b"12")).count() as u64
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, Vec<u8>, u32),
        Remove(usize),
        /// Moves the entry at this position to a key near it (the second value picks how
        /// near: a last byte changed, or a key of its own), or a missing key.
        Move(usize, u8, Vec<u8>, u32),
        RemoveMissing(u32, Vec<u8>),
        Publish,
        DropSnapshot(usize),
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c'), any::<u8>()], 0..6),
            1 => proptest::collection::vec(any::<u8>(), 0..300),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u32..5, key(), any::<u32>()).prop_map(|(o, k, r)| Op::Insert(o, k, r)),
            3 => any::<usize>().prop_map(Op::Remove),
            3 => (any::<usize>(), any::<u8>(), key(), any::<u32>()).prop_map(|(i, how, k, r)| Op::Move(i, how, k, r)),
            1 => (0u32..5, key()).prop_map(|(o, k)| Op::RemoveMissing(o, k)),
            1 => Just(Op::Publish),
            1 => any::<usize>().prop_map(Op::DropSnapshot),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]
        /// The index against a BTreeMap: lookups, owner scans, prefix scans and counts agree,
        /// and every snapshot keeps exactly the content it had when published.
        #[test]
        fn model_equivalence(ops in proptest::collection::vec(op(), 1..600)) {
            let mut w = KeyIndexWriter::new();
            let mut model = Model::new();
            let mut snaps: Vec<(Arc<KeyIndex>, Model)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(o, k, r) => {
                        let old = w.insert(o, &k, r).unwrap();
                        prop_assert_eq!(old, model.insert((o, k), r));
                    }
                    Op::Remove(i) => {
                        if model.is_empty() { continue; }
                        let (o, k) = model.keys().nth(i % model.len()).unwrap().clone();
                        prop_assert_eq!(w.remove(o, &k), model.remove(&(o, k)));
                    }
                    Op::RemoveMissing(o, k) => {
                        prop_assert_eq!(w.remove(o, &k), model.remove(&(o, k)));
                    }
                    Op::Move(i, how, k, r) => {
                        let (o, old) = match model.keys().nth(i % model.len().max(1)) {
                            Some(key) if how % 8 != 0 => key.clone(),
                            _ => (u32::from(how) % 5, k.clone()),
                        };
                        // Mostly a key next to the old one (its last byte moved by a little),
                        // sometimes one anywhere.
                        let new = match (how % 4, old.last()) {
                            (0, _) | (_, None) => k,
                            (_, Some(&b)) => {
                                let mut n = old.clone();
                                *n.last_mut().unwrap() = b.wrapping_add(how / 4 % 5).wrapping_sub(2);
                                n
                            }
                        };
                        let was = model.remove(&(o, old.clone()));
                        if was.is_some() {
                            model.insert((o, new.clone()), r);
                        }
                        prop_assert_eq!(w.move_key(o, &old, &new, r).unwrap(), was);
                    }
                    Op::Publish => {
                        let s = w.publish();
                        snaps.push((s, model.clone()));
                    }
                    Op::DropSnapshot(i) => {
                        if !snaps.is_empty() { snaps.remove(i % snaps.len()); }
                    }
                }
                prop_assert_eq!(w.current().len(), model.len() as u64);
            }
            if let Some(root) = w.current().root.as_deref() {
                check(root, None, None);
            }
            prop_assert_eq!(content(w.current()), model_content(&model));
            for ((o, k), r) in &model {
                prop_assert_eq!(w.current().get(*o, k), Some(*r));
            }
            for o in 0..6u32 {
                let want: Vec<_> = model.range((o, vec![])..(o + 1, vec![])).map(|((_, k), r)| (k.clone(), *r)).collect();
                let got: Vec<_> = w.current().entries(o).map(|e| (e.key.to_vec(), e.row)).collect();
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(w.current().count(o), want.len() as u64);
                for p in [&b"a"[..], b"ab", b"", b"\xff"] {
                    let want: Vec<_> = want.iter().filter(|(k, _)| k.starts_with(p)).cloned().collect();
                    let got: Vec<_> = w.current().prefix(o, p).map(|e| (e.key.to_vec(), e.row)).collect();
                    prop_assert_eq!(&got, &want);
                    prop_assert_eq!(w.current().count_prefix(o, p), want.len() as u64);
                }
                let from: Vec<_> = w.current().entries_from(o, b"b").map(|e| e.key.to_vec()).collect();
                let want_from: Vec<_> = want.iter().filter(|(k, _)| k.as_slice() >= &b"b"[..]).map(|(k, _)| k.clone()).collect();
                prop_assert_eq!(from, want_from);
                // Ranges whose ends fall inside leaves, on leaf edges and outside every key.
                for (lo, hi) in [(&b"a"[..], Some(&b"b"[..])), (b"", Some(b"ab")), (b"b", None), (b"\xff", Some(b"\xff\x01"))] {
                    let got: Vec<_> = w.current().between(o, lo, hi).map(|e| (e.key.to_vec(), e.row)).collect();
                    let want: Vec<_> = want
                        .iter()
                        .filter(|(k, _)| k.as_slice() >= lo && hi.is_none_or(|hi| k.as_slice() < hi))
                        .cloned()
                        .collect();
                    let rows: Vec<u32> = want.iter().map(|(_, r)| *r).collect();
                    prop_assert_eq!(got, want);
                    for batch in [1, 3, 64] {
                        prop_assert_eq!(&rows_in_batches(w.current().between(o, lo, hi), batch), &rows);
                    }
                }
                // `next_rows` on the other bounds, whose leaves may hold several owners.
                let rows: Vec<u32> = want.iter().map(|(_, r)| *r).collect();
                prop_assert_eq!(&rows_in_batches(w.current().entries(o), 5), &rows);
                let ab: Vec<u32> = want.iter().filter(|(k, _)| k.starts_with(b"a")).map(|(_, r)| *r).collect();
                prop_assert_eq!(rows_in_batches(w.current().prefix(o, b"a"), 2), ab);
            }
            let all: Vec<u32> = model.values().copied().collect();
            prop_assert_eq!(rows_in_batches(w.current().iter(), 9), all);
            for (s, m) in &snaps {
                prop_assert_eq!(content(s), model_content(m));
                prop_assert_eq!(s.len(), m.len() as u64);
            }
        }
    }
}
