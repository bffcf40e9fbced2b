//! Storage memory in 2 MiB huge pages: table pages, page directory nodes and key index node
//! buffers are carved from chunks that the kernel is asked to back with transparent huge
//! pages (`madvise(MADV_HUGEPAGE)`), so that a cold read of a page or a node costs one TLB
//! entry per 2 MiB instead of one per 4 KiB (on a virtual machine a TLB miss is a nested page
//! walk of several memory loads).
//!
//! Blocks come in size classes of 64 bytes; a freed block goes on its class's free list and
//! is handed out again, never back to the system: pages and nodes come and go in the same few
//! sizes (key index buffers round their sizes up to a few classes for this).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes per chunk asked of the system: a few huge pages at a time.
const CHUNK: usize = 16 << 20;
/// Alignment of a chunk: a huge page.
const HUGE: usize = 2 << 20;
/// Size-class granularity.
const CLASS: usize = 64;

struct Arena {
    /// The unused rest of the current chunk.
    next: usize,
    end: usize,
    /// Free blocks by class (`len.div_ceil(CLASS)`).
    free: Vec<Vec<usize>>,
}

/// Chunks of one kind of block. Table pages and key index buffers have chunks of their own:
/// a table's pages, written in row order, then lie in order, and a scan of the table reads
/// memory in order (OO7 Q7, a scan of 100,000 rows, was 20% slower with key index buffers
/// between the pages).
pub(crate) struct Pool(Mutex<Arena>);

impl Pool {
    const fn new() -> Pool {
        Pool(Mutex::new(Arena { next: 0, end: 0, free: Vec::new() }))
    }
}

/// Table pages and page directory nodes.
pub(crate) static PAGES: Pool = Pool::new();
/// Key index node buffers.
pub(crate) static NODES: Pool = Pool::new();

/// Bytes of blocks handed out and not given back (what the in-memory bound counts).
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Bytes of blocks in use now.
pub(crate) fn in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

fn class(len: usize) -> usize {
    len.div_ceil(CLASS)
}

/// A new chunk, 2 MiB-aligned, with huge pages asked for; `None` if the system has no memory
/// to map.
fn chunk() -> Option<usize> {
    // SAFETY: an anonymous private mapping of fresh memory, touching nothing else.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            CHUNK + HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE);
    // SAFETY: the unaligned head and the tail past `aligned + CHUNK` are parts of the mapping
    // just made, which nothing uses; `madvise` is a hint on the part that stays.
    unsafe {
        if aligned > start {
            libc::munmap(p, aligned - start);
        }
        let tail = start + CHUNK + HUGE - (aligned + CHUNK);
        if tail > 0 {
            libc::munmap((aligned + CHUNK) as *mut libc::c_void, tail);
        }
        libc::madvise(aligned as *mut libc::c_void, CHUNK, libc::MADV_HUGEPAGE);
    }
    Some(aligned)
}

/// `len` zeroed bytes (`0 < len ≤ CHUNK`), 64-aligned, until [`free`] with the same `len`.
///
/// # Panics
/// If the system has no memory to map (as a failed allocation aborts).
pub(crate) fn alloc_zeroed(pool: &Pool, len: usize) -> NonNull<u8> {
    let (p, reused) = alloc(pool, len);
    if reused {
        // SAFETY: a freed block of this class: `class(len) × CLASS` bytes of a chunk that
        // nothing else uses.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0, class(len) * CLASS) };
    }
    p
}

/// `len` bytes (`0 < len ≤ CHUNK`), 64-aligned, holding whatever a freed block held, for a
/// caller that writes every byte before reading any (a page copied on write: zeroing first
/// cost as much as the copy). Until [`free`] with the same `len`.
///
/// # Panics
/// If the system has no memory to map (as a failed allocation aborts).
pub(crate) fn alloc_for_copy(pool: &Pool, len: usize) -> NonNull<u8> {
    alloc(pool, len).0
}

/// A block of `len`'s class, and whether it was freed before (fresh mapped memory is zero).
fn alloc(pool: &Pool, len: usize) -> (NonNull<u8>, bool) {
    // Callers ask for pages and nodes of a few KiB; a larger block would run past its chunk.
    assert!(len > 0 && len <= CHUNK, "an arena block of {len} bytes");
    let c = class(len);
    let size = c * CLASS;
    IN_USE.fetch_add(size, Ordering::Relaxed);
    let mut a = pool.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = a.free.get_mut(c).and_then(Vec::pop) {
        // SAFETY: chunk addresses are never null.
        return (unsafe { NonNull::new_unchecked(p as *mut u8) }, true);
    }
    if a.end - a.next < size {
        // The rest of the old chunk is left unused (less than one page).
        let start = chunk().expect("out of memory for storage pages");
        a.next = start;
        a.end = start + CHUNK;
    }
    let p = a.next;
    a.next += size;
    // SAFETY: chunk addresses are never null; fresh mapped memory is zero.
    (unsafe { NonNull::new_unchecked(p as *mut u8) }, false)
}

/// Gives back a block of [`alloc_zeroed`]`(pool, len)` or [`alloc_for_copy`]`(pool, len)`.
///
/// # Safety
/// `p` must come from `alloc_zeroed(pool, len)` or `alloc_for_copy(pool, len)` and not be used
/// after this call.
pub(crate) unsafe fn free(pool: &Pool, p: NonNull<u8>, len: usize) {
    let c = class(len);
    IN_USE.fetch_sub(c * CLASS, Ordering::Relaxed);
    let mut a = pool.0.lock().unwrap_or_else(|e| e.into_inner());
    if a.free.len() <= c {
        a.free.resize_with(c + 1, Vec::new);
    }
    a.free[c].push(p.as_ptr() as usize);
}
