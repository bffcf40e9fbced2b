//! A persistent map from a `u32` id to bytes: the texts of the string table written since the
//! last checkpoint (older ones are read from the checkpoint files, [`super::texts`]). A 64-way
//! radix tree whose nodes are shared between versions (`Arc`); a write copies the path to its
//! leaf where a published version still shares it, so a version handed out never changes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of texts on the heap now (with their allocation overhead), counted toward the
/// in-memory bound ([`crate::heap_bytes`]).
static TEXT_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Overhead counted per text: the `Arc`'s counts and the box's pointer and length.
const TEXT_OVERHEAD: usize = 48;

/// Bytes of texts on the heap now, in every version of every database of this process.
pub fn text_heap_bytes() -> usize {
    TEXT_BYTES.load(Ordering::Relaxed)
}

/// One text on the heap; its bytes are counted in [`text_heap_bytes`] while it lives.
pub struct Text(Box<[u8]>);

impl Text {
    /// A heap copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Arc<Text> {
        TEXT_BYTES.fetch_add(bytes.len() + TEXT_OVERHEAD, Ordering::Relaxed);
        Arc::new(Text(Box::from(bytes)))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        TEXT_BYTES.fetch_sub(self.0.len() + TEXT_OVERHEAD, Ordering::Relaxed);
    }
}

const SHIFT: u32 = 6;
const FANOUT: usize = 1 << SHIFT;

#[derive(Clone)]
enum Node {
    Inner(Vec<Option<Arc<Node>>>),
    Leaf(Vec<Option<Arc<Text>>>),
}

impl Node {
    fn new(level: u32) -> Node {
        if level == 0 {
            Node::Leaf(vec![None; FANOUT])
        } else {
            Node::Inner(vec![None; FANOUT])
        }
    }
}

#[inline]
fn slot(id: u32, level: u32) -> usize {
    ((u64::from(id) >> (SHIFT * level)) as usize) & (FANOUT - 1)
}

/// One version of the map; cloning it is constant time and shares every node.
#[derive(Clone, Default)]
pub struct Blobs {
    root: Option<Arc<Node>>,
    /// Levels above the leaves.
    height: u32,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs").field("height", &self.height).finish()
    }
}

impl Blobs {
    /// The bytes under `id`.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        self.get_text(id).map(|t| t.bytes())
    }

    /// The text under `id`, as shared (its identity tells a checkpoint's copy from a later one).
    pub fn get_text(&self, id: u32) -> Option<&Arc<Text>> {
        if u64::from(id) >> (SHIFT * (self.height + 1)) != 0 {
            return None;
        }
        let mut node = self.root.as_deref()?;
        let mut level = self.height;
        loop {
            match node {
                Node::Inner(children) => {
                    node = children[slot(id, level)].as_deref()?;
                    level = level.checked_sub(1)?;
                }
                Node::Leaf(blobs) => return blobs[slot(id, 0)].as_ref(),
            }
        }
    }

    /// Whether `self` and `other` are the same version (they share their root): constant time.
    pub fn same(&self, other: &Blobs) -> bool {
        match (&self.root, &other.root) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) && self.height == other.height,
            (None, None) => true,
            _ => false,
        }
    }

    /// Every (id, text), by id. Bounded by the map's size; each call walks it whole.
    pub fn iter(&self) -> Vec<(u32, &Arc<Text>)> {
        let mut out = Vec::new();
        // (node, level, the id bits above it); the tree is at most 6 levels of 64.
        let mut stack: Vec<(&Node, u32, u64)> = Vec::new();
        if let Some(root) = self.root.as_deref() {
            stack.push((root, self.height, 0));
        }
        while let Some((node, level, base)) = stack.pop() {
            match node {
                Node::Inner(children) => {
                    for (i, c) in children.iter().enumerate().rev() {
                        if let (Some(c), Some(below)) = (c.as_deref(), level.checked_sub(1)) {
                            stack.push((c, below, (base << SHIFT) | i as u64));
                        }
                    }
                }
                Node::Leaf(texts) => {
                    for (i, t) in texts.iter().enumerate() {
                        if let Some(t) = t {
                            out.push((((base << SHIFT) | i as u64) as u32, t));
                        }
                    }
                }
            }
        }
        out
    }

    /// Puts `bytes` under `id` (or removes it with `None`).
    pub fn set(&mut self, id: u32, bytes: Option<Arc<Text>>) {
        while u64::from(id) >> (SHIFT * (self.height + 1)) != 0 {
            if let Some(old) = self.root.take() {
                let mut up = Node::new(self.height + 1);
                if let Node::Inner(children) = &mut up {
                    children[0] = Some(old);
                }
                self.root = Some(Arc::new(up));
            }
            self.height += 1;
        }
        let height = self.height;
        let mut node = Arc::make_mut(self.root.get_or_insert_with(|| Arc::new(Node::new(height))));
        let mut level = height;
        loop {
            match node {
                Node::Inner(children) => {
                    let below = level.saturating_sub(1);
                    node = Arc::make_mut(children[slot(id, level)].get_or_insert_with(|| Arc::new(Node::new(below))));
                    level = below;
                }
                Node::Leaf(blobs) => {
                    blobs[slot(id, 0)] = bytes;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #[test]
        fn matches_a_map_and_versions_never_change(ops in proptest::collection::vec((0u32..5000, proptest::option::of(0u8..255)), 0..300)) {
            let mut blobs = Blobs::default();
            let mut model: BTreeMap<u32, u8> = BTreeMap::new();
            let mut kept: Vec<(Blobs, BTreeMap<u32, u8>)> = Vec::new();
            for (i, (id, v)) in ops.into_iter().enumerate() {
                blobs.set(id, v.map(|b| Text::new(&[b; 3])));
                match v { Some(b) => { model.insert(id, b); } None => { model.remove(&id); } }
                if i % 17 == 0 { kept.push((blobs.clone(), model.clone())); }
            }
            let listed: Vec<(u32, u8)> = blobs.iter().into_iter().map(|(id, t)| (id, t.bytes()[0])).collect();
            prop_assert_eq!(listed, model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
            kept.push((blobs, model));
            for (version, model) in &kept {
                for id in 0..5000u32 {
                    prop_assert_eq!(version.get(id).map(|b| b[0]), model.get(&id).copied());
                }
            }
        }
    }
}
