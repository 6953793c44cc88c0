//! Model-checked tests of the ordered index: every randomized sequence
//! runs against a `BTreeSet<(Vec<u8>, u32)>` and `check()` after each step.

use super::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

type Model = BTreeSet<(Vec<u8>, u32)>;

fn all_entries(index: &OrderedIndex) -> Vec<(Vec<u8>, u32)> {
    index.iter().map(|(k, r)| (k.to_vec(), r)).collect()
}

fn assert_same(index: &OrderedIndex, model: &Model) {
    assert_eq!(index.len(), model.len());
    let forward = all_entries(index);
    assert!(forward.iter().eq(model.iter()), "ascending order differs");
    let backward: Vec<(Vec<u8>, u32)> = index.iter_back().map(|(k, r)| (k.to_vec(), r)).collect();
    assert!(
        backward.iter().eq(model.iter().rev()),
        "descending order differs"
    );
}

/// Keys sharing long prefixes: one of a few patterns cut to some length,
/// then a short suffix of bytes near 0x00 and 0xFF.
fn key_strategy(prefix_max: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    let suffix_byte = prop_oneof![Just(0u8), Just(1u8), Just(2u8), Just(0xFFu8)];
    // Lengths cluster on a few values and suffixes are short, so equal
    // keys (with several rows) are common, also keys spanning leaves.
    let len = prop_oneof![
        Just(0),
        Just(prefix_max / 2),
        Just(prefix_max),
        0..=prefix_max
    ];
    (0u8..4, len, proptest::collection::vec(suffix_byte, 0..3)).prop_map(
        move |(pattern, len, suffix)| {
            let mut key: Vec<u8> = match pattern {
                0 => vec![b'a'; len],
                1 => vec![0; len],
                2 => (0..len).map(|i| i as u8).collect(),
                _ => vec![0xFF; len],
            };
            key.extend(suffix);
            key.truncate(ORDERED_KEY_BYTES_MAX);
            key
        },
    )
}

fn row_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..4, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, u32),
    Remove(Vec<u8>, u32),
    /// Remove the model's entry at this position (modulo its length), so
    /// that removals hit.
    RemovePresent(usize),
    IterFrom(Vec<u8>, u32, usize),
    IterBackFrom(Vec<u8>, u32, usize),
}

fn op_strategy(prefix_max: usize) -> impl Strategy<Value = Op> {
    let key = key_strategy(prefix_max);
    prop_oneof![
        8 => (key.clone(), row_strategy()).prop_map(|(k, r)| Op::Insert(k, r)),
        1 => (key.clone(), row_strategy()).prop_map(|(k, r)| Op::Remove(k, r)),
        3 => any::<usize>().prop_map(Op::RemovePresent),
        1 => (key.clone(), row_strategy(), 0usize..40).prop_map(|(k, r, n)| Op::IterFrom(k, r, n)),
        1 => (key, row_strategy(), 0usize..40).prop_map(|(k, r, n)| Op::IterBackFrom(k, r, n)),
    ]
}

fn run_ops(ops: &[Op]) {
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Insert(k, r) => {
                let added = index.insert(&mut mem, k, *r).unwrap();
                assert_eq!(added, model.insert((k.clone(), *r)));
            }
            Op::Remove(k, r) => {
                assert_eq!(
                    index.remove(&mut mem, k, *r),
                    model.remove(&(k.clone(), *r))
                );
            }
            Op::RemovePresent(i) => {
                if let Some(e) = model.iter().nth(i % model.len().max(1)).cloned() {
                    assert!(index.remove(&mut mem, &e.0, e.1));
                    model.remove(&e);
                }
            }
            Op::IterFrom(k, r, n) => {
                let got: Vec<_> = index.iter_from(k, *r).take(*n).collect();
                let want: Vec<_> = model
                    .range((k.clone(), *r)..)
                    .take(*n)
                    .map(|(k, r)| (k.as_slice(), *r))
                    .collect();
                assert_eq!(got, want);
            }
            Op::IterBackFrom(k, r, n) => {
                let got: Vec<_> = index.iter_back_from(k, *r).take(*n).collect();
                let want: Vec<_> = model
                    .range(..=(k.clone(), *r))
                    .rev()
                    .take(*n)
                    .map(|(k, r)| (k.as_slice(), *r))
                    .collect();
                assert_eq!(got, want);
            }
        }
        index.check();
        assert_eq!(index.len(), model.len());
        assert_eq!(mem.used_bytes(), index.charged_bytes());
        if let Op::Insert(k, r) | Op::Remove(k, r) = op {
            assert_eq!(index.contains(k, *r), model.contains(&(k.clone(), *r)));
        }
    }
    assert_same(&index, &model);
    index.release_all(&mut mem);
    assert_eq!(mem.used_bytes(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Keys of 0..300 bytes: wide nodes, mostly one or two levels.
    #[test]
    fn matches_model_with_short_keys(ops in proptest::collection::vec(op_strategy(294), 1..800)) {
        run_ops(&ops);
    }

    /// Keys of up to 4 KiB: two or three per node, so trees grow several
    /// levels deep and inner nodes split and merge.
    #[test]
    fn matches_model_with_long_keys(ops in proptest::collection::vec(op_strategy(4096), 1..300)) {
        run_ops(&ops);
    }
}

fn key_u32(i: u32) -> [u8; 5] {
    let b = i.to_be_bytes();
    [1, b[0], b[1], b[2], b[3]]
}

#[test]
fn duplicate_keys_and_cursor_starts() {
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    for row in (0..2000u32).rev() {
        assert!(index.insert(&mut mem, b"dup", row).unwrap());
        assert!(index.insert(&mut mem, b"a", row).unwrap());
        assert!(index.insert(&mut mem, b"z", row).unwrap());
    }
    let used = mem.used_bytes();
    assert!(!index.insert(&mut mem, b"dup", 7).unwrap(), "already there");
    assert_eq!(mem.used_bytes(), used);
    index.check();
    assert_eq!(index.len(), 6000);

    let dups: Vec<u32> = index
        .iter_from(b"dup", 0)
        .take_while(|(k, _)| *k == b"dup")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(dups, (0..2000).collect::<Vec<_>>());
    let back: Vec<u32> = index
        .iter_back_from(b"dup", RowId::MAX)
        .take_while(|(k, _)| *k == b"dup")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(back, (0..2000).rev().collect::<Vec<_>>());
    assert_eq!(
        index.iter_from(b"dup", 1500).next(),
        Some((&b"dup"[..], 1500))
    );
    assert_eq!(index.iter_from(b"dua", 0).next(), Some((&b"dup"[..], 0)));
    assert_eq!(index.iter_from(b"zz", 0).next(), None);
    assert_eq!(index.iter_back_from(b"", RowId::MAX).next(), None);
    assert_eq!(
        index.iter_back_from(b"b", 0).next(),
        Some((&b"a"[..], 1999))
    );
    assert!(index.contains(b"z", 0));
    assert!(!index.contains(b"z", 2000));

    let long = vec![0u8; ORDERED_KEY_BYTES_MAX + 1];
    assert_eq!(
        index.insert(&mut mem, &long, 0),
        Err(OrderedInsertError::KeyTooLong {
            key_bytes: ORDERED_KEY_BYTES_MAX + 1
        })
    );
    assert!(!index.remove(&mut mem, &long, 0));
    assert!(!index.contains(&long, 0));
    assert!(index
        .insert(&mut mem, &long[..ORDERED_KEY_BYTES_MAX], 0)
        .unwrap());
    index.check();
}

#[test]
fn empty_index_charges_nothing_and_iterates_nothing() {
    let mut mem = Memory::new(1 << 20);
    let mut index = OrderedIndex::new();
    assert!(index.is_empty());
    assert_eq!(index.charged_bytes(), 0);
    assert_eq!(index.iter().next(), None);
    assert_eq!(index.iter_back().next(), None);
    assert_eq!(index.iter_from(b"x", 0).next(), None);
    assert_eq!(index.iter_back_from(b"x", 0).next(), None);
    assert!(!index.remove(&mut mem, b"x", 0));
    index.check();
    assert!(index.insert(&mut mem, b"x", 0).unwrap());
    assert!(index.charged_bytes() > 0);
    assert!(index.remove(&mut mem, b"x", 0));
    assert_eq!(index.charged_bytes(), 0);
    assert_eq!(mem.used_bytes(), 0);
    index.check();
}

/// Random long keys, so that one insert may split a leaf, its parents
/// and the root at once.
fn random_key(rng: &mut SmallRng, max_len: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max_len);
    let mut key = vec![b'k'; len];
    if len > 0 {
        let at = rng.random_range(0..len);
        key[at] = rng.random();
    }
    key
}

#[test]
fn out_of_memory_changes_nothing() {
    for seed in 0..20u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let limit = PAGE_BYTES * rng.random_range(1..12) + rng.random_range(0..PAGE_BYTES);
        let mut mem = Memory::new(limit);
        let mut index = OrderedIndex::new();
        let mut model = Model::new();
        let mut refusals = 0;
        for _ in 0..400 {
            let key = random_key(&mut rng, ORDERED_KEY_BYTES_MAX);
            let row = rng.random_range(0..3);
            let (used, charged) = (mem.used_bytes(), index.charged_bytes());
            match index.insert(&mut mem, &key, row) {
                Ok(added) => assert_eq!(added, model.insert((key, row))),
                Err(OrderedInsertError::OutOfMemory(e)) => {
                    refusals += 1;
                    assert!(e.requested_bytes > e.free_bytes);
                    assert_eq!(mem.used_bytes(), used);
                    assert_eq!(index.charged_bytes(), charged);
                    assert!(!index.contains(&key, row) || model.contains(&(key, row)));
                }
                Err(e) => panic!("{e:?}"),
            }
            index.check();
            assert_eq!(mem.used_bytes(), index.charged_bytes());
            if rng.random_bool(0.2) {
                if let Some(e) = model.iter().next().cloned() {
                    assert!(index.remove(&mut mem, &e.0, e.1));
                    model.remove(&e);
                }
            }
        }
        assert!(refusals > 0, "seed {seed}: the limit was never reached");
        assert_same(&index, &model);
        index.release_all(&mut mem);
        assert_eq!(mem.used_bytes(), 0);
        assert!(index.is_empty());
        index.check();
        // Usable again after release_all.
        assert!(index.insert(&mut mem, b"again", 1).unwrap());
        index.check();
    }
}

#[test]
fn committed_inserts_overdraw_and_frees_repay_first() {
    let limit = 3 * PAGE_BYTES;
    let mut mem = Memory::new(limit);
    let mut index = OrderedIndex::new();
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(3);
    while index.overdraft_bytes() < 4 * PAGE_BYTES {
        let e = (random_key(&mut rng, 2000), rng.random_range(0..3));
        assert_eq!(index.insert_committed(&mut mem, &e.0, e.1), model.insert(e));
        index.check();
        assert_eq!(mem.used_bytes(), index.charged_bytes());
        assert!(mem.used_bytes() <= limit);
    }
    // Memory is full: a normal insert needing a node is refused.
    assert_eq!(mem.used_bytes(), limit);
    let big = vec![9; 3000];
    match index.insert(&mut mem, &big, 0) {
        Ok(added) => assert_eq!(added, model.insert((big, 0))),
        Err(OrderedInsertError::OutOfMemory(e)) => assert_eq!(e.free_bytes, 0),
        Err(e) => panic!("{e:?}"),
    }
    // Frees pay the overdraft back before Memory sees any of them.
    let mut entries: Vec<_> = model.iter().cloned().collect();
    while index.overdraft_bytes() > 0 {
        let (k, r) = entries.pop().unwrap();
        assert!(index.remove(&mut mem, &k, r));
        model.remove(&(k, r));
        index.check();
        assert_eq!(mem.used_bytes(), index.charged_bytes());
        assert!(index.overdraft_bytes() == 0 || mem.used_bytes() == limit);
    }
    assert!(mem.used_bytes() < limit || entries.is_empty());
    assert_same(&index, &model);
    index.release_all(&mut mem);
    assert_eq!(mem.used_bytes(), 0);
    assert_eq!(index.overdraft_bytes(), 0);
}

#[test]
fn release_all_returns_everything() {
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    for i in 0..50_000u32 {
        index
            .insert(&mut mem, &key_u32(i.wrapping_mul(2_654_435_761)), i)
            .unwrap();
    }
    assert_eq!(mem.used_bytes(), index.charged_bytes());
    index.release_all(&mut mem);
    assert_eq!(mem.used_bytes(), 0);
    assert_eq!(index.charged_bytes(), 0);
    assert_eq!(index.iter().next(), None);
    index.check();
}

#[test]
fn churn_does_not_grow_memory() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    let mut model = Model::new();
    // Random keys at a steady population of 5000.
    while model.len() < 5000 {
        let e = (random_key(&mut rng, 40), rng.random_range(0..4));
        index.insert(&mut mem, &e.0, e.1).unwrap();
        model.insert(e);
    }
    let filled = index.charged_bytes();
    let mut peak = filled;
    for step in 0..100_000 {
        let e = (random_key(&mut rng, 40), rng.random_range(0..4));
        if model.insert(e.clone()) {
            index.insert(&mut mem, &e.0, e.1).unwrap();
        }
        let victim = model
            .iter()
            .nth(rng.random_range(0..model.len()))
            .cloned()
            .unwrap();
        model.remove(&victim);
        assert!(index.remove(&mut mem, &victim.0, victim.1));
        peak = peak.max(index.charged_bytes());
        if step % 10_000 == 0 {
            index.check();
        }
    }
    index.check();
    assert_same(&index, &model);
    assert!(peak <= 2 * filled, "peak {peak}, after filling {filled}");

    // A queue: ascending keys in at one end, out at the other.
    let mut queue = OrderedIndex::new();
    let mut queue_peak = 0;
    for i in 0..200_000u32 {
        queue.insert(&mut mem, &key_u32(i), i).unwrap();
        if i >= 1000 {
            assert!(queue.remove(&mut mem, &key_u32(i - 1000), i - 1000));
        }
        queue_peak = queue_peak.max(queue.charged_bytes());
    }
    queue.check();
    assert!(queue_peak <= 8 * PAGE_BYTES, "queue peak {queue_peak}");

    // Emptying gives back every byte.
    for (k, r) in std::mem::take(&mut model) {
        assert!(index.remove(&mut mem, &k, r));
    }
    for i in 199_000..200_000u32 {
        assert!(queue.remove(&mut mem, &key_u32(i), i));
    }
    index.check();
    queue.check();
    assert_eq!(mem.used_bytes(), 0);
}

#[test]
fn a_million_sequential_keys() {
    const N: u32 = 1_000_000;
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    for i in 0..N {
        assert!(index.insert(&mut mem, &key_u32(i), i).unwrap());
    }
    assert_eq!(index.len(), N as usize);
    let mut expected = 0u32;
    for (key, row) in index.iter() {
        assert_eq!(key, key_u32(expected));
        assert_eq!(row, expected);
        expected += 1;
    }
    assert_eq!(expected, N);
    let mut back = N / 2 + 1;
    for (key, row) in index.iter_back_from(&key_u32(N / 2), RowId::MAX) {
        back -= 1;
        assert_eq!((key, row), (&key_u32(back)[..], back));
    }
    assert_eq!(back, 0);
    index.check();
    let per_entry = index.charged_bytes() as f64 / index.len() as f64;
    eprintln!("1M sequential 5-byte keys: {per_entry:.2} charged bytes per entry");
    assert!(per_entry < 12.0, "{per_entry}");
}

/// Prints what random insertion order costs (splits leave leaves about
/// ln 2 full on average), and bounds it.
#[test]
fn memory_per_entry_in_random_order() {
    const N: usize = 200_000;
    let mut rng = SmallRng::seed_from_u64(11);
    let mut mem = Memory::new(usize::MAX);
    let mut index = OrderedIndex::new();
    while index.len() < N {
        let k: u32 = rng.random();
        index.insert(&mut mem, &key_u32(k), k).unwrap();
    }
    index.check();
    let per_entry = index.charged_bytes() as f64 / index.len() as f64;
    eprintln!("{N} random 5-byte keys: {per_entry:.2} charged bytes per entry");
    assert!(per_entry < 20.0, "{per_entry}");
}
