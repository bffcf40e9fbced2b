//! A node's buffer of words: on the heap (built or changed since the last checkpoint), or a
//! slice of a checkpoint file mapped read-only (a leaf the checkpoint wrote). Reads are the
//! same slice either way; a change copies a mapped buffer to the heap first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::table::{file_place, FilePlace, StableBytes};

/// Bytes of node buffers on the heap now (what the in-memory bound counts).
static HEAP_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes of key index node buffers on the heap now.
pub fn heap_bytes() -> usize {
    HEAP_BYTES.load(Ordering::Relaxed)
}

pub(super) enum Words {
    Heap(Vec<u64>),
    /// `len` words at `data` inside `owner`'s bytes, which the owner keeps alive unchanged.
    Mapped {
        owner: Arc<dyn StableBytes>,
        data: *const u64,
        len: usize,
        crc: u32,
    },
}

// SAFETY: a mapped buffer is read-only memory kept alive by its owner (Send + Sync); a heap one
// is a Vec.
unsafe impl Send for Words {}
// SAFETY: as above: `&Words` only reads.
unsafe impl Sync for Words {}

impl Words {
    pub(super) fn heap(words: Vec<u64>) -> Words {
        HEAP_BYTES.fetch_add(words.capacity() * 8, Ordering::Relaxed);
        Words::Heap(words)
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

    /// Changes the buffer through `f` (a mapped one is copied to the heap first).
    pub(super) fn edit<R>(&mut self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
        if let Words::Mapped { .. } = self {
            *self = Words::heap(self.as_slice().to_vec());
        }
        let Words::Heap(v) = self else { unreachable!("made a heap buffer above") };
        let before = v.capacity();
        let r = f(v);
        let after = v.capacity();
        if after > before {
            HEAP_BYTES.fetch_add((after - before) * 8, Ordering::Relaxed);
        } else if after < before {
            HEAP_BYTES.fetch_sub((before - after) * 8, Ordering::Relaxed);
        }
        r
    }
}

impl Clone for Words {
    fn clone(&self) -> Words {
        match self {
            Words::Heap(v) => Words::heap(v.clone()),
            Words::Mapped { owner, data, len, crc } => {
                Words::Mapped { owner: owner.clone(), data: *data, len: *len, crc: *crc }
            }
        }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if let Words::Heap(v) = self {
            HEAP_BYTES.fetch_sub(v.capacity() * 8, Ordering::Relaxed);
        }
    }
}
