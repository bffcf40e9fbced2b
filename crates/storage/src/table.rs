//! A table per node type: fixed-width rows in pages, reached through a copy-on-write page
//! directory (`docs/storage.md`, "Tables").
//!
//! - A row id is a `u32`; row 0 is never used (it means "no row" in reference slots).
//! - Rows live in pages of `2^k` rows, the largest `k` with `2^k × width ≤ 4096` (at least one
//!   row), so a row's page is `row >> k` and its slot `row & (2^k − 1)`: no division.
//! - A page holds a live bitmap (one bit per slot) and then the rows, row-major. A scan of the
//!   table reads the pages in order and skips the slots whose bit is clear.
//! - Pages are reached through a page directory: a radix tree of nodes of [`FANOUT`]
//!   references, as tall as the table needs (one level up to 64 pages, two up to 4,096, three
//!   up to 262,144, ...). The design's two levels with 512-page leaves made a one-row write
//!   after a publish copy an 8 KiB leaf and touch up to 512 page reference counts (each a
//!   cache miss when cold): `task_start` on B7 took 16.6 µs, with 64-wide nodes 10.4 µs
//!   (`table_floor_b7`); a read pays one more level on tables of over 4,096 pages.
//! - A [`TableVersion`] is immutable once published ([`TableWriter::publish`] hands out an
//!   `Arc` of it). The one writer keeps its own version; its first write to a page after a
//!   publish copies the page and the directory nodes above it if a published version still
//!   shares them (`Arc::make_mut`), so readers never wait and never see a change.
//! - A freed row is reused only once no snapshot can see it: rows freed while version `v` was
//!   the last published one become reusable when the oldest live snapshot is newer than `v`
//!   ([`TableWriter::release_before`]).
//!
//! A page is either a heap buffer (written since the last checkpoint) or a slice of a
//! read-only mapping that some owner keeps alive ([`Page::mapped`]); both are a pointer and a
//! length, so a read is the same pointer arithmetic for both.
//!
//! Heap pages and directory nodes live in 2 MiB transparent huge pages (`arena`): a cold read
//! on this kind of virtual machine pays mostly for TLB misses (nested page walks), and one
//! TLB entry then covers 2 MiB of pages and nodes instead of one 4 KiB page (B7,
//! `table_floor_b7`, interleaved runs: two-hop 2.12 → 1.65–1.76 µs, task_start 9.69 →
//! 8.5–9.1 µs, many_references 2.62 → 2.1 µs).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crate::arena;

/// Bytes of rows a page holds at most.
pub const PAGE_BYTES: usize = 4096;
/// Widest row: one row per page.
pub const MAX_ROW_WIDTH: usize = PAGE_BYTES;
/// References per page directory node. Small, because a write after a publish copies one
/// node per level: with 64 a one-row update copies about 1 KiB per level and touches at most
/// 64 reference counts per level (512-page leaves made `task_start` on B6 copy 8 KiB and 512
/// counts per table it wrote; `table_floor_b7`).
pub const FANOUT: usize = 1 << FANOUT_SHIFT;
const FANOUT_SHIFT: u32 = 6;
/// Highest row id a table hands out: rows are `1..=MAX_ROW` (`u32::MAX` stays unused, so a
/// row count always fits a `u32`).
pub const MAX_ROW: u32 = u32::MAX - 1;

/// A row's place in its page ([`TableVersion::locate`]), valid as long as the version it was
/// found in.
#[derive(Clone, Copy)]
pub struct RowAt<'a> {
    data: NonNull<u8>,
    slot: usize,
    layout: Layout,
    version: PhantomData<&'a TableVersion>,
}

impl<'a> RowAt<'a> {
    /// The row's bytes, or `None` if it is not live.
    #[inline]
    pub fn get(self) -> Option<&'a [u8]> {
        // SAFETY: the page has `page_bytes()` bytes: the bitmap (`bitmap_bytes()` ≥
        // rows_per_page / 8) and `rows_per_page` rows of `width`; `slot < rows_per_page`.
        // The page lives as long as the version (its Arc is in the version's directory), and
        // pages reachable from a version are never written.
        unsafe {
            let bits = *self.data.as_ptr().add(self.slot >> 3);
            if bits & (1 << (self.slot & 7)) == 0 {
                return None;
            }
            Some(std::slice::from_raw_parts(self.start(), self.layout.width()))
        }
    }

    /// Asks the CPU to start loading the row's first cache line.
    #[inline]
    pub fn prefetch(self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint with no effect on memory or faults; the address is a
        // row's start within its page.
        unsafe {
            std::arch::x86_64::_mm_prefetch(self.start() as *const i8, std::arch::x86_64::_MM_HINT_T0);
        }
    }

    #[inline]
    fn start(self) -> *const u8 {
        // SAFETY: `slot < rows_per_page`, so the row's start is within the page.
        unsafe { self.data.as_ptr().add(self.layout.bitmap_bytes() + self.slot * self.layout.width()) }
    }
}

/// The geometry of a table's pages, from its row width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    width: u32,
    /// Rows per page = `1 << shift`.
    shift: u32,
}

impl Layout {
    /// The layout of rows of `width` bytes.
    ///
    /// # Panics
    /// If `width` is 0 or wider than [`MAX_ROW_WIDTH`]: the schema compiler refuses such
    /// layouts, so reaching this is a bug above.
    pub fn new(width: usize) -> Layout {
        assert!((1..=MAX_ROW_WIDTH).contains(&width), "row width {width} outside 1..={MAX_ROW_WIDTH}");
        let mut shift = 0;
        while (width << (shift + 1)) <= PAGE_BYTES {
            shift += 1;
        }
        Layout { width: width as u32, shift }
    }

    /// Bytes per row.
    pub fn width(self) -> usize {
        self.width as usize
    }

    /// Rows per page.
    pub fn rows_per_page(self) -> usize {
        1 << self.shift
    }

    /// Bytes of a page's live bitmap (rounded up to 8, so the rows start 8-aligned).
    pub fn bitmap_bytes(self) -> usize {
        self.rows_per_page().div_ceil(64) * 8
    }

    /// Bytes of a whole page: bitmap, then rows.
    pub fn page_bytes(self) -> usize {
        self.bitmap_bytes() + self.rows_per_page() * self.width()
    }

    fn mask(self) -> u32 {
        (1u32 << self.shift) - 1
    }
}

/// Memory that a mapped page points into, kept alive by the page.
///
/// # Safety
/// `bytes` must return the same slice (same address, same length, same contents) every time
/// it is called, for as long as the value lives: pages keep a raw pointer into it. A read-only
/// `memmap2::Mmap`, a `Box<[u8]>` or a `Vec<u8>` never changed after being shared qualify.
pub unsafe trait StableBytes: Send + Sync + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];

    /// The checkpoint file these bytes are (its generation), if they are one: a checkpoint
    /// that finds a page mapped from a file names the page's place there instead of writing it
    /// again.
    fn file(&self) -> Option<u64> {
        None
    }
}

/// Where a mapped page or node lies: a checkpoint file's generation, the offset in it, and
/// the crc32c of its bytes that the checkpoint recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilePlace {
    /// The file's generation (the log version its checkpoint covered).
    pub file: u64,
    /// The file's size.
    pub file_len: u64,
    /// Where the bytes start in the file.
    pub offset: u64,
    /// Their crc32c, as the checkpoint recorded it.
    pub crc: u32,
}

/// The [`FilePlace`] of `len` bytes at `data` inside `owner`, if `owner` is a file.
pub(crate) fn file_place(owner: &dyn StableBytes, data: *const u8, crc: u32) -> Option<FilePlace> {
    let file = owner.file()?;
    let bytes = owner.bytes();
    let offset = (data as usize).checked_sub(bytes.as_ptr() as usize)?;
    Some(FilePlace { file, file_len: bytes.len() as u64, offset: offset as u64, crc })
}

// SAFETY: a Vec behind a shared reference cannot be changed or moved.
unsafe impl StableBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

// SAFETY: as for Vec.
unsafe impl StableBytes for Box<[u8]> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

enum Backing {
    /// `data` is a block of `len` bytes of the huge-page arena that this page owns (allocated
    /// by `Page::zeroed` or `Page::to_heap`, freed in `Drop`).
    Heap,
    /// `data` points into the owner's bytes, which it keeps alive and never changes; `crc` is
    /// the checksum the checkpoint recorded for the page.
    Mapped { owner: Arc<dyn StableBytes>, crc: u32 },
}

/// One page: a live bitmap and `rows_per_page` rows, in memory or mapped.
pub struct Page {
    data: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: a Page's bytes are only written through `&mut Page` (heap pages; mapped ones are
// copied first), and the backing owner is Send + Sync, so sharing and sending follow the
// usual borrow rules.
unsafe impl Send for Page {}
// SAFETY: as above: `&Page` only reads.
unsafe impl Sync for Page {}

impl Page {
    /// A heap page of `len` zero bytes, in the huge-page arena.
    fn zeroed(len: usize) -> Page {
        Page { data: arena::alloc_zeroed(&arena::PAGES, len), len, backing: Backing::Heap }
    }

    /// A page that is `layout.page_bytes()` bytes of `owner` starting at `offset`: a page of a
    /// checkpoint file mapped read-only, whose crc32c the checkpoint recorded as `crc` (not
    /// verified here: recovery reads the file to verify it before mapping). `None` if the
    /// range lies outside the owner's bytes.
    pub fn mapped(owner: Arc<dyn StableBytes>, offset: usize, layout: Layout, crc: u32) -> Option<Page> {
        let len = layout.page_bytes();
        let bytes = owner.bytes();
        let end = offset.checked_add(len)?;
        if end > bytes.len() {
            return None;
        }
        let data = NonNull::from(&bytes[offset..end]).cast::<u8>();
        Some(Page { data, len, backing: Backing::Mapped { owner, crc } })
    }

    /// Whether the page is a slice of a mapping (as opposed to a heap buffer).
    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }

    /// Where the page lies in a checkpoint file, if it is mapped from one.
    pub fn file_place(&self) -> Option<FilePlace> {
        match &self.backing {
            Backing::Heap => None,
            Backing::Mapped { owner, crc } => file_place(&**owner, self.data.as_ptr(), *crc),
        }
    }

    /// The page's bytes: bitmap, then rows.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `data` points to `len` initialised bytes kept alive by the page (its own
        // heap buffer or the mapping's owner), and nothing writes them while `&self` lives.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }

    /// The page's bytes for writing; a mapped page is first copied to the heap.
    fn bytes_mut(&mut self) -> &mut [u8] {
        if self.is_mapped() {
            *self = self.to_heap();
        }
        // SAFETY: a heap page owns its buffer, and `&mut self` excludes every other access.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }

    fn to_heap(&self) -> Page {
        let data = arena::alloc_for_copy(&arena::PAGES, self.len);
        // SAFETY: `data` is a fresh block of `len` bytes that nothing else uses, and `self`'s
        // `len` bytes are readable (and a different block): every byte is written before the
        // page is read.
        unsafe { std::ptr::copy_nonoverlapping(self.bytes().as_ptr(), data.as_ptr(), self.len) };
        Page { data, len: self.len, backing: Backing::Heap }
    }
}

impl Clone for Page {
    /// A copy on the heap (copy-on-write of a page a published version still shares).
    fn clone(&self) -> Page {
        self.to_heap()
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Backing::Heap = self.backing {
            // SAFETY: a heap page's data came from `arena::alloc_zeroed(&PAGES, len)` or
            // `arena::alloc_for_copy(&PAGES, len)`, and is freed only here.
            unsafe { arena::free(&arena::PAGES, self.data, self.len) }
        }
    }
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Page").field("len", &self.len).field("mapped", &self.is_mapped()).finish()
    }
}

/// A page reference in a directory leaf: the page's data pointer next to the `Arc` that
/// keeps it alive, so that a read goes leaf → data without loading the page header.
#[derive(Clone)]
struct PageRef {
    data: NonNull<u8>,
    page: Arc<Page>,
}

// SAFETY: `data` is `page.data`, kept alive by `page`; PageRef is read-only like `&Page`.
unsafe impl Send for PageRef {}
// SAFETY: as above.
unsafe impl Sync for PageRef {}

impl PageRef {
    fn new(page: Page) -> PageRef {
        PageRef { data: page.data, page: Arc::new(page) }
    }

    /// The page for writing: copied if a published version shares it or if it is mapped.
    fn make_mut(&mut self) -> &mut [u8] {
        let page = Arc::make_mut(&mut self.page);
        if page.is_mapped() {
            *page = page.to_heap();
        }
        self.data = page.data;
        page.bytes_mut()
    }
}

/// A page directory node: [`FANOUT`] pages (a leaf, level 0) or subtrees (level > 0), inline.
// Always behind an `Arc`; inner nodes are one per 64 leaves, so their unused half costs
// little, and boxing the leaf's array would add a dependent load to every read.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Dir {
    Leaf([Option<PageRef>; FANOUT]),
    Inner([Option<DirRef>; FANOUT]),
}

impl Dir {
    fn new(level: u32) -> Dir {
        if level == 0 {
            Dir::Leaf(std::array::from_fn(|_| None))
        } else {
            Dir::Inner(std::array::from_fn(|_| None))
        }
    }
}

/// A shared directory node, as an `Arc<Dir>` would be (a count, copied on write while
/// shared), with its memory in the huge-page arena beside the pages: a cold read then takes
/// fewer TLB misses on its way down.
struct DirRef(NonNull<DirBox>);

struct DirBox {
    count: AtomicUsize,
    dir: Dir,
}

// SAFETY: a DirRef is a shared reference-counted `Dir` like `Arc<Dir>` (atomic count; the node
// is only written through `make_mut` when the count is one), and `Dir` is Send + Sync.
unsafe impl Send for DirRef {}
// SAFETY: as above.
unsafe impl Sync for DirRef {}

impl DirRef {
    fn new(dir: Dir) -> DirRef {
        let p = arena::alloc_zeroed(&arena::PAGES, std::mem::size_of::<DirBox>()).cast::<DirBox>();
        // SAFETY: a fresh arena block of the box's size, 64-aligned (more than the box needs).
        unsafe { p.as_ptr().write(DirBox { count: AtomicUsize::new(1), dir }) };
        DirRef(p)
    }

    #[inline]
    fn inner(&self) -> &DirBox {
        // SAFETY: the box lives while any DirRef to it does (the count).
        unsafe { self.0.as_ref() }
    }

    /// The node for writing: copied first if another reference shares it (`Arc::make_mut`).
    fn make_mut(this: &mut DirRef) -> &mut Dir {
        if this.inner().count.load(AtomicOrdering::Acquire) != 1 {
            *this = DirRef::new(this.inner().dir.clone());
        }
        // SAFETY: the count is one and `this` is borrowed mutably: no other reference to the
        // box exists, and none can be made while the borrow lasts (the Acquire load orders
        // every other thread's reads before their decrements, before this write).
        unsafe { &mut (*this.0.as_ptr()).dir }
    }
}

impl std::ops::Deref for DirRef {
    type Target = Dir;

    #[inline]
    fn deref(&self) -> &Dir {
        &self.inner().dir
    }
}

impl Clone for DirRef {
    fn clone(&self) -> DirRef {
        self.inner().count.fetch_add(1, AtomicOrdering::Relaxed);
        DirRef(self.0)
    }
}

impl Drop for DirRef {
    fn drop(&mut self) {
        if self.inner().count.fetch_sub(1, AtomicOrdering::Release) != 1 {
            return;
        }
        std::sync::atomic::fence(AtomicOrdering::Acquire);
        // SAFETY: this was the last reference: the box is dropped and its block freed once,
        // here, after every other holder's use (the Release decrements and Acquire fence).
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr());
            arena::free(&arena::PAGES, self.0.cast(), std::mem::size_of::<DirBox>());
        }
    }
}

/// The index of page `page` in its directory node at `level`.
#[inline]
fn dir_slot(page: u32, level: u32) -> usize {
    ((u64::from(page) >> (FANOUT_SHIFT * level)) as usize) & (FANOUT - 1)
}

/// One version of a table. Published versions are immutable and shared as `Arc`s; a reader
/// holding one sees exactly the rows it had when published, however the writer goes on.
#[derive(Clone)]
pub struct TableVersion {
    layout: Layout,
    /// The page directory (`None` until the first row), and its levels above the leaves.
    root: Option<DirRef>,
    height: u32,
    /// One past the highest row ever handed out (rows `1..end` exist in pages).
    end: u32,
    /// Live rows.
    live: u32,
    /// The number of publishes before this version (the writer's version is the next one).
    version: u64,
}

impl fmt::Debug for TableVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableVersion")
            .field("width", &self.layout.width)
            .field("end", &self.end)
            .field("live", &self.live)
            .field("version", &self.version)
            .finish()
    }
}

impl TableVersion {
    fn empty(layout: Layout) -> TableVersion {
        TableVersion { layout, root: None, height: 0, end: 1, live: 0, version: 0 }
    }

    /// The table's page geometry.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Bytes per row.
    pub fn width(&self) -> usize {
        self.layout.width()
    }

    /// Live rows.
    pub fn len(&self) -> u32 {
        self.live
    }

    /// Whether the table has no live row.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// One past the highest row handed out so far: every live row is below it.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// The publish count this version was made at (0 for the writer's first version).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Bytes the rows would take on disk, as pages: (rows handed out) × width plus one live
    /// bit per row.
    pub fn disk_bytes(&self) -> u64 {
        let rows = u64::from(self.end);
        rows * self.layout.width as u64 + rows.div_ceil(8)
    }

    #[inline]
    fn page_data(&self, page: u32) -> Option<NonNull<u8>> {
        self.page_ref(page).map(|p| p.data)
    }

    #[inline]
    fn page_ref(&self, page: u32) -> Option<&PageRef> {
        if u64::from(page) >> (FANOUT_SHIFT * (self.height + 1)) != 0 {
            return None;
        }
        let mut node = self.root.as_deref()?;
        let mut level = self.height;
        loop {
            match node {
                Dir::Inner(children) => {
                    node = children[dir_slot(page, level)].as_deref()?;
                    level -= 1;
                }
                Dir::Leaf(pages) => return pages[dir_slot(page, 0)].as_ref(),
            }
        }
    }

    /// Page `page`, if it exists.
    pub fn page(&self, page: u32) -> Option<&Page> {
        self.page_ref(page).map(|p| &*p.page)
    }

    /// The pages that exist, in order: a walk of the directory's nodes, not of every page
    /// number below the end.
    pub fn present_pages(&self) -> Vec<u32> {
        fn walk(dir: &Dir, level: u32, base: u64, out: &mut Vec<u32>) {
            match dir {
                Dir::Leaf(pages) => out.extend(
                    pages.iter().enumerate().filter(|(_, p)| p.is_some()).map(|(i, _)| (base + i as u64) as u32),
                ),
                Dir::Inner(children) => {
                    for (i, child) in children.iter().enumerate() {
                        if let Some(child) = child {
                            let below = base + ((i as u64) << (FANOUT_SHIFT * level));
                            walk(child, level - 1, below, out);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        if let Some(root) = self.root.as_deref() {
            walk(root, self.height, 0, &mut out);
        }
        out
    }

    /// Row `row`'s bytes, or `None` if it is not live (row 0, freed, or never handed out).
    #[inline]
    pub fn row(&self, row: u32) -> Option<&[u8]> {
        self.locate(row)?.get()
    }

    /// Where row `row` is, found without reading its page: a reader following many scattered
    /// rows locates one, starts its load ([`RowAt::prefetch`]) and reads it ([`RowAt::get`])
    /// a few rows later, so that the cache misses overlap instead of queueing. `None` if its
    /// page does not exist.
    #[inline]
    pub fn locate(&self, row: u32) -> Option<RowAt<'_>> {
        if row >= self.end {
            return None;
        }
        let data = self.page_data(row >> self.layout.shift)?;
        Some(RowAt { data, slot: (row & self.layout.mask()) as usize, layout: self.layout, version: PhantomData })
    }

    /// Asks the CPU to start loading row `row` (no effect if there is no such page): a reader
    /// about to follow many references (the parents of a scan's matches, say) prefetches a few
    /// ahead, so that their cache misses overlap instead of queueing.
    #[inline]
    pub fn prefetch(&self, row: u32) {
        if let Some(at) = self.locate(row) {
            at.prefetch();
        }
    }

    /// Whether `row` is live.
    pub fn is_live(&self, row: u32) -> bool {
        self.row(row).is_some()
    }

    /// The live rows in row order, with their ids: a sequential scan of the pages.
    pub fn rows(&self) -> Rows<'_> {
        let layout = self.layout;
        Rows {
            table: self,
            width: layout.width(),
            rows_at: layout.bitmap_bytes(),
            words: layout.bitmap_bytes() / 8,
            next_page: 0,
            base: 0,
            page: std::ptr::null(),
            word: 0,
            bits: 0,
        }
    }
}

/// A sequential scan of a table's live rows ([`TableVersion::rows`]): page by page, 64 slots
/// of the live bitmap at a time.
pub struct Rows<'a> {
    table: &'a TableVersion,
    width: usize,
    /// Where the rows start in a page (after the bitmap), and the bitmap's 64-bit words.
    rows_at: usize,
    words: usize,
    /// The page to load when this one is done.
    next_page: u32,
    /// The first row of the current page, and its bytes (null before the first page and for a
    /// page that does not exist).
    base: u32,
    page: *const u8,
    /// The bitmap word being scanned, and its live slots not yet returned.
    word: usize,
    bits: u64,
}

impl<'a> Iterator for Rows<'a> {
    type Item = (u32, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        loop {
            if self.bits != 0 {
                let slot = self.word * 64 + self.bits.trailing_zeros() as usize;
                self.bits &= self.bits - 1;
                // SAFETY: a set bit is a live slot below `rows_per_page` (bits are only set
                // for rows handed out), so `rows_at + slot × width + width` is within the
                // page, which lives as long as the table version (see `TableVersion::row`).
                let row =
                    unsafe { std::slice::from_raw_parts(self.page.add(self.rows_at + slot * self.width), self.width) };
                return Some((self.base | slot as u32, row));
            }
            if !self.advance() {
                return None;
            }
        }
    }
}

impl Rows<'_> {
    /// Moves to the next bitmap word, or the next page; false at the end of the table.
    #[inline(never)]
    fn advance(&mut self) -> bool {
        if !self.page.is_null() && self.word + 1 < self.words {
            self.word += 1;
            self.bits = self.load_word();
            return true;
        }
        let layout = self.table.layout;
        if u64::from(self.next_page) << layout.shift >= u64::from(self.table.end) {
            return false;
        }
        let page = self.next_page;
        self.next_page += 1;
        self.base = page << layout.shift;
        // A missing page is row 0's when a page holds one row: never written.
        self.page = self.table.page_data(page).map_or(std::ptr::null(), |p| p.as_ptr() as *const u8);
        self.word = 0;
        self.bits = if self.page.is_null() { 0 } else { self.load_word() };
        true
    }

    fn load_word(&self) -> u64 {
        // SAFETY: `word < words`, and the bitmap's `words × 8` bytes start the page.
        let bytes = unsafe { std::slice::from_raw_parts(self.page.add(self.word * 8), 8) };
        bitmap_word(bytes, 0)
    }
}

/// Word `i` of a page's live bitmap (slot `64 i + b` is bit `b`).
#[inline]
fn bitmap_word(page: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(page[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
}

/// A row that recovery cannot put where the log says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// Row 0 means "no row"; rows above [`MAX_ROW`] do not exist.
    #[error("row {row} is out of range")]
    OutOfRange {
        /// The row given.
        row: u32,
    },
    /// The bytes are not one row wide.
    #[error("row {row} given {len} bytes; the table's rows are {width} bytes")]
    Width {
        /// The row given.
        row: u32,
        /// The bytes given.
        len: usize,
        /// The table's row width.
        width: usize,
    },
}

/// The one writer of a table: its private version, and the rows waiting to be reused.
pub struct TableWriter {
    current: TableVersion,
    /// Rows that no snapshot can see any more: handed out again by `insert`, lowest last.
    free: Vec<u32>,
    /// Rows freed while version `.0` was the last published one, oldest first.
    pending: Vec<(u64, Vec<u32>)>,
    /// How to undo the changes to `free` and `pending` since the last publish, newest last:
    /// a savepoint rolls back by restoring its version and undoing these down to its mark.
    undo: Vec<FreeUndo>,
}

/// One change to a writer's free rows, as its undo.
#[derive(Debug, Clone, Copy)]
enum FreeUndo {
    /// `insert` took this row from `free`: put it back.
    Took(u32),
    /// `free` pushed a row on `free` (before the first publish): pop it.
    Freed,
    /// `free` pushed a row on the last `pending` list: pop it (and the list, if it was new).
    Pending { new_list: bool },
}

/// Where [`TableWriter::rollback_to`] returns a table to: its version then (sharing every
/// page) and how much of the free-row undo journal existed.
#[derive(Debug, Clone)]
pub struct TableSavepoint {
    version: TableVersion,
    undo: usize,
}

impl fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableWriter")
            .field("current", &self.current)
            .field("free", &self.free.len())
            .field("pending", &self.pending.iter().map(|(v, r)| (*v, r.len())).collect::<Vec<_>>())
            .finish()
    }
}

impl TableWriter {
    /// An empty table of rows `width` bytes wide (see [`Layout::new`] for the bounds).
    pub fn new(width: usize) -> TableWriter {
        TableWriter {
            current: TableVersion::empty(Layout::new(width)),
            free: Vec::new(),
            pending: Vec::new(),
            undo: Vec::new(),
        }
    }

    /// A point to roll back to: constant time (the version's directory root is shared, so the
    /// first later write to each page copies it once).
    pub fn savepoint(&self) -> TableSavepoint {
        TableSavepoint { version: self.current.clone(), undo: self.undo.len() }
    }

    /// Undoes every insert, write and free since `sp` (taken since the last publish).
    pub fn rollback_to(&mut self, sp: &TableSavepoint) {
        debug_assert!(sp.undo <= self.undo.len(), "savepoint from before the last publish");
        while self.undo.len() > sp.undo {
            match self.undo.pop() {
                Some(FreeUndo::Took(row)) => self.free.push(row),
                Some(FreeUndo::Freed) => {
                    self.free.pop();
                }
                Some(FreeUndo::Pending { new_list }) => {
                    if new_list {
                        self.pending.pop();
                    } else if let Some((_, rows)) = self.pending.last_mut() {
                        rows.pop();
                    }
                }
                None => break,
            }
        }
        self.current = sp.version.clone();
    }

    /// Undoes everything since the last publish: the writer's version becomes `published`
    /// (the version the last [`TableWriter::publish`] or [`TableWriter::publish_version`]
    /// returned).
    pub fn rollback_to_published(&mut self, published: &TableVersion) {
        let sp = TableSavepoint { version: published.clone(), undo: 0 };
        self.rollback_to(&sp);
    }

    /// Recovery: makes `row` live holding `bytes` (a row of the table's width), whether it is
    /// live or not, extending the table to it. Free rows are not kept while replaying: call
    /// [`TableWriter::rebuild_free`] when done.
    pub fn put_at(&mut self, row: u32, bytes: &[u8]) -> Result<(), RowError> {
        if row == 0 || row > MAX_ROW {
            return Err(RowError::OutOfRange { row });
        }
        if bytes.len() != self.current.width() {
            return Err(RowError::Width { row, len: bytes.len(), width: self.current.width() });
        }
        if row >= self.current.end {
            self.current.end = row + 1;
        }
        let layout = self.current.layout;
        let (page, slot) = self.slot_mut(row);
        let was_live = page[slot >> 3] & (1 << (slot & 7)) != 0;
        page[slot >> 3] |= 1 << (slot & 7);
        let start = layout.bitmap_bytes() + slot * layout.width();
        page[start..start + layout.width()].copy_from_slice(bytes);
        if !was_live {
            self.current.live += 1;
        }
        Ok(())
    }

    /// Recovery: makes `row` not live (zeroed), if it is.
    pub fn clear_at(&mut self, row: u32) {
        if !self.current.is_live(row) {
            return;
        }
        let layout = self.current.layout;
        let (page, slot) = self.slot_mut(row);
        page[slot >> 3] &= !(1 << (slot & 7));
        let start = layout.bitmap_bytes() + slot * layout.width();
        page[start..start + layout.width()].fill(0);
        self.current.live -= 1;
    }

    /// Recovery: every row below the end that is not live, in a page that exists, becomes free
    /// (nothing can see them: no snapshot exists yet). The rows of a page that does not exist
    /// (no row of it was live when the checkpoint was written, or recovery never wrote it) are
    /// not handed out again; only their ids go unused. So the free list is bounded by the pages
    /// in memory, whatever row ids the files name (a row id near [`MAX_ROW`] with nothing below
    /// it made this list billions long).
    pub fn rebuild_free(&mut self) {
        let layout = self.current.layout;
        let end = u64::from(self.current.end);
        let mut free = Vec::new();
        for page in self.current.present_pages() {
            let first = (u64::from(page) << layout.shift).max(1);
            let last = ((u64::from(page) + 1) << layout.shift).min(end);
            // Both below `end`, a u32.
            free.extend((first as u32..last as u32).filter(|&r| !self.current.is_live(r)));
        }
        free.reverse(); // lowest last: `insert` pops it first
        self.free = free;
        self.pending.clear();
        self.undo.clear();
    }

    /// The writer's version as it is now (not published): what its own reads see.
    pub fn current(&self) -> &TableVersion {
        &self.current
    }

    /// The version the next publish makes (one more than the last published one).
    pub fn version(&self) -> u64 {
        self.current.version + 1
    }

    /// Row `row` as the writer sees it.
    pub fn row(&self, row: u32) -> Option<&[u8]> {
        self.current.row(row)
    }

    /// A new live row of zero bytes: a reusable freed row if there is one, otherwise the next
    /// row at the end.
    ///
    /// # Panics
    /// When the table already has [`MAX_ROW`] rows (the storage layer checks the bound before
    /// a batch writes, as it does for memory).
    pub fn insert(&mut self) -> u32 {
        let row = match self.free.pop() {
            Some(row) => {
                self.undo.push(FreeUndo::Took(row));
                row
            }
            None => {
                let row = self.current.end;
                assert!(row <= MAX_ROW, "a table holds at most {MAX_ROW} rows");
                self.current.end = row + 1;
                row
            }
        };
        let layout = self.current.layout;
        let (bytes, slot) = self.slot_mut(row);
        debug_assert_eq!(bytes[slot >> 3] & (1 << (slot & 7)), 0, "row {row} handed out while live");
        bytes[slot >> 3] |= 1 << (slot & 7);
        let start = layout.bitmap_bytes() + slot * layout.width();
        bytes[start..start + layout.width()].fill(0);
        self.current.live += 1;
        row
    }

    /// A new row holding `bytes` (exactly `width` of them).
    ///
    /// # Panics
    /// If `bytes` is not one row wide.
    pub fn insert_row(&mut self, bytes: &[u8]) -> u32 {
        assert_eq!(bytes.len(), self.current.width(), "a row is {} bytes", self.current.width());
        let row = self.insert();
        if let Some(r) = self.row_mut(row) {
            r.copy_from_slice(bytes);
        }
        row
    }

    /// Row `row`'s bytes for writing (copying its page first if a published version shares
    /// it), or `None` if the row is not live.
    pub fn row_mut(&mut self, row: u32) -> Option<&mut [u8]> {
        if !self.current.is_live(row) {
            return None;
        }
        let layout = self.current.layout;
        let (bytes, slot) = self.slot_mut(row);
        let start = layout.bitmap_bytes() + slot * layout.width();
        Some(&mut bytes[start..start + layout.width()])
    }

    /// Frees a live row (its bytes are zeroed); it is reused once no snapshot can see it.
    /// Returns whether the row was live.
    pub fn free(&mut self, row: u32) -> bool {
        if !self.current.is_live(row) {
            return false;
        }
        let layout = self.current.layout;
        let (bytes, slot) = self.slot_mut(row);
        bytes[slot >> 3] &= !(1 << (slot & 7));
        let start = layout.bitmap_bytes() + slot * layout.width();
        bytes[start..start + layout.width()].fill(0);
        self.current.live -= 1;
        // Live in every version up to the last published one, `current.version`; before the
        // first publish nobody can have seen it.
        let seen_until = self.current.version;
        if seen_until == 0 {
            self.free.push(row);
            self.undo.push(FreeUndo::Freed);
            return true;
        }
        match self.pending.last_mut() {
            Some((v, rows)) if *v == seen_until => {
                rows.push(row);
                self.undo.push(FreeUndo::Pending { new_list: false });
            }
            _ => {
                self.pending.push((seen_until, vec![row]));
                self.undo.push(FreeUndo::Pending { new_list: true });
            }
        }
        true
    }

    /// Makes rows reusable that no snapshot can see: `oldest` is the oldest version a live
    /// snapshot holds, or [`TableWriter::version`] if none is held. Rows freed while version
    /// `v` was the last published one are reused once `oldest > v` (rows freed before the
    /// first publish at once: nobody can have seen them).
    pub fn release_before(&mut self, oldest: u64) {
        // Inside a batch the rows it freed stay pending: a rollback may still take them back.
        let oldest = if self.undo.is_empty() { oldest } else { oldest.min(self.current.version) };
        let ready = self.pending.iter().take_while(|(v, _)| *v < oldest).count();
        if ready == 0 {
            return;
        }
        for (_, rows) in self.pending.drain(..ready) {
            self.free.extend(rows);
        }
        // Lowest rows first out of `pop`, so that the table stays dense at its start.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// Rows freed and not yet reusable.
    pub fn pending_rows(&self) -> usize {
        self.pending.iter().map(|(_, r)| r.len()).sum()
    }

    /// Publishes the writer's version: the returned `Arc` never changes. The writer goes on
    /// with the next version, sharing every page until it writes it.
    pub fn publish(&mut self) -> Arc<TableVersion> {
        Arc::new(self.publish_version())
    }

    /// [`TableWriter::publish`] without the `Arc`, for a caller that keeps many tables'
    /// versions in one shared value.
    pub fn publish_version(&mut self) -> TableVersion {
        self.current.version += 1;
        self.undo.clear();
        self.current.clone()
    }

    /// The page and slot of `row` for writing: the page and the directory nodes above it are
    /// each copied first if a published version shares them; missing ones are created.
    fn slot_mut(&mut self, row: u32) -> (&mut [u8], usize) {
        let layout = self.current.layout;
        let page = self.page_mut(row >> layout.shift, true).expect("pages are created");
        let bytes = page.make_mut();
        (bytes, (row & layout.mask()) as usize)
    }

    /// Page `page`'s reference for writing, the directory above it copied where shared; a
    /// missing page is created (zeroed) if `create`.
    fn page_mut(&mut self, page: u32, create: bool) -> Option<&mut PageRef> {
        let page_bytes = self.current.layout.page_bytes();
        let slot = self.page_slot(page);
        if slot.is_none() && create {
            *slot = Some(PageRef::new(Page::zeroed(page_bytes)));
        }
        slot.as_mut()
    }

    /// Page `page`'s place in the directory, for writing: the directory grown to reach it and
    /// the nodes above it copied where shared (missing ones created).
    fn page_slot(&mut self, page: u32) -> &mut Option<PageRef> {
        let t = &mut self.current;
        // Grow the directory until it reaches the page: the old root becomes child 0.
        while u64::from(page) >> (FANOUT_SHIFT * (t.height + 1)) != 0 {
            if let Some(old) = t.root.take() {
                let mut up = Dir::new(t.height + 1);
                if let Dir::Inner(children) = &mut up {
                    children[0] = Some(old);
                }
                t.root = Some(DirRef::new(up));
            }
            t.height += 1;
        }
        let height = t.height;
        let mut node = DirRef::make_mut(t.root.get_or_insert_with(|| DirRef::new(Dir::new(height))));
        let mut level = height;
        loop {
            match node {
                Dir::Inner(children) => {
                    let child = children[dir_slot(page, level)].get_or_insert_with(|| DirRef::new(Dir::new(level - 1)));
                    node = DirRef::make_mut(child);
                    level -= 1;
                }
                Dir::Leaf(pages) => return &mut pages[dir_slot(page, 0)],
            }
        }
    }

    /// Recovery from a checkpoint: a table of rows `width` bytes wide made of `pages` (page
    /// number, page; mapped ones), `end` one past the highest row handed out and `live` the
    /// live rows, both as the caller counted them in the pages. Call
    /// [`TableWriter::rebuild_free`] once the log is replayed.
    pub fn from_pages(width: usize, end: u32, live: u32, pages: Vec<(u32, Page)>) -> TableWriter {
        let mut t = TableWriter::new(width);
        t.current.end = end.max(1);
        t.current.live = live;
        for (n, page) in pages {
            debug_assert_eq!(page.len, t.current.layout.page_bytes());
            *t.page_slot(n) = Some(PageRef::new(page));
        }
        t
    }

    /// Replaces page `page` of the writer's version by `mapped` (a checkpoint's copy of the
    /// same bytes), so that its memory can go, if the writer's page is still `was` (the page
    /// of the version the checkpoint wrote: the same page, unchanged since). Compares
    /// identities, not bytes, so that nothing mapped is read. Returns whether it swapped.
    pub fn swap_in_mapped(&mut self, page: u32, was: &Page, mapped: Page) -> bool {
        match self.current.page_ref(page) {
            Some(current) if std::ptr::eq(&*current.page, was) && current.page.len == mapped.len => {}
            _ => return false,
        }
        *self.page_slot(page) = Some(PageRef::new(mapped));
        true
    }

    /// Page `page` of the writer's version (for writing checkpoints).
    pub fn page(&self, page: u32) -> Option<&Page> {
        self.current.page(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Recovery's free list holds the non-live rows of the pages that exist, lowest first out,
    /// and stays small however far apart the rows a file names are (the fuzzer's recovery
    /// target once made it billions of rows long with one row near `MAX_ROW`).
    #[test]
    fn recovery_frees_the_holes_of_present_pages_only() {
        let mut t = TableWriter::new(24); // 128 rows per page
        for row in [3u32, 5, 300, MAX_ROW - 1] {
            t.put_at(row, &[row as u8; 24]).unwrap();
        }
        let started = std::time::Instant::now();
        t.rebuild_free();
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "a walk of the pages, not of the rows");
        // Page 0 (rows 1..128 but 3 and 5), page 2 (256..384 but 300) and the last page.
        let last_page_first = (MAX_ROW - 1) & !127;
        assert_eq!(t.free.len(), 125 + 127 + (MAX_ROW - last_page_first) as usize - 1);
        let firsts: Vec<u32> = (0..4).map(|_| t.insert()).collect();
        assert_eq!(firsts, [1, 2, 4, 6], "lowest rows first");
        assert!(!t.free.contains(&200), "rows of the missing page 1 are not handed out");
        assert!(t.current.is_live(MAX_ROW - 1) && t.current.is_live(300));
    }

    #[test]
    fn layouts() {
        assert_eq!(Layout::new(1).rows_per_page(), 4096);
        assert_eq!(Layout::new(24).rows_per_page(), 128);
        assert_eq!(Layout::new(100).rows_per_page(), 32);
        assert_eq!(Layout::new(2049).rows_per_page(), 1);
        assert_eq!(Layout::new(4096).rows_per_page(), 1);
        assert_eq!(Layout::new(1).bitmap_bytes(), 512);
        assert_eq!(Layout::new(4096).bitmap_bytes(), 8);
    }

    #[test]
    #[should_panic]
    fn too_wide() {
        Layout::new(4097);
    }

    #[test]
    fn one_row_pages_scan_from_row_one() {
        // Row 0's page is never written when a page holds one row; the scan must go past it.
        let mut w = TableWriter::new(4096);
        let r = w.insert();
        assert_eq!(w.current().rows().map(|(row, _)| row).collect::<Vec<_>>(), vec![r]);
    }

    #[test]
    fn tall_directories() {
        // One row per page: 5,000 rows need a directory three levels tall.
        let mut w = TableWriter::new(4096);
        for i in 0..5_000u32 {
            let r = w.insert();
            w.row_mut(r).unwrap()[..4].copy_from_slice(&i.to_le_bytes());
        }
        let snap = w.publish();
        w.row_mut(4_500).unwrap()[0] = 0xaa;
        assert!(w.free(4_096));
        let rows: Vec<u32> = snap.rows().map(|(r, b)| u32::from_le_bytes(b[..4].try_into().unwrap()) + 1 - r).collect();
        assert_eq!(rows, vec![0; 5_000]);
        assert_eq!(snap.row(4_500).unwrap()[0], (4_499u32 & 0xff) as u8);
        assert_eq!(w.row(4_500).unwrap()[0], 0xaa);
        assert!(snap.is_live(4_096) && !w.current().is_live(4_096));
        assert_eq!(w.current().rows().count(), 4_999);
    }

    #[test]
    fn row_zero_is_never_live() {
        let mut w = TableWriter::new(8);
        assert_eq!(w.insert(), 1);
        assert!(w.row(0).is_none());
        assert!(w.row_mut(0).is_none());
        assert!(!w.free(0));
    }

    #[test]
    fn snapshot_unchanged_and_rows_not_reused_while_seen() {
        let mut w = TableWriter::new(16);
        let rows: Vec<u32> = (0..1000u32)
            .map(|i| {
                let r = w.insert();
                w.row_mut(r).unwrap()[..4].copy_from_slice(&i.to_le_bytes());
                r
            })
            .collect();
        let snap = w.publish();
        let before: Vec<(u32, Vec<u8>)> = snap.rows().map(|(r, b)| (r, b.to_vec())).collect();
        assert!(w.free(rows[10]));
        w.row_mut(rows[11]).unwrap()[0] = 0xff;
        let v1 = w.publish();
        // The snapshot at version 1 sees row 10; oldest live is 1: not reusable.
        w.release_before(snap.version());
        assert_ne!(w.insert(), rows[10]);
        drop(snap);
        w.release_before(v1.version());
        assert_eq!(w.insert(), rows[10]);
        let after: Vec<(u32, Vec<u8>)> = v1.rows().map(|(r, b)| (r, b.to_vec())).collect();
        assert_eq!(after.len(), before.len() - 1);
        assert_eq!(before.iter().find(|(r, _)| *r == rows[11]).unwrap().1[0], 11);
        assert_eq!(v1.row(rows[11]).unwrap()[0], 0xff);
    }

    #[test]
    fn mapped_pages_read_like_heap_pages() {
        let mut w = TableWriter::new(40);
        for i in 0..300u32 {
            let r = w.insert();
            w.row_mut(r).unwrap()[..4].copy_from_slice(&i.to_le_bytes());
        }
        let layout = w.current().layout();
        let pages = (w.current().end() as usize).div_ceil(layout.rows_per_page());
        // A "checkpoint file": the pages back to back, shared read-only.
        let mut file = Vec::new();
        for p in 0..pages {
            file.extend_from_slice(w.page(p as u32).unwrap().bytes());
        }
        let before: Vec<(u32, Vec<u8>)> = w.current().rows().map(|(r, b)| (r, b.to_vec())).collect();
        let file: Arc<dyn StableBytes> = Arc::new(file);
        let written = w.publish();
        for p in 0..pages {
            let page = Page::mapped(file.clone(), p * layout.page_bytes(), layout, 0).unwrap();
            assert!(page.is_mapped());
            assert_eq!(page.file_place(), None, "a Vec is not a checkpoint file");
            assert!(w.swap_in_mapped(p as u32, written.page(p as u32).unwrap(), page));
        }
        // A page that changed since is not swapped.
        let stale = Page::mapped(file.clone(), 0, layout, 0).unwrap();
        w.row_mut(1).unwrap()[0] = 1;
        assert!(!w.swap_in_mapped(0, written.page(0).unwrap(), stale));
        w.row_mut(1).unwrap()[0] = 0;
        let snap = w.publish();
        let after: Vec<(u32, Vec<u8>)> = snap.rows().map(|(r, b)| (r, b.to_vec())).collect();
        assert_eq!(before, after);
        // Writing a mapped page copies it to the heap; the snapshot keeps the mapped one.
        w.row_mut(5).unwrap()[0] = 0xee;
        assert!(!w.page(0).unwrap().is_mapped());
        assert!(snap.row(5).unwrap()[0] != 0xee);
        assert!(Page::mapped(file, pages * layout.page_bytes(), layout, 0).is_none());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Write(usize, u8),
        Free(usize),
        Publish,
        DropSnapshot(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Insert),
            3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b)),
            2 => any::<usize>().prop_map(Op::Free),
            1 => Just(Op::Publish),
            1 => any::<usize>().prop_map(Op::DropSnapshot),
        ]
    }

    type Model = BTreeMap<u32, Vec<u8>>;

    fn content(t: &TableVersion) -> Model {
        t.rows().map(|(r, b)| (r, b.to_vec())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// The table against a BTreeMap model: every snapshot keeps its content, rows are
        /// never reused while a snapshot that saw them lives, and reads agree with scans.
        #[test]
        fn model_equivalence(width in prop_oneof![Just(1usize), Just(3), Just(24), Just(700), Just(4096)],
                             ops in proptest::collection::vec(op(), 1..400)) {
            let mut w = TableWriter::new(width);
            let mut model = Model::new();
            // Each live snapshot with the model content it had when published.
            let mut snaps: Vec<(Arc<TableVersion>, Model)> = Vec::new();
            // Rows each snapshot saw live (so that reuse can be checked).
            for op in ops {
                match op {
                    Op::Insert(b) => {
                        let row = w.insert();
                        prop_assert!(!model.contains_key(&row));
                        for (s, m) in &snaps {
                            prop_assert!(!m.contains_key(&row), "row {} reused while snapshot {} sees it", row, s.version());
                        }
                        let bytes = w.row_mut(row).unwrap();
                        prop_assert!(bytes.iter().all(|&x| x == 0));
                        bytes[width - 1] = b;
                        bytes[0] = b;
                        model.insert(row, bytes.to_vec());
                    }
                    Op::Write(i, b) => {
                        if model.is_empty() { continue; }
                        let row = *model.keys().nth(i % model.len()).unwrap();
                        let bytes = w.row_mut(row).unwrap();
                        bytes[i % width] = b;
                        model.get_mut(&row).unwrap()[i % width] = b;
                    }
                    Op::Free(i) => {
                        if model.is_empty() { continue; }
                        let row = *model.keys().nth(i % model.len()).unwrap();
                        prop_assert!(w.free(row));
                        prop_assert!(!w.free(row));
                        model.remove(&row);
                    }
                    Op::Publish => {
                        let s = w.publish();
                        prop_assert_eq!(content(&s), model.clone());
                        snaps.push((s, model.clone()));
                    }
                    Op::DropSnapshot(i) => {
                        if !snaps.is_empty() {
                            snaps.remove(i % snaps.len());
                        }
                    }
                }
                let oldest = snaps.iter().map(|(s, _)| s.version()).min().unwrap_or(w.version());
                w.release_before(oldest);
                prop_assert_eq!(w.current().len() as usize, model.len());
            }
            prop_assert_eq!(content(w.current()), model.clone());
            for (row, bytes) in &model {
                prop_assert_eq!(w.row(*row), Some(&bytes[..]));
            }
            for (s, m) in &snaps {
                prop_assert_eq!(&content(s), m);
                for (row, bytes) in m {
                    prop_assert_eq!(s.row(*row), Some(&bytes[..]));
                }
                prop_assert_eq!(s.len() as usize, m.len());
            }
        }
    }
}
