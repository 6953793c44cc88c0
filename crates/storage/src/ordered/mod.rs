//! Ordered index: a B+tree of `(key bytes, row id)` entries, one per
//! fragment per ordered index, on the data node's single-threaded hot path.
//! Keys are memcomparable (`shoal_types::index_key`), so the tree orders
//! plain bytes and knows nothing of columns.
//!
//! Invariants:
//! - Entries are unique `(key, row)` pairs in ascending order of key bytes,
//!   then row id; one key may have many rows (non-unique indexes).
//! - Every node is a fixed-size page (`page.rs`, about 8 KiB) in an arena
//!   `Vec` addressed by `u32`. Leaves hold entries and are linked both ways
//!   in key order; inner nodes hold `(separator, child)` entries, the first
//!   separator standing for "below everything". Child `i` holds exactly the
//!   entries `>= separator i` and `< separator i+1`. All leaves are at depth
//!   `height`.
//! - Separators are the shortest key prefix that tells two neighbouring
//!   leaves apart (with row 0), or the whole right key and its row when the
//!   neighbours share their key, so inner nodes stay small.
//! - No node is empty, apart from an inner node between the removal of its
//!   last child and its own removal in the same call; an empty tree has
//!   no nodes at all and charges nothing.
//! - The tree holds one `PAGE_BYTES` per live node plus one slot (`size_of`
//!   of the node struct) per arena slot, freed or not (freed slots are
//!   reused and all go when the tree empties). `charged_bytes +
//!   overdraft_bytes` is exactly that: `charged_bytes` is what it charged
//!   to `Memory`, `overdraft_bytes` what commits took past the limit
//!   ([`OrderedIndex::insert_committed`]); freed bytes pay the overdraft
//!   back before going back to `Memory`. Not charged: the scratch buffers
//!   (a path of at most `height` steps, one separator of at most 4 KiB)
//!   and the free lists (4 bytes per freed arena slot).
//! - An insert that fails changes nothing: it works out every split its
//!   entry causes and charges all new nodes before touching a page.
//!   Removal never needs memory: it frees nodes as they empty and merges a
//!   node that falls below a quarter full with a neighbour it fits into.

mod page;
#[cfg(test)]
mod tests;

use crate::memory::{Memory, OutOfMemory};
use crate::rows::RowId;
use page::{cmp_entry, Page, INNER_SLOT_BYTES, LEAF_SLOT_BYTES, PAGE_BYTES};

/// Longest key the ordered index stores; longer ones are refused.
pub const ORDERED_KEY_BYTES_MAX: usize = page::KEY_BYTES_MAX;

const _: () = assert!(
    ORDERED_KEY_BYTES_MAX >= shoal_types::schema::INDEX_KEY_BYTES_MAX,
    "every key a valid index definition allows must fit"
);

/// "No node": ends the leaf chain; the root of an empty tree.
const NONE: u32 = u32::MAX;
/// A node below this many used bytes is merged into a neighbour that has
/// room for it.
const UNDERFLOW_BYTES: usize = PAGE_BYTES / 4;

type LeafPage = Page<LEAF_SLOT_BYTES>;
type InnerPage = Page<INNER_SLOT_BYTES>;

struct Leaf {
    page: LeafPage,
    prev: u32,
    next: u32,
}

struct Inner {
    page: InnerPage,
}

const LEAF_SLOT_CHARGE: usize = std::mem::size_of::<Leaf>();
const INNER_SLOT_CHARGE: usize = std::mem::size_of::<Inner>();

/// Why [`OrderedIndex::insert`] refused an entry. Either way the index is
/// unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderedInsertError {
    /// The new nodes the insert needs do not fit in `data_memory`.
    OutOfMemory(OutOfMemory),
    /// The key is longer than [`ORDERED_KEY_BYTES_MAX`].
    KeyTooLong { key_bytes: usize },
}

impl From<OutOfMemory> for OrderedInsertError {
    fn from(e: OutOfMemory) -> Self {
        OrderedInsertError::OutOfMemory(e)
    }
}

/// How an insert pays for new nodes.
#[derive(Clone, Copy, Debug)]
enum Charge {
    /// All of it within `data_memory`, or the insert is refused.
    WithinLimit,
    /// As much as fits; the rest is overdraft (commits).
    PastLimit,
}

/// One inner node on the way down to a leaf.
#[derive(Clone, Copy, Debug)]
struct PathStep {
    node: u32,
    /// The entry whose child the path took.
    entry: usize,
    /// Where this node splits when the insert's separator reaches it (the
    /// first entry, counting the new one, that goes right), or `None`.
    split_at: Option<usize>,
}

/// A B+tree of `(key, row id)` entries; see the module doc.
pub struct OrderedIndex {
    leaves: Vec<Leaf>,
    inners: Vec<Inner>,
    free_leaves: Vec<u32>,
    free_inners: Vec<u32>,
    root: u32,
    /// Inner levels above the leaves (0: the root is a leaf).
    height: usize,
    len: usize,
    charged_bytes: usize,
    overdraft_bytes: usize,
    /// Scratch: the descent of the current insert or remove.
    path: Vec<PathStep>,
    /// Scratch: the separator on its way up to a parent.
    separator: Vec<u8>,
}

impl Default for OrderedIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for OrderedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderedIndex")
            .field("len", &self.len)
            .field("height", &self.height)
            .field("charged_bytes", &self.charged_bytes)
            .field("overdraft_bytes", &self.overdraft_bytes)
            .finish()
    }
}

/// Bytes of the separator between neighbouring entries `left < right`: see
/// [`write_separator`].
fn separator_len(left: &[u8], right: &[u8]) -> usize {
    if left == right {
        right.len()
    } else {
        common_prefix_len(left, right) + 1
    }
}

/// Writes the smallest-keyed separator `s` with `left < s <= right` into
/// `out` and returns its row. When the keys differ the right key is longer
/// than the common prefix (a prefix of `left` would sort before it), and
/// one more byte of it is enough; row 0 keeps `s <= right`.
fn write_separator(out: &mut Vec<u8>, left: (&[u8], u32), right: (&[u8], u32)) -> u32 {
    out.clear();
    let len = separator_len(left.0, right.0);
    out.extend_from_slice(&right.0[..len]);
    if left.0 == right.0 {
        right.1
    } else {
        0
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Where to split `count` entries of sizes `size(j)` into two non-empty
/// nodes: the first entry of the right one, chosen so the larger half is
/// as small as possible.
fn choose_split(count: usize, size: impl Fn(usize) -> usize) -> usize {
    assert!(count >= 2);
    let total: usize = (0..count).map(&size).sum();
    let mut left = 0;
    let mut best = (usize::MAX, 1);
    for s in 1..count {
        left += size(s - 1);
        let larger = left.max(total - left);
        if larger < best.0 {
            best = (larger, s);
        }
        if left >= total - left {
            break;
        }
    }
    assert!(best.0 <= PAGE_BYTES, "a split half does not fit a page");
    best.1
}

/// Entry `j` of `page` as if `(key, row)` were inserted at `pos`.
fn entry_with<'a, const S: usize>(
    page: &'a Page<S>,
    pos: usize,
    new: (&'a [u8], u32),
    j: usize,
) -> (&'a [u8], u32) {
    match j.cmp(&pos) {
        std::cmp::Ordering::Less => (page.key(j), page.row(j)),
        std::cmp::Ordering::Equal => new,
        std::cmp::Ordering::Greater => (page.key(j - 1), page.row(j - 1)),
    }
}

/// Key length of entry `j` of `page` as if a key of `new_len` bytes were
/// inserted at `pos`.
fn key_len_with<const S: usize>(page: &Page<S>, pos: usize, new_len: usize, j: usize) -> usize {
    match j.cmp(&pos) {
        std::cmp::Ordering::Less => page.key_len(j),
        std::cmp::Ordering::Equal => new_len,
        std::cmp::Ordering::Greater => page.key_len(j - 1),
    }
}

/// Inserts `(key, row, child)` at `pos` of a full `page` whose split point
/// is `split_at`; returns the new right half.
fn split_insert<const S: usize>(
    page: &mut Page<S>,
    split_at: usize,
    pos: usize,
    key: &[u8],
    row: u32,
    child: u32,
) -> Page<S> {
    let mut right = Page::new();
    if pos < split_at {
        page.move_tail_to(split_at - 1, &mut right);
        page.insert(pos, key, row, child);
    } else {
        page.move_tail_to(split_at, &mut right);
        right.insert(pos - split_at, key, row, child);
    }
    right
}

impl OrderedIndex {
    /// An empty index; it charges nothing until the first insert.
    pub fn new() -> Self {
        OrderedIndex {
            leaves: Vec::new(),
            inners: Vec::new(),
            free_leaves: Vec::new(),
            free_inners: Vec::new(),
            root: NONE,
            height: 0,
            len: 0,
            charged_bytes: 0,
            overdraft_bytes: 0,
            path: Vec::new(),
            separator: Vec::new(),
        }
    }

    /// Entries in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes this index has charged to `Memory`.
    pub fn charged_bytes(&self) -> usize {
        self.charged_bytes
    }

    /// Bytes this index holds beyond its charge: what commits took past
    /// `data_memory` and frees have not yet paid back.
    pub fn overdraft_bytes(&self) -> usize {
        self.overdraft_bytes
    }

    /// Drops every entry and returns all charged memory.
    pub fn release_all(&mut self, mem: &mut Memory) {
        mem.release(self.charged_bytes);
        *self = OrderedIndex::new();
    }

    /// Whether `(key, row)` is in the index.
    pub fn contains(&self, key: &[u8], row: RowId) -> bool {
        if self.root == NONE {
            return false;
        }
        let leaf = self.leaf_for(key, row);
        self.leaves[leaf as usize].page.find(key, row).is_ok()
    }

    /// The leaf whose range covers `(key, row)`; the tree is not empty.
    #[inline]
    fn leaf_for(&self, key: &[u8], row: u32) -> u32 {
        let mut node = self.root;
        for _ in 0..self.height {
            let page = &self.inners[node as usize].page;
            node = page.child(page.route(key, row));
        }
        node
    }

    /// Descends to the leaf covering `(key, row)`, recording the path.
    fn descend(&self, key: &[u8], row: u32, path: &mut Vec<PathStep>) -> u32 {
        path.clear();
        let mut node = self.root;
        for _ in 0..self.height {
            let page = &self.inners[node as usize].page;
            let entry = page.route(key, row);
            path.push(PathStep {
                node,
                entry,
                split_at: None,
            });
            node = page.child(entry);
        }
        node
    }

    /// Adds `(key, row)`. `Ok(false)`: it was already there, nothing
    /// changed. On error nothing changed either.
    pub fn insert(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        row: RowId,
    ) -> Result<bool, OrderedInsertError> {
        self.insert_with(mem, key, row, Charge::WithinLimit)
    }

    /// Adds `(key, row)` for a commit, which must not fail: new nodes are
    /// charged as far as `Memory` has room, and the rest is held as
    /// overdraft (see [`Self::overdraft_bytes`]). Returns false if the
    /// entry was already there.
    ///
    /// # Panics
    /// If the key is longer than [`ORDERED_KEY_BYTES_MAX`]; index
    /// definitions keep keys shorter, so that is a bug.
    pub fn insert_committed(&mut self, mem: &mut Memory, key: &[u8], row: RowId) -> bool {
        match self.insert_with(mem, key, row, Charge::PastLimit) {
            Ok(added) => added,
            Err(e) => panic!("committed index entry refused: {e:?}"),
        }
    }

    fn insert_with(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        row: RowId,
        charge: Charge,
    ) -> Result<bool, OrderedInsertError> {
        if key.len() > ORDERED_KEY_BYTES_MAX {
            return Err(OrderedInsertError::KeyTooLong {
                key_bytes: key.len(),
            });
        }
        if self.root == NONE {
            self.charge_new_nodes(mem, 1, 0, charge)?;
            let mut page = LeafPage::new();
            page.insert(0, key, row, 0);
            self.root = self.alloc_leaf(Leaf {
                page,
                prev: NONE,
                next: NONE,
            });
            self.height = 0;
            self.len = 1;
            return Ok(true);
        }
        let mut path = std::mem::take(&mut self.path);
        let result = self.insert_below_root(mem, key, row, charge, &mut path);
        self.path = path;
        result
    }

    fn insert_below_root(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        row: u32,
        charge: Charge,
        path: &mut Vec<PathStep>,
    ) -> Result<bool, OrderedInsertError> {
        let leaf = self.descend(key, row, path);
        let pos = match self.leaves[leaf as usize].page.find(key, row) {
            Ok(_) => return Ok(false),
            Err(pos) => pos,
        };
        let Some(leaf_split) = self.plan_splits(leaf, pos, key, row, path) else {
            self.leaves[leaf as usize].page.insert(pos, key, row, 0);
            self.len += 1;
            return Ok(true);
        };
        let inner_splits = path.iter().filter(|s| s.split_at.is_some()).count();
        let new_root = path.iter().all(|s| s.split_at.is_some());
        self.charge_new_nodes(mem, 1, inner_splits + usize::from(new_root), charge)?;

        // The leaf splits; its right half becomes a new leaf after it.
        let left = &mut self.leaves[leaf as usize];
        let right = split_insert(&mut left.page, leaf_split, pos, key, row, 0);
        let last = left.page.len() - 1;
        let mut separator_row = write_separator(
            &mut self.separator,
            (left.page.key(last), left.page.row(last)),
            (right.key(0), right.row(0)),
        );
        let next = left.next;
        let mut new_node = self.alloc_leaf(Leaf {
            page: right,
            prev: leaf,
            next,
        });
        if next != NONE {
            self.leaves[next as usize].prev = new_node;
        }
        self.leaves[leaf as usize].next = new_node;

        // Each parent takes the separator of its new child, splitting in
        // turn where the plan said so and passing its own separator up.
        for step in path.iter().rev() {
            let pos = step.entry + 1;
            let page = &mut self.inners[step.node as usize].page;
            let Some(split_at) = step.split_at else {
                page.insert(pos, &self.separator, separator_row, new_node);
                self.len += 1;
                return Ok(true);
            };
            let mut right = split_insert(
                page,
                split_at,
                pos,
                &self.separator,
                separator_row,
                new_node,
            );
            // The right node's first separator moves up; in the node it
            // becomes "below everything".
            self.separator.clear();
            self.separator.extend_from_slice(right.key(0));
            separator_row = right.row(0);
            right.set_key(0, &[], 0);
            new_node = self.alloc_inner(Inner { page: right });
        }
        // The root split: a new root above it.
        let mut page = InnerPage::new();
        page.insert(0, &[], 0, self.root);
        page.insert(1, &self.separator, separator_row, new_node);
        self.root = self.alloc_inner(Inner { page });
        self.height += 1;
        self.len += 1;
        Ok(true)
    }

    /// Works out, without changing anything, which nodes inserting
    /// `(key, row)` at `pos` of `leaf` splits: `None` when the leaf has
    /// room, else the leaf's split point, with each inner node's in `path`.
    fn plan_splits(
        &self,
        leaf: u32,
        pos: usize,
        key: &[u8],
        row: u32,
        path: &mut [PathStep],
    ) -> Option<usize> {
        let leaf_node = &self.leaves[leaf as usize];
        let page = &leaf_node.page;
        if page.fits(key.len()) {
            return None;
        }
        let count = page.len() + 1;
        // Appending past the last leaf (ascending keys) leaves the full
        // leaf full and starts the next one, instead of two half-empty
        // ones; so do the inner nodes on the right edge.
        let appending = pos == page.len() && leaf_node.next == NONE;
        let leaf_split = if appending {
            count - 1
        } else {
            choose_split(count, |j| {
                page.entry_bytes(entry_with(page, pos, (key, row), j).0.len())
            })
        };
        let (left, _) = entry_with(page, pos, (key, row), leaf_split - 1);
        let (right, _) = entry_with(page, pos, (key, row), leaf_split);
        let mut up_len = separator_len(left, right);
        for step in path.iter_mut().rev() {
            let page = &self.inners[step.node as usize].page;
            let pos = step.entry + 1;
            if page.fits(up_len) {
                return Some(leaf_split);
            }
            let count = page.len() + 1;
            let split_at = if appending && pos == page.len() {
                count - 1
            } else {
                choose_split(count, |j| {
                    page.entry_bytes(key_len_with(page, pos, up_len, j))
                })
            };
            step.split_at = Some(split_at);
            up_len = key_len_with(page, pos, up_len, split_at);
        }
        Some(leaf_split)
    }

    /// Charges `leaves` new leaf pages and `inners` new inner pages, plus
    /// the arena slots the free lists cannot provide.
    fn charge_new_nodes(
        &mut self,
        mem: &mut Memory,
        leaves: usize,
        inners: usize,
        charge: Charge,
    ) -> Result<(), OutOfMemory> {
        let bytes = (leaves + inners) * PAGE_BYTES
            + leaves.saturating_sub(self.free_leaves.len()) * LEAF_SLOT_CHARGE
            + inners.saturating_sub(self.free_inners.len()) * INNER_SLOT_CHARGE;
        let charged = match charge {
            Charge::WithinLimit => bytes,
            Charge::PastLimit => bytes.min(mem.free_bytes()),
        };
        mem.try_charge(charged)?;
        self.charged_bytes += charged;
        self.overdraft_bytes += bytes - charged;
        Ok(())
    }

    /// Gives back `bytes` the tree no longer holds: first to the
    /// overdraft, the rest to `Memory`.
    fn release_bytes(&mut self, mem: &mut Memory, bytes: usize) {
        let repaid = bytes.min(self.overdraft_bytes);
        self.overdraft_bytes -= repaid;
        self.charged_bytes -= bytes - repaid;
        mem.release(bytes - repaid);
    }

    /// Stores a new leaf (its page and slot are charged).
    fn alloc_leaf(&mut self, leaf: Leaf) -> u32 {
        match self.free_leaves.pop() {
            Some(id) => {
                self.leaves[id as usize] = leaf;
                id
            }
            None => {
                assert!(self.leaves.len() < NONE as usize, "leaf ids exhausted");
                self.leaves.push(leaf);
                (self.leaves.len() - 1) as u32
            }
        }
    }

    /// Stores a new inner node (its page and slot are charged).
    fn alloc_inner(&mut self, inner: Inner) -> u32 {
        match self.free_inners.pop() {
            Some(id) => {
                self.inners[id as usize] = inner;
                id
            }
            None => {
                assert!(self.inners.len() < NONE as usize, "inner ids exhausted");
                self.inners.push(inner);
                (self.inners.len() - 1) as u32
            }
        }
    }

    /// Unlinks a leaf from the chain and frees its page.
    fn free_leaf(&mut self, mem: &mut Memory, id: u32) {
        let leaf = &mut self.leaves[id as usize];
        let (prev, next) = (leaf.prev, leaf.next);
        leaf.page = LeafPage::unallocated();
        leaf.prev = NONE;
        leaf.next = NONE;
        if prev != NONE {
            self.leaves[prev as usize].next = next;
        }
        if next != NONE {
            self.leaves[next as usize].prev = prev;
        }
        self.free_leaves.push(id);
        self.release_page(mem);
    }

    fn free_inner(&mut self, mem: &mut Memory, id: u32) {
        self.inners[id as usize].page = InnerPage::unallocated();
        self.free_inners.push(id);
        self.release_page(mem);
    }

    fn release_page(&mut self, mem: &mut Memory) {
        self.release_bytes(mem, PAGE_BYTES);
    }

    /// Removes `(key, row)`; false if it was not there.
    pub fn remove(&mut self, mem: &mut Memory, key: &[u8], row: RowId) -> bool {
        if self.root == NONE || key.len() > ORDERED_KEY_BYTES_MAX {
            return false;
        }
        let mut path = std::mem::take(&mut self.path);
        let leaf = self.descend(key, row, &mut path);
        let found = match self.leaves[leaf as usize].page.find(key, row) {
            Ok(pos) => {
                self.leaves[leaf as usize].page.remove(pos);
                self.len -= 1;
                self.rebalance_after_remove(mem, leaf, &path);
                true
            }
            Err(_) => false,
        };
        self.path = path;
        found
    }

    /// Frees `leaf` if it emptied, or merges it into a neighbour if it
    /// underflowed, and carries the removal of a child up the `path`.
    fn rebalance_after_remove(&mut self, mem: &mut Memory, leaf: u32, path: &[PathStep]) {
        let leaf_used = self.leaves[leaf as usize].page.used_bytes();
        let Some(parent) = path.last() else {
            if leaf_used == 0 {
                self.free_leaf(mem, leaf);
                self.root = NONE;
                self.release_arenas(mem);
            }
            return;
        };
        let removed = if leaf_used == 0 {
            self.free_leaf(mem, leaf);
            Some(parent.entry)
        } else if leaf_used < UNDERFLOW_BYTES {
            self.merge_leaf(mem, parent.node, parent.entry)
        } else {
            None
        };
        let Some(mut removed) = removed else {
            return;
        };
        // `removed` is the entry of `path[level].node` whose child is gone.
        for level in (0..path.len()).rev() {
            let node = path[level].node;
            let page = &mut self.inners[node as usize].page;
            page.remove(removed);
            if removed == 0 && page.len() > 0 {
                // The next child now also covers the freed one's range,
                // which holds nothing.
                page.set_key(0, &[], 0);
            }
            let (len, used) = (page.len(), page.used_bytes());
            if level == 0 {
                self.shrink_root(mem);
                return;
            }
            let parent = path[level - 1];
            let next = if len == 0 {
                self.free_inner(mem, node);
                Some(parent.entry)
            } else if used < UNDERFLOW_BYTES {
                self.merge_inner(mem, parent.node, parent.entry)
            } else {
                None
            };
            match next {
                Some(entry) => removed = entry,
                None => return,
            }
        }
    }

    /// Merges leaf child `entry` of `parent` with a neighbour it fits
    /// with, the right one into the left one. Returns the parent entry
    /// whose child was freed.
    fn merge_leaf(&mut self, mem: &mut Memory, parent: u32, entry: usize) -> Option<usize> {
        let page = &self.inners[parent as usize].page;
        let pair = [
            entry.checked_sub(1),
            (entry + 1 < page.len()).then_some(entry),
        ]
        .into_iter()
        .flatten()
        .find(|&a| {
            let left = &self.leaves[page.child(a) as usize].page;
            let right = &self.leaves[page.child(a + 1) as usize].page;
            left.used_bytes() + left.appended_bytes(right, 0..right.len()) <= PAGE_BYTES
        })?;
        let (left, right) = (page.child(pair), page.child(pair + 1));
        let right_page = std::mem::replace(
            &mut self.leaves[right as usize].page,
            LeafPage::unallocated(),
        );
        let left_page = &mut self.leaves[left as usize].page;
        left_page.append_range(&right_page, 0..right_page.len());
        self.free_leaf(mem, right);
        Some(pair + 1)
    }

    /// As [`Self::merge_leaf`] for inner nodes: the right node's first
    /// child comes under the parent's separator between the two.
    fn merge_inner(&mut self, mem: &mut Memory, parent: u32, entry: usize) -> Option<usize> {
        let page = &self.inners[parent as usize].page;
        let pair = [
            entry.checked_sub(1),
            (entry + 1 < page.len()).then_some(entry),
        ]
        .into_iter()
        .flatten()
        .find(|&a| {
            let left = &self.inners[page.child(a) as usize].page;
            let right = &self.inners[page.child(a + 1) as usize].page;
            left.used_bytes()
                + left.entry_bytes(page.key_len(a + 1))
                + left.appended_bytes(right, 1..right.len())
                <= PAGE_BYTES
        })?;
        let (left, right) = (page.child(pair), page.child(pair + 1));
        self.separator.clear();
        self.separator.extend_from_slice(page.key(pair + 1));
        let separator_row = page.row(pair + 1);
        let right_page = std::mem::replace(
            &mut self.inners[right as usize].page,
            InnerPage::unallocated(),
        );
        let left_page = &mut self.inners[left as usize].page;
        left_page.insert(
            left_page.len(),
            &self.separator,
            separator_row,
            right_page.child(0),
        );
        left_page.append_range(&right_page, 1..right_page.len());
        self.free_inner(mem, right);
        Some(pair + 1)
    }

    /// Replaces a root with one child by that child (repeatedly), and an
    /// empty root by nothing.
    fn shrink_root(&mut self, mem: &mut Memory) {
        while self.height > 0 {
            let root = self.root;
            let page = &self.inners[root as usize].page;
            match page.len() {
                0 => {
                    self.free_inner(mem, root);
                    self.root = NONE;
                    self.height = 0;
                }
                1 => {
                    self.root = page.child(0);
                    self.free_inner(mem, root);
                    self.height -= 1;
                }
                _ => break,
            }
        }
        if self.root == NONE {
            self.release_arenas(mem);
        }
    }

    /// Once the tree is empty, gives back the arena slots too.
    fn release_arenas(&mut self, mem: &mut Memory) {
        assert_eq!(self.len, 0);
        let slots = self.leaves.len() * LEAF_SLOT_CHARGE + self.inners.len() * INNER_SLOT_CHARGE;
        assert_eq!(
            self.charged_bytes + self.overdraft_bytes,
            slots,
            "an empty tree holds no pages"
        );
        self.release_bytes(mem, slots);
        assert_eq!((self.charged_bytes, self.overdraft_bytes), (0, 0));
        self.leaves = Vec::new();
        self.inners = Vec::new();
        self.free_leaves = Vec::new();
        self.free_inners = Vec::new();
        self.height = 0;
    }

    /// Every entry in ascending order.
    pub fn iter(&self) -> OrderedIter<'_> {
        self.iter_from(&[], 0)
    }

    /// Every entry `>= (key, row)` in ascending order. Row 0 starts at the
    /// first entry with this key (or the next key).
    pub fn iter_from(&self, key: &[u8], row: RowId) -> OrderedIter<'_> {
        if self.root == NONE {
            return OrderedIter {
                index: self,
                leaf: NONE,
                pos: 0,
            };
        }
        let leaf = self.leaf_for(key, row);
        let node = &self.leaves[leaf as usize];
        let pos = node.page.lower_bound(key, row);
        if pos == node.page.len() {
            OrderedIter {
                index: self,
                leaf: node.next,
                pos: 0,
            }
        } else {
            OrderedIter {
                index: self,
                leaf,
                pos,
            }
        }
    }

    /// Every entry in descending order.
    pub fn iter_back(&self) -> OrderedIterBack<'_> {
        if self.root == NONE {
            return OrderedIterBack {
                index: self,
                leaf: NONE,
                remaining: 0,
            };
        }
        // The last leaf: follow the last child down.
        let mut node = self.root;
        for _ in 0..self.height {
            let page = &self.inners[node as usize].page;
            node = page.child(page.len() - 1);
        }
        OrderedIterBack {
            index: self,
            leaf: node,
            remaining: self.leaves[node as usize].page.len(),
        }
    }

    /// Every entry `<= (key, row)` in descending order. `RowId::MAX`
    /// starts at the last entry with this key (or the previous key).
    pub fn iter_back_from(&self, key: &[u8], row: RowId) -> OrderedIterBack<'_> {
        if self.root == NONE {
            return OrderedIterBack {
                index: self,
                leaf: NONE,
                remaining: 0,
            };
        }
        let leaf = self.leaf_for(key, row);
        let node = &self.leaves[leaf as usize];
        let remaining = node.page.upper_bound(key, row);
        if remaining == 0 {
            let prev = node.prev;
            OrderedIterBack {
                index: self,
                leaf: prev,
                remaining: if prev == NONE {
                    0
                } else {
                    self.leaves[prev as usize].page.len()
                },
            }
        } else {
            OrderedIterBack {
                index: self,
                leaf,
                remaining,
            }
        }
    }

    /// Asserts every invariant of the module doc: entry order, separator
    /// bounds, node fill, the leaf chain, the count and the charged bytes.
    /// Walks the whole tree: for tests and simulator checks.
    pub fn check(&self) {
        let live_slots =
            self.leaves.len() * LEAF_SLOT_CHARGE + self.inners.len() * INNER_SLOT_CHARGE;
        let mut free = vec![false; self.leaves.len()];
        for &id in &self.free_leaves {
            assert!(
                !std::mem::replace(&mut free[id as usize], true),
                "leaf {id} freed twice"
            );
        }
        for (i, leaf) in self.leaves.iter().enumerate() {
            assert_eq!(leaf.page.is_allocated(), !free[i], "leaf {i}");
        }
        let mut free = vec![false; self.inners.len()];
        for &id in &self.free_inners {
            assert!(
                !std::mem::replace(&mut free[id as usize], true),
                "inner node {id} freed twice"
            );
        }
        for (i, inner) in self.inners.iter().enumerate() {
            assert_eq!(inner.page.is_allocated(), !free[i], "inner node {i}");
        }
        let live_pages =
            self.leaves.len() - self.free_leaves.len() + self.inners.len() - self.free_inners.len();
        assert_eq!(
            self.charged_bytes + self.overdraft_bytes,
            live_pages * PAGE_BYTES + live_slots,
            "held bytes"
        );
        if self.root == NONE {
            assert_eq!(self.len, 0);
            assert_eq!(self.height, 0);
            assert_eq!(live_pages, 0);
            return;
        }
        let mut walk = CheckWalk {
            leaves_in_order: Vec::new(),
            entries: 0,
            inner_nodes: 0,
        };
        self.check_node(self.root, 0, None, None, &mut walk);
        assert_eq!(walk.entries, self.len, "entry count");
        assert_eq!(
            walk.leaves_in_order.len() + walk.inner_nodes,
            live_pages,
            "every live node is in the tree once"
        );
        let mut prev = NONE;
        for &leaf in &walk.leaves_in_order {
            let node = &self.leaves[leaf as usize];
            assert_eq!(node.prev, prev, "leaf {leaf}'s prev link");
            if prev != NONE {
                assert_eq!(
                    self.leaves[prev as usize].next, leaf,
                    "leaf {prev}'s next link"
                );
            }
            prev = leaf;
        }
        assert_eq!(
            self.leaves[prev as usize].next, NONE,
            "last leaf's next link"
        );
    }

    /// Checks the subtree of `node` at `depth`, whose entries must lie in
    /// `[low, high)` (`None`: unbounded).
    fn check_node(
        &self,
        node: u32,
        depth: usize,
        low: Option<(&[u8], u32)>,
        high: Option<(&[u8], u32)>,
        walk: &mut CheckWalk,
    ) {
        let in_bounds = |key: &[u8], row: u32| {
            low.is_none_or(|(k, r)| cmp_entry(k, r, key, row).is_le())
                && high.is_none_or(|(k, r)| cmp_entry(key, row, k, r).is_lt())
        };
        if depth == self.height {
            let page = &self.leaves[node as usize].page;
            page.check();
            assert!(page.len() > 0, "leaf {node} is empty");
            for i in 0..page.len() {
                assert!(
                    in_bounds(page.key(i), page.row(i)),
                    "leaf {node} entry {i} out of bounds"
                );
                if i > 0 {
                    assert!(
                        cmp_entry(page.key(i - 1), page.row(i - 1), page.key(i), page.row(i))
                            .is_lt(),
                        "leaf {node} entries {i} out of order"
                    );
                }
            }
            walk.entries += page.len();
            walk.leaves_in_order.push(node);
            return;
        }
        let page = &self.inners[node as usize].page;
        page.check();
        walk.inner_nodes += 1;
        assert!(page.len() > 0, "inner node {node} is empty");
        assert!(
            page.key(0).is_empty() && page.row(0) == 0,
            "inner node {node}'s first separator is not empty"
        );
        for i in 0..page.len() {
            let sep_low = if i == 0 {
                low
            } else {
                let sep = (page.key(i), page.row(i));
                assert!(
                    in_bounds(sep.0, sep.1),
                    "inner node {node} separator {i} out of bounds"
                );
                if i > 1 {
                    assert!(
                        cmp_entry(page.key(i - 1), page.row(i - 1), sep.0, sep.1).is_lt(),
                        "inner node {node} separators {i} out of order"
                    );
                }
                Some(sep)
            };
            let sep_high = if i + 1 < page.len() {
                Some((page.key(i + 1), page.row(i + 1)))
            } else {
                high
            };
            self.check_node(page.child(i), depth + 1, sep_low, sep_high, walk);
        }
    }
}

struct CheckWalk {
    leaves_in_order: Vec<u32>,
    entries: usize,
    inner_nodes: usize,
}

/// Ascending cursor over an [`OrderedIndex`]; O(1) per step, no
/// allocation.
#[derive(Clone)]
pub struct OrderedIter<'a> {
    index: &'a OrderedIndex,
    leaf: u32,
    pos: usize,
}

impl<'a> Iterator for OrderedIter<'a> {
    type Item = (&'a [u8], RowId);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.leaf == NONE {
            return None;
        }
        let node = &self.index.leaves[self.leaf as usize];
        let item = (node.page.key(self.pos), node.page.row(self.pos));
        self.pos += 1;
        if self.pos == node.page.len() {
            // Leaves are never empty, so the next one has an entry 0.
            self.leaf = node.next;
            self.pos = 0;
        }
        Some(item)
    }
}

impl std::iter::FusedIterator for OrderedIter<'_> {}

/// Descending cursor over an [`OrderedIndex`]; O(1) per step, no
/// allocation.
#[derive(Clone)]
pub struct OrderedIterBack<'a> {
    index: &'a OrderedIndex,
    leaf: u32,
    /// Entries of `leaf` still to yield: positions `0..remaining`.
    remaining: usize,
}

impl<'a> Iterator for OrderedIterBack<'a> {
    type Item = (&'a [u8], RowId);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.leaf == NONE {
            return None;
        }
        let node = &self.index.leaves[self.leaf as usize];
        self.remaining -= 1;
        let item = (node.page.key(self.remaining), node.page.row(self.remaining));
        if self.remaining == 0 {
            self.leaf = node.prev;
            if self.leaf != NONE {
                self.remaining = self.index.leaves[self.leaf as usize].page.len();
            }
        }
        Some(item)
    }
}

impl std::iter::FusedIterator for OrderedIterBack<'_> {}
