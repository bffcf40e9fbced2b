//! The texts of a checkpoint (format 3): what the checkpoints keep between them about where
//! the texts lie ([`TextState`]), and writing the texts stored since the last checkpoint as
//! records of the new file (see [`crate::tables::texts`] for the record).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Out;
use crate::mapping::MappedFile;
use crate::table::{StableBytes, TableWriter};
use crate::tables::texts::{dir_row, parse_dir_row, parse_header, record_header, MappedTexts, DIR_WIDTH, HEADER};
use crate::tables::{Snapshot, TablesError};

/// Where the texts lie, kept by the checkpoints from one to the next (the checkpoint thread's
/// own: the writer reads texts through the [`MappedTexts`] it is handed).
pub struct TextState {
    /// The text directory: id → (generation, offset), for every live text in a file.
    pub dir: TableWriter,
    /// The files holding live texts, by generation.
    pub files: BTreeMap<u64, Arc<MappedFile>>,
    /// Each such file's text region: (offset, length).
    pub regions: BTreeMap<u64, (u64, u64)>,
    /// Bytes of live records in each such file (dead ones are garbage until a rewrite).
    pub live: BTreeMap<u64, u64>,
}

impl Default for TextState {
    fn default() -> Self {
        TextState {
            dir: TableWriter::new(DIR_WIDTH),
            files: BTreeMap::new(),
            regions: BTreeMap::new(),
            live: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for TextState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextState").field("texts", &self.dir.current().len()).field("live", &self.live).finish()
    }
}

/// A [`TextState`] as it was, to go back to if a checkpoint fails.
pub struct SavedTexts {
    dir: crate::table::TableVersion,
    regions: BTreeMap<u64, (u64, u64)>,
    live: BTreeMap<u64, u64>,
}

impl TextState {
    /// The state now, to [`TextState::restore`] if the checkpoint being written fails.
    pub fn save(&mut self) -> SavedTexts {
        SavedTexts { dir: self.dir.publish_version(), regions: self.regions.clone(), live: self.live.clone() }
    }

    /// Back to `saved`: the places a failed checkpoint gave are forgotten (its file is gone or
    /// not named by the manifest), so the next checkpoint writes those texts again.
    pub fn restore(&mut self, saved: &SavedTexts) {
        self.dir.rollback_to_published(&saved.dir);
        self.regions = saved.regions.clone();
        self.live = saved.live.clone();
    }

    /// What readers see: the directory as published now, and the files.
    pub fn mapped(&mut self) -> MappedTexts {
        MappedTexts::new(self.dir.publish_version(), self.files.values().cloned().collect())
    }

    /// Bytes of the record at `(generation, offset)`, read from its mapped file (0 if the file
    /// is not known: it is then not counted anywhere).
    fn record_bytes(&self, generation: u64, offset: u64) -> u64 {
        let Some(file) = self.files.get(&generation) else { return 0 };
        let bytes = file.bytes();
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        let header = at.checked_add(HEADER).and_then(|end| bytes.get(at..end));
        header.and_then(parse_header).map_or(0, |(len, _, _)| (HEADER + len) as u64)
    }

    /// Text `id` is no longer where the directory says: its record becomes garbage.
    fn forget(&mut self, id: u32) {
        let Some((g, offset)) = self.dir.current().row(id).and_then(parse_dir_row) else { return };
        let size = self.record_bytes(g, offset);
        if let Some(live) = self.live.get_mut(&g) {
            *live = live.saturating_sub(size);
        }
    }
}

/// Writes to `out` (the checkpoint of generation `generation`) the texts `snapshot` holds on
/// the heap, or every text if `rewrite`, and updates `state`'s directory: places for the texts
/// written, none for the texts freed since the last checkpoint. The caller restores `state` if
/// the checkpoint then fails.
pub(super) fn write_texts(
    out: &mut Out,
    snapshot: &Snapshot,
    generation: u64,
    rewrite: bool,
    state: &mut TextState,
) -> Result<(), TablesError> {
    let strings = &snapshot.strings;
    let start = out.at;
    let put = |out: &mut Out, state: &mut TextState, id: u32, bytes: &[u8]| -> Result<(), TablesError> {
        let offset = out.at;
        out.write(&record_header(id, bytes))?;
        out.write(bytes)?;
        state.dir.put_at(id, &dir_row(generation, offset))?;
        *state.live.entry(generation).or_default() += (HEADER + bytes.len()) as u64;
        Ok(())
    };
    if rewrite {
        state.dir = TableWriter::new(DIR_WIDTH);
        state.live.clear();
        state.regions.clear();
        for (id, _, bytes) in strings.iter() {
            put(out, state, id as u32, bytes)?;
        }
    } else {
        for (id, text) in strings.heap_texts() {
            if strings.count(u64::from(id)).is_none() {
                continue;
            }
            state.forget(id);
            put(out, state, id, text.bytes())?;
        }
        // A text freed since the last checkpoint changed its count's page, which is then on
        // the heap: its rows that are not live lose their place.
        let counts = strings.counts();
        let shift = counts.layout().rows_per_page().trailing_zeros();
        for p in counts.present_pages() {
            if counts.page(p).is_none_or(|page| page.is_mapped()) {
                continue;
            }
            let first = u64::from(p) << shift;
            for row in first..first + counts.layout().rows_per_page() as u64 {
                let Ok(row) = u32::try_from(row) else { break };
                if !counts.is_live(row) && state.dir.current().is_live(row) {
                    state.forget(row);
                    state.dir.clear_at(row);
                }
            }
        }
    }
    if out.at > start {
        state.regions.insert(generation, (start, out.at - start));
    }
    Ok(())
}
