//! Checkpoint files mapped read-only (`docs/storage.md`, "Checkpoints"): table pages and key
//! index leaves that were written to a checkpoint are read straight from the file through the
//! OS page cache, so the data can be larger than memory, and the memory of their heap copies
//! can go.
//!
//! A checkpoint file is written whole under a temporary name, fsynced and renamed; after that
//! nothing in this process or any other writes it (the directory lock keeps other processes
//! out), and deleting it only unlinks the name: the mapping stays valid while a page refers
//! to it.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::table::StableBytes;

/// Bytes of checkpoint files mapped by this process now.
static MAPPED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A checkpoint file mapped read-only, known by its generation (the log version it covers,
/// which names the file).
pub struct MappedFile {
    generation: u64,
    map: memmap2::Mmap,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile").field("generation", &self.generation).field("len", &self.map.len()).finish()
    }
}

impl MappedFile {
    /// Maps the checkpoint file at `path` of generation `generation`.
    pub fn open(path: &Path, generation: u64) -> std::io::Result<Arc<MappedFile>> {
        let file = std::fs::File::open(path)?;
        // SAFETY: checkpoint files are never written after their rename (module docs), so the
        // mapped bytes do not change while mapped.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        // Reads are scattered (a row here, a leaf there): no read-ahead of whole windows.
        let _ = map.advise(memmap2::Advice::Random);
        MAPPED_BYTES.fetch_add(map.len(), Ordering::Relaxed);
        Ok(Arc::new(MappedFile { generation, map }))
    }

    /// The generation: the log version the checkpoint that wrote this file covered.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The file's size.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the file is empty (never, for a checkpoint).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        MAPPED_BYTES.fetch_sub(self.map.len(), Ordering::Relaxed);
    }
}

// SAFETY: a read-only mapping of a file nobody writes (module docs): the same address, length
// and contents for as long as the value lives.
unsafe impl StableBytes for MappedFile {
    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn file(&self) -> Option<u64> {
        Some(self.generation)
    }
}

/// Bytes of checkpoint files mapped now (their resident part is in the OS page cache, which
/// the kernel can reclaim; this is not memory the process holds).
pub fn mapped_bytes() -> usize {
    MAPPED_BYTES.load(Ordering::Relaxed)
}
