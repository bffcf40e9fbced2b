//! Number indexes read whole into a hash map once a run has probed them often: the hash join
//! built from the index's side. A join such as OO7's Q8 (`ap number : 'Doc Id' == doc number
//! : 'Id'`, planned as a probe of the documents' index for every atomic part) probes a small
//! index 100,000 times, each a descent of its key index. After a sixteenth of the index's
//! entries' worth of probes (and at least [`WHOLE_AFTER`]), the index is read once in order
//! and every later probe is a hash lookup. The run's snapshot never changes under it, so the
//! map stays true; it is bounded in entries.

use espalier_data::NodeId;

use super::fast_hash::FastMap;
use super::link_set::read_runs;
use crate::InstructionError;

/// The most entries all maps of one run hold together (8 bytes each, and a map slot per
/// value); a larger index is probed by descents.
const MAX_ENTRIES: usize = 1 << 20;

/// Probes of one index after which it is read whole, at the least.
const WHOLE_AFTER: u64 = 256;

/// The most indexes kept: a plan probes far fewer.
const MAX_MAPS: usize = 16;

type Result<T> = std::result::Result<T, InstructionError>;

/// Where one value's entries lie in [`IndexSets::rows`]: start and length.
pub(super) type Run = (u32, u32);

enum State {
    /// Probed by descents so far, this many times.
    Probing(u64),
    /// Read whole: each value's entries, in index order.
    Whole(FastMap<i64, Run>),
    /// Too large to read whole, or not a number index: descents.
    Never,
}

/// The number indexes of one run of a plan, read whole once probed often.
#[derive(Default)]
pub(super) struct IndexSets {
    maps: Vec<(u32, State)>,
    rows: Vec<NodeId>,
}

/// Where the entries come from: one number index in the run's snapshot.
pub(super) trait NumberIndex {
    /// How many entries the index has.
    fn count(&self) -> Result<u64>;
    /// Sends every (number, entry) to `sink` in index order, until it says no more.
    fn read_all(&self, sink: &mut dyn FnMut(i64, NodeId) -> bool) -> Result<()>;
}

impl IndexSets {
    /// The entries of index `n` with value `value`, in index order, when the index is read
    /// whole (reading it now if it has been probed often enough); `None`: probe it.
    /// The entries come back as a run of [`IndexSets::row`]s, so that no borrow is held while
    /// the caller joins them (and probes again).
    pub(super) fn probe(&mut self, n: u32, value: i64, source: &dyn NumberIndex) -> Result<Option<Run>> {
        let m = match self.maps.iter().position(|(i, _)| *i == n) {
            Some(m) => m,
            None if self.maps.len() < MAX_MAPS => {
                self.maps.push((n, State::Probing(0)));
                self.maps.len() - 1
            }
            None => return Ok(None),
        };
        if let State::Probing(probes) = &mut self.maps[m].1 {
            *probes += 1;
            let probes = *probes;
            if probes < WHOLE_AFTER {
                return Ok(None);
            }
            let count = source.count()?;
            if probes < count / 16 {
                return Ok(None);
            }
            self.maps[m].1 = self.read_whole(count, source)?;
        }
        Ok(match &self.maps[m].1 {
            State::Whole(map) => Some(map.get(&value).copied().unwrap_or((0, 0))),
            State::Probing(_) | State::Never => None,
        })
    }

    /// Entry `i` of `run`.
    pub(super) fn row(&self, run: Run, i: usize) -> NodeId {
        debug_assert!(i < run.1 as usize);
        self.rows[run.0 as usize + i]
    }

    /// The index read whole, or [`State::Never`] when it does not fit the bound.
    fn read_whole(&mut self, count: u64, source: &dyn NumberIndex) -> Result<State> {
        if count > (MAX_ENTRIES - self.rows.len()) as u64 {
            return Ok(State::Never);
        }
        let mut map: FastMap<i64, Run> = FastMap::default();
        let fits = read_runs(
            &mut self.rows,
            MAX_ENTRIES,
            |sink| source.read_all(sink),
            |_: i64| true,
            |value, first, rows| {
                // The bound keeps offsets and lengths in u32.
                map.insert(value, (first as u32, (rows.len() - first) as u32));
            },
        )?;
        Ok(if fits { State::Whole(map) } else { State::Never })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_schema::NodeTypeId;
    use std::cell::Cell;

    /// An index of `entries` entries: entry `i` has value `i / 3` (three per value).
    struct Fake {
        entries: u32,
        reads: Cell<u32>,
    }

    impl NumberIndex for Fake {
        fn count(&self) -> Result<u64> {
            Ok(u64::from(self.entries))
        }

        fn read_all(&self, sink: &mut dyn FnMut(i64, NodeId) -> bool) -> Result<()> {
            self.reads.set(self.reads.get() + 1);
            for i in 0..self.entries {
                if !sink(i64::from(i / 3), NodeId::new(NodeTypeId::new(2), i)) {
                    break;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn an_index_probed_often_is_read_once_and_answers_as_its_probes() {
        let fake = Fake { entries: 600, reads: Cell::new(0) };
        let mut sets = IndexSets::default();
        for i in 0..WHOLE_AFTER - 1 {
            assert_eq!(sets.probe(7, i as i64, &fake).unwrap(), None, "descents first");
        }
        assert_eq!(fake.reads.get(), 0);
        for v in [0i64, 5, 199, 200, -1] {
            let run = sets.probe(7, v, &fake).unwrap().expect("read whole");
            let got: Vec<u32> = (0..run.1 as usize).map(|i| sets.row(run, i).row()).collect();
            let want: Vec<u32> = (0..600).filter(|i| i64::from(i / 3) == v).collect();
            assert_eq!(got, want, "value {v}");
        }
        assert_eq!(fake.reads.get(), 1);
    }

    #[test]
    fn an_index_larger_than_the_bound_is_probed_by_descents() {
        let fake = Fake { entries: MAX_ENTRIES as u32 + 1, reads: Cell::new(0) };
        let mut sets = IndexSets::default();
        for i in 0..(MAX_ENTRIES / 16 + 10) as i64 {
            assert_eq!(sets.probe(1, i, &fake).unwrap(), None);
        }
        assert_eq!(fake.reads.get(), 0, "the count alone refuses it");
    }
}
