//! A node's buffer of words: in the huge-page arena (built or changed since the last
//! checkpoint), or a slice of a checkpoint file mapped read-only (a leaf the checkpoint
//! wrote). Reads are the same slice either way; a change copies a mapped buffer to the arena
//! first.
//!
//! Node buffers live in the arena, not on the allocator's heap, for the same reason table
//! pages do (`crate::arena`): a descent reads one buffer per level, each a cold cache line in
//! a large index, and on 4 KiB pages each was a TLB miss too (OO7 medium Q1, ten lookups by
//! number: about 12% faster with every heap allocation on huge pages).

use std::ptr::NonNull;
use std::sync::Arc;

use crate::arena;
use crate::table::{file_place, FilePlace, StableBytes};

pub(super) enum Words {
    Heap(HeapWords),
    /// `len` words at `data` inside `owner`'s bytes, which the owner keeps alive unchanged.
    Mapped {
        owner: Arc<dyn StableBytes>,
        data: *const u64,
        len: usize,
        crc: u32,
    },
}

// SAFETY: a mapped buffer is read-only memory kept alive by its owner (Send + Sync); a heap one
// is an arena block owned by its `HeapWords` alone.
unsafe impl Send for Words {}
// SAFETY: as above: `&Words` only reads.
unsafe impl Sync for Words {}

impl Words {
    /// A buffer in the arena holding `words`.
    pub(super) fn heap(words: &[u64]) -> Words {
        let mut v = HeapWords::with_capacity(words.len());
        v.extend(words.iter().copied());
        Words::Heap(v)
    }

    /// `len` words of `owner` from byte `offset` (8-aligned in memory), whose crc32c the
    /// checkpoint recorded as `crc`; `None` if they lie outside the owner's bytes or are not
    /// aligned.
    pub(super) fn mapped(owner: Arc<dyn StableBytes>, offset: usize, len: usize, crc: u32) -> Option<Words> {
        let bytes = owner.bytes();
        let end = offset.checked_add(len.checked_mul(8)?)?;
        let slice = bytes.get(offset..end)?;
        if !(slice.as_ptr() as usize).is_multiple_of(8) {
            return None;
        }
        let data = slice.as_ptr().cast::<u64>();
        Some(Words::Mapped { owner, data, len, crc })
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[u64] {
        match self {
            Words::Heap(v) => v,
            // SAFETY: `data` is 8-aligned, inside the owner's bytes for `len` words (checked in
            // `mapped`), and the owner keeps them alive and unchanged while `self` lives.
            Words::Mapped { data, len, .. } => unsafe { std::slice::from_raw_parts(*data, *len) },
        }
    }

    /// Where the buffer lies in a checkpoint file, if it is mapped from one.
    pub(super) fn file_place(&self) -> Option<FilePlace> {
        match self {
            Words::Heap(_) => None,
            Words::Mapped { owner, data, crc, .. } => file_place(&**owner, data.cast(), *crc),
        }
    }

    /// Changes the buffer through `f` (a mapped one is copied to the arena first).
    pub(super) fn edit<R>(&mut self, f: impl FnOnce(&mut HeapWords) -> R) -> R {
        if let Words::Mapped { .. } = self {
            *self = Words::heap(self.as_slice());
        }
        let Words::Heap(v) = self else { unreachable!("made a heap buffer above") };
        f(v)
    }
}

impl Clone for Words {
    fn clone(&self) -> Words {
        match self {
            Words::Heap(v) => Words::heap(v),
            Words::Mapped { owner, data, len, crc } => {
                Words::Mapped { owner: owner.clone(), data: *data, len: *len, crc: *crc }
            }
        }
    }
}

/// Bytes up to which a buffer's block grows in steps of one arena class (64 bytes); above
/// it, in steps of [`STEP`], so that the blocks of a key index's nodes (up to about 6 KiB)
/// fall in a dozen classes whose free lists the nodes reuse.
const SMALL: usize = 512;
/// See [`SMALL`].
const STEP: usize = 512;

/// The block size for at least `words` words.
fn block_bytes(words: usize) -> usize {
    let bytes = (words * 8).max(8);
    if bytes <= SMALL {
        bytes.next_multiple_of(64)
    } else {
        bytes.next_multiple_of(STEP)
    }
}

/// A growable run of words in one arena block: the few `Vec` operations a node's edits use.
pub(super) struct HeapWords {
    ptr: NonNull<u64>,
    len: usize,
    /// Words the block holds.
    cap: usize,
}

impl HeapWords {
    pub(super) fn with_capacity(words: usize) -> HeapWords {
        let bytes = block_bytes(words);
        // Arena blocks are 64-aligned: aligned for u64.
        HeapWords { ptr: arena::alloc_for_copy(&arena::NODES, bytes).cast(), len: 0, cap: bytes / 8 }
    }

    /// Words the block holds without moving.
    pub(super) fn capacity(&self) -> usize {
        self.cap
    }

    /// Room for `extra` more words than there are; moves the words to a larger block if
    /// needed, which is then sized for exactly that (rounded up to its class).
    pub(super) fn reserve_exact(&mut self, extra: usize) {
        let want = self.len + extra;
        if want <= self.cap {
            return;
        }
        let mut bigger = HeapWords::with_capacity(want);
        bigger.extend(self.iter().copied());
        *self = bigger;
    }

    /// Keeps the first `len` words (no change if there are fewer).
    pub(super) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes the run `len` words long, new words set to `value`.
    pub(super) fn resize(&mut self, len: usize, value: u64) {
        if len > self.len {
            self.reserve_exact(len - self.len);
            // SAFETY: `len ≤ cap` after the reserve; the words past `self.len` are the block's.
            unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.len), len - self.len) }.fill(value);
        }
        self.len = len;
    }

    /// Appends the words of `items`.
    pub(super) fn extend(&mut self, items: impl IntoIterator<Item = u64>) {
        for w in items {
            if self.len == self.cap {
                // Grows by an eighth at least, as `insert_in_place` reserves.
                self.reserve_exact(1 + self.len / 8);
            }
            // SAFETY: `len < cap`: inside the block.
            unsafe { self.ptr.as_ptr().add(self.len).write(w) };
            self.len += 1;
        }
    }
}

impl std::ops::Deref for HeapWords {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        // SAFETY: the first `len` words of the block are written (`resize`, `extend`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for HeapWords {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `deref`; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HeapWords {
    fn drop(&mut self) {
        // SAFETY: the block came from `arena::alloc_for_copy` of this size and is not used
        // after this.
        unsafe { arena::free(&arena::NODES, self.ptr.cast(), self.cap * 8) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_words_grow_keep_their_words_and_round_their_blocks_to_few_sizes() {
        let mut v = HeapWords::with_capacity(0);
        assert_eq!(v.capacity(), 8, "the smallest block is one class, 64 bytes");
        v.extend(0..100);
        assert_eq!(&v[..], &(0..100).collect::<Vec<u64>>()[..]);
        assert!(v.capacity() >= 100 && (v.capacity() * 8).is_multiple_of(STEP));
        v.truncate(10);
        v.resize(20, 7);
        assert_eq!(&v[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 7, 7]);
        v.reserve_exact(1000);
        assert!(v.capacity() >= 1020);
        assert_eq!(v.len(), 20);
        let copy = Words::Heap(v).clone();
        assert_eq!(copy.as_slice()[19], 7);
        for words in [1, 8, 9, 64, 65, 700] {
            let b = block_bytes(words);
            assert!(b >= words * 8 && b.is_multiple_of(64), "{words} words: {b} bytes");
        }
    }
}
