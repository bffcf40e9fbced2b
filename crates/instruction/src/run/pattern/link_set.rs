//! The matrix links of the nodes a run has walked from, kept for the rest of the run. Nested
//! loops come back to the same nodes: ConnectedSegments follows every segment's `'Connects
//! To'` from up to five places in the chain, and a reach filter such as `route > 'Requires'
//! reaches sensor` asks one route's matrix for every sensor bound inside it. Each of those is
//! a descent of the matrix's key index; read into a list here the second time, the next is an
//! array lookup, and a reach filter a binary search in the list. The run's snapshot never changes under it,
//! so a list stays true; the lists are bounded in number and in links.

use espalier_data::NodeId;
use espalier_schema::PropertyId;

use crate::InstructionError;

/// The most links all lists of one run hold together (8 bytes each); nodes read after are
/// walked from the key index each time.
const MAX_LINKS: usize = 1 << 20;

/// The most links one list holds: a node with more is walked from the key index each time (a
/// walk that stops early would otherwise read them all).
const MAX_LIST: usize = 4096;

/// The most (property, side) pairs kept: a plan names far fewer.
const MAX_MAPS: usize = 64;

/// Starts are kept by row below this (the maps are arrays by row: 16 bytes a row at most).
const MAX_ROWS: usize = 1 << 21;

/// Which side of a link the start is on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Side {
    /// The start owns matrix entries; its list holds their targets, in key order.
    Owner,
    /// The start is a target; its list holds the owners of the entries that point at it.
    Target,
}

/// Where a start's links lie in [`LinkSets::links`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct List {
    start: u32,
    len: u32,
    /// Whether the links are in id order (then a search is a binary search).
    sorted: bool,
}

impl List {
    /// How many links the list has.
    pub(super) fn len(self) -> usize {
        self.len as usize
    }
}

/// A start's entry in its map: never asked about, asked once, its list, or too long a list.
#[derive(Clone, Copy)]
enum Known {
    Never,
    Once,
    Listed(List),
    TooLong,
}

/// The lists of one (property, side), by the start's row: rows are dense, so an array is
/// both smaller and faster than a hash map.
struct Map {
    property: PropertyId,
    side: Side,
    by_row: Vec<Known>,
}

/// The lists of one run of a plan.
#[derive(Default)]
pub(super) struct LinkSets {
    maps: Vec<Map>,
    links: Vec<NodeId>,
}

type Result<T> = std::result::Result<T, InstructionError>;

impl LinkSets {
    /// `start`'s links through `property` on `side`, once it is asked about a second time:
    /// the kept list, or a new one filled by `read` (which sends every link to its sink
    /// until the sink says no more). `None` the first time (a node walked from once costs
    /// nothing more than the walk), and when the list is too long or a bound is reached:
    /// walk the key index instead.
    pub(super) fn list(
        &mut self,
        property: PropertyId,
        side: Side,
        start: NodeId,
        read: impl FnOnce(&mut dyn FnMut(NodeId) -> bool) -> Result<()>,
    ) -> Result<Option<List>> {
        let m = match self.maps.iter().position(|m| m.property == property && m.side == side) {
            Some(m) => m,
            None if self.maps.len() < MAX_MAPS => {
                self.maps.push(Map { property, side, by_row: Vec::new() });
                self.maps.len() - 1
            }
            None => return Ok(None),
        };
        let row = start.row() as usize;
        if row >= MAX_ROWS {
            return Ok(None);
        }
        let by_row = &mut self.maps[m].by_row;
        if by_row.len() <= row {
            by_row.resize((row + 1).next_power_of_two().min(MAX_ROWS), Known::Never);
        }
        match by_row[row] {
            Known::Never => {
                by_row[row] = Known::Once;
                return Ok(None);
            }
            Known::Listed(list) => return Ok(Some(list)),
            Known::TooLong => return Ok(None),
            Known::Once => {}
        }
        if self.links.len() > MAX_LINKS - MAX_LIST {
            return Ok(None);
        }
        let first = self.links.len();
        let links = &mut self.links;
        let mut fits = true;
        read(&mut |id| {
            fits = links.len() - first < MAX_LIST;
            if fits {
                links.push(id);
            }
            fits
        })?;
        let known = if fits {
            let added = &self.links[first..];
            let sorted = added.windows(2).all(|w| w[0] < w[1]);
            // The bounds keep offsets and lengths in u32.
            Known::Listed(List { start: first as u32, len: added.len() as u32, sorted })
        } else {
            self.links.truncate(first);
            Known::TooLong
        };
        self.maps[m].by_row[row] = known;
        Ok(match known {
            Known::Listed(list) => Some(list),
            _ => None,
        })
    }

    /// Link `i` of `list`.
    pub(super) fn link(&self, list: List, i: usize) -> NodeId {
        debug_assert!(i < list.len());
        self.links[list.start as usize + i]
    }

    /// Whether `list` holds `goal`.
    pub(super) fn contains(&self, list: List, goal: NodeId) -> bool {
        let links = &self.links[list.start as usize..][..list.len()];
        if list.sorted {
            links.binary_search(&goal).is_ok()
        } else {
            links.contains(&goal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_schema::NodeTypeId;
    use std::cell::Cell;

    fn id(row: u32) -> NodeId {
        NodeId::new(NodeTypeId::new(1), row)
    }

    #[test]
    fn a_start_is_read_the_second_time_and_its_list_answers_as_the_links_do() {
        let reads = Cell::new(0);
        let mut sets = LinkSets::default();
        let p = PropertyId::new(2);
        let links = |start: u32| -> Vec<NodeId> { (0..start).map(|i| id(start * 10 + i)).collect() };
        let mut list = |start: u32, side: Side| {
            sets.list(p, side, id(start), |sink| {
                reads.set(reads.get() + 1);
                for l in links(start) {
                    if !sink(l) {
                        break;
                    }
                }
                Ok(())
            })
            .unwrap()
        };
        assert_eq!((list(3, Side::Owner), list(5, Side::Owner)), (None, None), "the first time: walk");
        assert_eq!(reads.get(), 0);
        let (a, b) = (list(3, Side::Owner).unwrap(), list(5, Side::Owner).unwrap());
        assert_eq!((list(3, Side::Owner), list(5, Side::Owner)), (Some(a), Some(b)));
        assert_eq!(reads.get(), 2, "a start is read once");
        assert_eq!(list(3, Side::Target), None, "the other side is another map");
        let other = list(3, Side::Target).unwrap();
        assert_eq!(reads.get(), 3);
        assert_eq!((0..a.len()).map(|i| sets.link(a, i)).collect::<Vec<_>>(), links(3));
        assert_eq!(other.len(), 3);
        assert!(sets.contains(b, id(52)) && !sets.contains(b, id(55)) && !sets.contains(b, id(32)));
    }

    #[test]
    fn a_list_longer_than_the_bound_is_not_kept_and_not_read_again() {
        let reads = Cell::new(0);
        let mut sets = LinkSets::default();
        for _ in 0..3 {
            let got = sets
                .list(PropertyId::new(1), Side::Owner, id(1), |sink| {
                    reads.set(reads.get() + 1);
                    let mut row = 0;
                    while sink(id(row)) {
                        row += 1;
                        assert!(row as usize <= MAX_LIST, "the sink says stop past the bound");
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(got, None);
        }
        assert_eq!(reads.get(), 1);
        assert!(sets.links.is_empty());
    }
}
