//! The matrix links of the nodes a run walks from, kept for the rest of the run. Nested loops
//! come back to the same nodes: ConnectedSegments follows every segment's `'Connects To'` from
//! up to five places in the chain, and a reach filter such as `route > 'Requires' reaches
//! sensor` asks one route's matrix for every sensor bound inside it. Each of those is a
//! descent of the matrix's key index. Here a node's links are read into a list the second
//! time it is asked about; the asks after are an array lookup, and a reach filter a binary
//! search in the list. A run that asks about many nodes of one matrix (a sixteenth of its
//! links' worth) reads the whole matrix once, in key order, which costs less than the
//! descents it saves. The run's snapshot never changes under it, so a list stays true; the
//! lists are bounded in number and in links.

use espalier_data::NodeId;
use espalier_schema::PropertyId;

use super::fast_hash::FastMap;
use crate::InstructionError;

/// The most links all lists of one run hold together (8 bytes each); nodes read after are
/// walked from the key index each time.
const MAX_LINKS: usize = 1 << 20;

/// The most links one list read alone holds: a node with more is walked from the key index
/// each time (a walk that stops early would otherwise read them all).
const MAX_LIST: usize = 4096;

/// The most (property, side) pairs kept: a plan names far fewer.
const MAX_MAPS: usize = 16;

/// Starts are kept by row below this. The maps are arrays by row, 12 bytes a row and grown
/// to the largest row asked about: with [`MAX_LINKS`], a run keeps at most 16 × 12 MiB of
/// maps and 8 MiB of links, and far less when its tables are smaller.
const MAX_ROWS: usize = 1 << 20;

/// Starts a map keeps in a hash map before it becomes an array by row. A registered query's
/// refresh asks about a few starts scattered over a large table (ConnectedSegments' seeds,
/// rows up to 100,000): an array grown to the largest of them was megabytes allocated,
/// filled and copied as it doubled, for a handful of entries.
const SPARSE_ROWS: usize = 1024;

/// Rows an array by row may cover however few starts it holds (48 KiB): a small table's
/// starts (RouteSensor's 320 routes) stay in an array, whose lookup is an index.
const DENSE_ROWS: usize = 4096;

/// Descents of one matrix after which the whole of it is read, at the least (a matrix's
/// links are read whole after a sixteenth of their number of descents).
const WHOLE_AFTER: u64 = 256;

/// Which side of a link the start is on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Side {
    /// The start owns matrix entries; its list holds their targets, in key order.
    Owner,
    /// The start is a target; its list holds the owners of the entries that point at it.
    Target,
}

/// Where the links come from: one matrix, seen from one side, in the run's snapshot.
pub(super) trait Links {
    /// How many links the matrix has (its key index's entries).
    fn count(&self) -> Result<u64>;
    /// Sends `start`'s links to `sink`, in key order, until it says no more (or fails: the
    /// error is returned).
    fn read(&self, start: NodeId, sink: &mut dyn FnMut(NodeId) -> Result<bool>) -> Result<()>;
    /// Sends every link with its start's row to `sink`, in key order (so by start row),
    /// until it says no more.
    fn read_all(&self, sink: &mut dyn FnMut(u32, NodeId) -> bool) -> Result<()>;
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
    const EMPTY: List = List { start: 0, len: 0, sorted: true };

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

/// Starts by row: an array while it is small or holds many starts (rows are dense, so then
/// it is both smaller and faster than a hash map), a hash map while a few starts are
/// scattered over many rows.
enum Rows {
    /// The array and how many times a start was set in it.
    Dense(Vec<Known>, usize),
    Sparse(FastMap<u32, Known>),
}

/// The length an array by row grows to so that it holds `row` (below [`MAX_ROWS`]): the next
/// power of two, so that growing row by row copies it a few times only.
fn array_rows(row: usize) -> usize {
    (row + 1).next_power_of_two().min(MAX_ROWS)
}

impl Rows {
    /// What is known of the start at `row` (below [`MAX_ROWS`]).
    #[inline]
    fn get(&self, row: usize) -> Known {
        match self {
            Rows::Dense(rows, _) => rows.get(row).copied().unwrap_or(Known::Never),
            Rows::Sparse(rows) => rows.get(&(row as u32)).copied().unwrap_or(Known::Never),
        }
    }

    /// Records `known` for the start at `row` (below [`MAX_ROWS`]).
    fn set(&mut self, row: usize, known: Known) {
        debug_assert!(row < MAX_ROWS, "rows at or past MAX_ROWS are never kept");
        match self {
            Rows::Dense(rows, sets) => {
                if rows.len() <= row {
                    let len = array_rows(row);
                    if len > DENSE_ROWS && *sets < SPARSE_ROWS {
                        // Few starts so far, and a row far out: into a hash map (the array
                        // covers at most DENSE_ROWS rows here).
                        let mut map = FastMap::with_capacity_and_hasher(2 * *sets + 1, Default::default());
                        for (r, &k) in rows.iter().enumerate().filter(|(_, k)| !matches!(k, Known::Never)) {
                            map.insert(r as u32, k);
                        }
                        map.insert(row as u32, known);
                        *self = Rows::Sparse(map);
                        return;
                    }
                    rows.resize(len, Known::Never);
                }
                rows[row] = known;
                *sets += 1;
            }
            Rows::Sparse(map) => {
                if map.len() < SPARSE_ROWS || map.contains_key(&(row as u32)) {
                    map.insert(row as u32, known);
                    return;
                }
                // Many starts: an array from here on (it never goes back).
                let largest = map.keys().copied().max().unwrap_or(0) as usize;
                let mut dense = vec![Known::Never; array_rows(largest.max(row))];
                for (&r, &k) in map.iter() {
                    dense[r as usize] = k;
                }
                dense[row] = known;
                *self = Rows::Dense(dense, SPARSE_ROWS + 1);
            }
        }
    }
}

/// The lists of one (property, side), by the start's row.
struct Map {
    property: PropertyId,
    side: Side,
    by_row: Rows,
    /// Descents made for this map's starts.
    descents: u64,
    /// Whether the whole matrix is read (every start not listed has no links), and whether
    /// reading it failed a bound (then it is not tried again).
    whole: bool,
    no_whole: bool,
}

/// The lists of one run of a plan.
#[derive(Default)]
pub(super) struct LinkSets {
    maps: Vec<Map>,
    links: Vec<NodeId>,
    /// The list [`LinkSets::list_repeated`] handed out last, and whose it is. A list never
    /// changes once made, so this answer stays true.
    last: Option<(PropertyId, Side, NodeId, List)>,
}

type Result<T> = std::result::Result<T, InstructionError>;

/// Reads a stream of (key, id) pairs in key order (`read` sends them to its sink) onto the
/// end of `ids`; for each key, once its last pair is read, `run(key, first, ids)` is called,
/// the key's ids being `ids[first..]`. `false`, with `ids` as before, when a key is not
/// `accepted` or `ids` would grow past `max`: the stream is not kept.
pub(super) fn read_runs<K: Copy + PartialEq>(
    ids: &mut Vec<NodeId>,
    max: usize,
    read: impl FnOnce(&mut dyn FnMut(K, NodeId) -> bool) -> Result<()>,
    accepted: impl Fn(K) -> bool,
    mut run: impl FnMut(K, usize, &[NodeId]),
) -> Result<bool> {
    let before = ids.len();
    let mut current: Option<(K, usize)> = None; // the key being read, where its ids start
    let mut fits = true;
    read(&mut |key, id| {
        fits = accepted(key) && ids.len() < max;
        if !fits {
            return false;
        }
        match current {
            Some((k, _)) if k == key => {}
            Some((k, first)) => {
                run(k, first, ids);
                current = Some((key, ids.len()));
            }
            None => current = Some((key, ids.len())),
        }
        ids.push(id);
        true
    })?;
    if !fits {
        ids.truncate(before);
        return Ok(false);
    }
    if let Some((k, first)) = current {
        run(k, first, ids);
    }
    Ok(true)
}

/// The list of `links` from `first` to the end.
fn list_of(links: &[NodeId], first: usize) -> List {
    let added = &links[first..];
    let sorted = added.windows(2).all(|w| w[0] < w[1]);
    // The bounds keep offsets and lengths in u32.
    List { start: first as u32, len: added.len() as u32, sorted }
}

impl LinkSets {
    /// [`LinkSets::list`], answering the start it was asked about last again without the
    /// maps: a reach filter asks about one start many times in a row (a route's required
    /// sensors, for every sensor bound inside the route). Walks do not: they go from one node
    /// to the next, and the check and the store cost them 6% (SemaphoreNeighbor).
    pub(super) fn list_repeated(
        &mut self,
        property: PropertyId,
        side: Side,
        start: NodeId,
        source: &dyn Links,
    ) -> Result<Option<List>> {
        if let Some((p, s, id, list)) = self.last {
            if p == property && s == side && id == start {
                return Ok(Some(list));
            }
        }
        let list = self.list(property, side, start, source)?;
        if let Some(list) = list {
            self.last = Some((property, side, start, list));
        }
        Ok(list)
    }

    /// `start`'s links through `property` on `side` from `source`, once it is asked about a
    /// second time or the whole matrix is read; `None` the first time (a node walked from
    /// once costs nothing more than the walk), and when the list is too long or a bound is
    /// reached: walk the key index instead.
    pub(super) fn list(
        &mut self,
        property: PropertyId,
        side: Side,
        start: NodeId,
        source: &dyn Links,
    ) -> Result<Option<List>> {
        let m = match self.maps.iter().position(|m| m.property == property && m.side == side) {
            Some(m) => m,
            None if self.maps.len() < MAX_MAPS => {
                let map = Map {
                    property,
                    side,
                    by_row: Rows::Dense(Vec::new(), 0),
                    descents: 0,
                    whole: false,
                    no_whole: false,
                };
                self.maps.push(map);
                self.maps.len() - 1
            }
            None => return Ok(None),
        };
        let row = start.row() as usize;
        if row >= MAX_ROWS {
            return Ok(None);
        }
        let map = &mut self.maps[m];
        if map.whole {
            return Ok(match map.by_row.get(row) {
                Known::Listed(list) => Some(list),
                _ => Some(List::EMPTY),
            });
        }
        match map.by_row.get(row) {
            Known::Listed(list) => return Ok(Some(list)),
            Known::TooLong => return Ok(None),
            _ => {}
        }
        // A descent follows, to walk or to read the list.
        map.descents += 1;
        if !map.no_whole && map.descents >= WHOLE_AFTER {
            let count = source.count()?;
            if map.descents >= count / 16 {
                if self.read_whole(m, count, source)? {
                    return self.list(property, side, start, source);
                }
                self.maps[m].no_whole = true;
            }
        }
        let by_row = &mut self.maps[m].by_row;
        if let Known::Never = by_row.get(row) {
            by_row.set(row, Known::Once);
            return Ok(None);
        }
        if self.links.len() > MAX_LINKS - MAX_LIST {
            return Ok(None);
        }
        let first = self.links.len();
        let links = &mut self.links;
        let mut fits = true;
        source.read(start, &mut |id| {
            fits = links.len() - first < MAX_LIST;
            if fits {
                links.push(id);
            }
            Ok(fits)
        })?;
        let known = if fits {
            Known::Listed(list_of(&self.links, first))
        } else {
            self.links.truncate(first);
            Known::TooLong
        };
        self.maps[m].by_row.set(row, known);
        Ok(match known {
            Known::Listed(list) => Some(list),
            _ => None,
        })
    }

    /// Reads the whole matrix into map `m`, in start-row order; `false` (nothing kept) when
    /// it has more links than the bound leaves or a start row past [`MAX_ROWS`].
    fn read_whole(&mut self, m: usize, count: u64, source: &dyn Links) -> Result<bool> {
        if count > (MAX_LINKS - self.links.len()) as u64 {
            return Ok(false);
        }
        // Bounded just above by MAX_LINKS: the links are read in one go, never grown by doubling.
        self.links.reserve(count as usize);
        // Many starts: an array from the first (it never becomes a hash map).
        let mut by_row = Rows::Dense(Vec::new(), SPARSE_ROWS + 1);
        let fits = read_runs(
            &mut self.links,
            MAX_LINKS,
            |sink| source.read_all(sink),
            |row: u32| (row as usize) < MAX_ROWS,
            |row, first, links| by_row.set(row as usize, Known::Listed(list_of(links, first))),
        )?;
        if fits {
            let map = &mut self.maps[m];
            map.by_row = by_row;
            map.whole = true;
        }
        Ok(fits)
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

    /// A matrix where start `s` (rows 0..starts) has `s % 7` links, `s * 10 + i`; or one start
    /// with `long` links. Counts the reads.
    struct Fake {
        starts: u32,
        long: Option<u32>,
        reads: Cell<u32>,
        whole_reads: Cell<u32>,
    }

    impl Fake {
        fn new(starts: u32) -> Fake {
            Fake { starts, long: None, reads: Cell::new(0), whole_reads: Cell::new(0) }
        }

        fn links(&self, s: u32) -> Vec<NodeId> {
            match self.long {
                Some(n) => (0..n).map(id).collect(),
                None => (0..s % 7).map(|i| id(s * 10 + i)).collect(),
            }
        }
    }

    impl Links for Fake {
        fn count(&self) -> Result<u64> {
            // Start `s` has `s % 7` links: 21 in every seven starts, then the rest's.
            Ok(match self.long {
                Some(n) => u64::from(self.starts) * u64::from(n),
                None => u64::from(self.starts / 7) * 21 + (0..self.starts % 7).map(u64::from).sum::<u64>(),
            })
        }

        fn read(&self, start: NodeId, sink: &mut dyn FnMut(NodeId) -> Result<bool>) -> Result<()> {
            self.reads.set(self.reads.get() + 1);
            for l in self.links(start.row()) {
                if !sink(l)? {
                    break;
                }
            }
            Ok(())
        }

        fn read_all(&self, sink: &mut dyn FnMut(u32, NodeId) -> bool) -> Result<()> {
            self.whole_reads.set(self.whole_reads.get() + 1);
            for s in 0..self.starts {
                for l in self.links(s) {
                    if !sink(s, l) {
                        return Ok(());
                    }
                }
            }
            Ok(())
        }
    }

    fn all(sets: &LinkSets, list: List) -> Vec<NodeId> {
        (0..list.len()).map(|i| sets.link(list, i)).collect()
    }

    #[test]
    fn a_start_is_read_the_second_time_and_its_list_answers_as_the_links_do() {
        let fake = Fake::new(1000);
        let mut sets = LinkSets::default();
        let p = PropertyId::new(2);
        assert_eq!(sets.list(p, Side::Owner, id(3), &fake).unwrap(), None, "the first time: walk");
        assert_eq!(sets.list(p, Side::Owner, id(5), &fake).unwrap(), None);
        assert_eq!(fake.reads.get(), 0);
        let a = sets.list(p, Side::Owner, id(3), &fake).unwrap().unwrap();
        let b = sets.list(p, Side::Owner, id(5), &fake).unwrap().unwrap();
        assert_eq!(sets.list(p, Side::Owner, id(3), &fake).unwrap(), Some(a));
        assert_eq!(fake.reads.get(), 2, "a start is read once");
        assert_eq!(sets.list(p, Side::Target, id(3), &fake).unwrap(), None, "the other side is another map");
        assert_eq!(all(&sets, a), fake.links(3));
        assert!(sets.contains(b, id(52)) && !sets.contains(b, id(55)) && !sets.contains(b, id(32)));
        assert_eq!(fake.whole_reads.get(), 0, "four descents read no whole matrix");
    }

    #[test]
    fn starts_kept_in_a_hash_map_then_an_array_keep_their_lists() {
        // 200,000 starts: the whole matrix (about 600,000 links) would be read only after
        // 37,500 descents, so these 3,000 scattered starts go through the map of rows, past
        // SPARSE_ROWS into the array.
        let fake = Fake::new(200_000);
        let mut sets = LinkSets::default();
        let p = PropertyId::new(2);
        let starts: Vec<u32> = (0..3000).map(|i| (i * 61 + 7) % 200_000).collect();
        for &s in &starts {
            assert_eq!(sets.list(p, Side::Owner, id(s), &fake).unwrap(), None, "start {s} asked once");
        }
        assert!(matches!(sets.maps[0].by_row, Rows::Dense(..)), "past SPARSE_ROWS starts the rows are an array");
        for &s in &starts {
            let list = sets.list(p, Side::Owner, id(s), &fake).unwrap().expect("asked twice: listed");
            assert_eq!(all(&sets, list), fake.links(s), "start {s}");
        }
        for &s in &starts {
            let list = sets.list(p, Side::Owner, id(s), &fake).unwrap().expect("listed");
            assert_eq!(all(&sets, list), fake.links(s), "start {s}");
        }
        assert_eq!(fake.reads.get(), 3000, "each start read once");
        assert_eq!(fake.whole_reads.get(), 0);
        // A few starts stay in the hash map.
        let mut few = LinkSets::default();
        for s in [99_999, 5, 150_000] {
            few.list(p, Side::Owner, id(s), &fake).unwrap();
            let list = few.list(p, Side::Owner, id(s), &fake).unwrap().expect("listed");
            assert_eq!(all(&few, list), fake.links(s));
        }
        assert!(matches!(few.maps[0].by_row, Rows::Sparse(_)));
        // A small table's starts stay in an array.
        let mut small = LinkSets::default();
        for s in [3, 4000, 17] {
            small.list(p, Side::Owner, id(s), &fake).unwrap();
            let list = small.list(p, Side::Owner, id(s), &fake).unwrap().expect("listed");
            assert_eq!(all(&small, list), fake.links(s));
        }
        assert!(matches!(small.maps[0].by_row, Rows::Dense(..)));
    }

    #[test]
    fn many_descents_read_the_whole_matrix_once_and_every_start_answers_from_it() {
        let fake = Fake::new(2000);
        let mut sets = LinkSets::default();
        let p = PropertyId::new(2);
        // 2,000 starts have about 6,000 links: the whole is read after about 375 descents.
        for s in 0..500 {
            let got = sets.list(p, Side::Owner, id(s), &fake).unwrap();
            if let Some(list) = got {
                assert_eq!(all(&sets, list), fake.links(s));
            }
        }
        assert_eq!(fake.whole_reads.get(), 1);
        for s in 0..2000 {
            let list = sets.list(p, Side::Owner, id(s), &fake).unwrap().expect("every start is kept");
            assert_eq!(all(&sets, list), fake.links(s), "start {s}");
        }
        let empty = sets.list(p, Side::Owner, id(7), &fake).unwrap().unwrap();
        assert_eq!(empty.len(), 0, "a start with no links has an empty list");
        assert_eq!(fake.whole_reads.get(), 1);
    }

    #[test]
    fn a_repeated_ask_answers_from_the_last_list_without_the_maps_and_only_for_its_own_start() {
        let fake = Fake::new(1000);
        let mut sets = LinkSets::default();
        let (p, q) = (PropertyId::new(2), PropertyId::new(3));
        sets.list_repeated(p, Side::Owner, id(3), &fake).unwrap();
        let a = sets.list_repeated(p, Side::Owner, id(3), &fake).unwrap().unwrap();
        assert_eq!(sets.list_repeated(p, Side::Owner, id(3), &fake).unwrap(), Some(a));
        // Another start, side or property is not the last one's.
        assert_eq!(sets.list_repeated(p, Side::Owner, id(4), &fake).unwrap(), None, "asked once");
        assert_eq!(sets.list_repeated(p, Side::Target, id(3), &fake).unwrap(), None);
        assert_eq!(sets.list_repeated(q, Side::Owner, id(3), &fake).unwrap(), None);
        let b = sets.list_repeated(p, Side::Owner, id(4), &fake).unwrap().unwrap();
        assert_eq!(all(&sets, b), fake.links(4));
        let again = sets.list_repeated(p, Side::Owner, id(3), &fake).unwrap().unwrap();
        assert_eq!(all(&sets, again), fake.links(3));
        assert_eq!(fake.reads.get(), 2);
    }

    #[test]
    fn a_row_of_a_map_takes_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Known>(), 12);
    }

    #[test]
    fn a_list_longer_than_the_bound_is_not_kept_and_not_read_again() {
        let fake = Fake { long: Some(MAX_LIST as u32 + 5), ..Fake::new(1) };
        let mut sets = LinkSets::default();
        for _ in 0..3 {
            assert_eq!(sets.list(PropertyId::new(1), Side::Owner, id(0), &fake).unwrap(), None);
        }
        assert_eq!(fake.reads.get(), 1);
        assert!(sets.links.is_empty());
    }
}
