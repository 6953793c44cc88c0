//! TC: the merge of an ordered scan (NDB merges in the API; here the
//! coordinator does, so a client gets one stream in index order). Each
//! fragment's replica returns its rows in index order, each after its
//! index key; the coordinator keeps what it has not handed out per
//! fragment and hands out the smallest (or, descending, the largest) key
//! next — but only while every fragment not done has a row waiting: the
//! next row of one that has none may come before any waiting row.

use std::cmp::Ordering;

/// One row of a batch: where its key and attribute list lie in the
/// batch's bytes, and the key's first eight bytes as a big-endian number
/// (zero-padded), which decides most comparisons without comparing bytes.
#[derive(Clone, Copy)]
struct Item {
    prefix: u64,
    key: u32,
    key_len: u16,
    row: u32,
    row_len: u32,
}

/// One fragment's rows received and not handed out yet.
#[derive(Default)]
pub(super) struct Buffered {
    /// The batch as it came (moved in, not copied).
    bytes: Vec<u8>,
    items: Vec<Item>,
    /// `items[head..]` are not handed out yet.
    head: usize,
}

/// The first eight bytes of `key`, zero-padded, as a big-endian number.
/// If two keys' prefixes differ, they order as the keys do: the first
/// differing byte is a real byte of both, or padding of the shorter key,
/// which is then a prefix of the other and so the smaller.
fn prefix_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Buffered {
    pub(super) fn is_empty(&self) -> bool {
        self.head == self.items.len()
    }

    /// Takes a batch of `count` rows, each `u16 key_len | key | u32
    /// attrs_len | attribute list`, into a fragment with no rows waiting
    /// (the coordinator asks only those). A malformed batch (a peer's
    /// bug) is refused whole. The attribute lists are not parsed here:
    /// their lengths frame them, and the client checks every row.
    pub(super) fn take(&mut self, rows: Vec<u8>, count: u32) -> Result<(), String> {
        if !self.is_empty() {
            return Err(format!(
                "a batch came while {} rows of the last one wait",
                self.items.len() - self.head
            ));
        }
        self.items.clear();
        self.head = 0;
        let framed = frame(&rows, count, &mut self.items);
        if framed.is_err() {
            self.items.clear();
        }
        framed?;
        self.bytes = rows;
        Ok(())
    }

    fn front(&self) -> Option<Item> {
        self.items.get(self.head).copied()
    }

    fn key(&self, item: &Item) -> &[u8] {
        &self.bytes[item.key as usize..][..usize::from(item.key_len)]
    }

    /// The order of `a` (a row of this) and `b` (a row of `other`).
    fn compare(&self, a: &Item, other: &Buffered, b: &Item) -> Ordering {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.key(a).cmp(other.key(b)))
    }
}

/// Finds the `count` rows of a batch, appending them to `items`.
fn frame(rows: &[u8], count: u32, items: &mut Vec<Item>) -> Result<(), String> {
    // Each row takes at least six bytes (the two lengths): a forged count
    // reserves no more than the batch.
    items.reserve((count as usize).min(rows.len() / 6));
    let mut at = 0;
    for i in 0..count {
        let rest = &rows[at..];
        if rest.len() < 2 {
            return Err(format!("row {i}: truncated key length"));
        }
        let key_len = u16::from_le_bytes([rest[0], rest[1]]);
        let key_end = 2 + usize::from(key_len);
        let Some(len) = rest.get(key_end..key_end + 4) else {
            return Err(format!("row {i}: truncated key or row length"));
        };
        let row_len = u32::from_le_bytes(len.try_into().expect("four bytes"));
        let row_start = key_end + 4;
        if rest.len() - row_start < row_len as usize {
            return Err(format!("row {i}: truncated row"));
        }
        // Offsets fit in u32: the coordinator refuses batches over their
        // byte bound before they get here.
        items.push(Item {
            prefix: prefix_of(&rest[2..key_end]),
            key: (at + 2) as u32,
            key_len,
            row: (at + row_start) as u32,
            row_len,
        });
        at += row_start + row_len as usize;
    }
    if at != rows.len() {
        return Err(format!("{} bytes after {count} rows", rows.len() - at));
    }
    Ok(())
}

/// Hands out rows in index order into `out` while every stream not done
/// (`streams[i].0` false: more may come) has a row waiting and `out`
/// stays within `max_bytes` (a row goes into an empty `out` whatever its
/// size). Equal keys go in fragment order. Returns the rows handed out.
pub(super) fn merge(
    streams: &mut [(bool, &mut Buffered)],
    descending: bool,
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> u32 {
    let want = if descending {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let mut count = 0;
    loop {
        let mut best: Option<(usize, Item)> = None;
        for (i, (done, b)) in streams.iter().enumerate() {
            let Some(item) = b.front() else {
                if !*done {
                    // Its next row may come before any waiting row.
                    return count;
                }
                continue;
            };
            let better = match &best {
                None => true,
                Some((j, other)) => b.compare(&item, streams[*j].1, other) == want,
            };
            if better {
                best = Some((i, item));
            }
        }
        let Some((i, item)) = best else {
            return count;
        };
        // Checked against what `out` holds, not this call's rows: a
        // round refilled after a merge goes on appending to it.
        if !out.is_empty() && out.len() + item.row_len as usize > max_bytes {
            return count;
        }
        let b = &mut *streams[i].1;
        out.extend_from_slice(&b.bytes[item.row as usize..][..item.row_len as usize]);
        b.head += 1;
        count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::AttrSlice;

    /// A batch of rows whose key is one byte and whose row is an attribute
    /// list of column 0 holding that byte.
    fn batch(keys: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &k in keys {
            out.extend_from_slice(&1u16.to_le_bytes());
            out.push(k);
            let len_at = out.len();
            out.extend_from_slice(&[0; 4]);
            let mut w = shoal_types::layout::AttrListWriter::begin(&mut out);
            w.push(&mut out, 0, Some(&[k]));
            w.finish(&mut out);
            let len = (out.len() - len_at - 4) as u32;
            out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        }
        out
    }

    fn keys_of(out: &[u8]) -> Vec<u8> {
        let mut rest = out;
        let mut keys = Vec::new();
        while !rest.is_empty() {
            let (attrs, r) = AttrSlice::parse(rest).unwrap();
            keys.push(attrs.iter().next().unwrap().1.unwrap()[0]);
            rest = r;
        }
        keys
    }

    #[test]
    fn rows_come_in_key_order_and_wait_for_streams_with_none() {
        let (mut a, mut b) = (Buffered::default(), Buffered::default());
        a.take(batch(&[1, 4, 9]), 3).unwrap();
        b.take(batch(&[2, 3]), 2).unwrap();
        let mut out = Vec::new();
        let n = merge(
            &mut [(false, &mut a), (false, &mut b)],
            false,
            1 << 20,
            &mut out,
        );
        // b ran dry after 3: 4 may not go before b's next batch.
        assert_eq!((n, keys_of(&out)), (3, vec![1, 2, 3]));
        b.take(batch(&[5]), 1).unwrap();
        out.clear();
        let n = merge(
            &mut [(false, &mut a), (true, &mut b)],
            false,
            1 << 20,
            &mut out,
        );
        assert_eq!((n, keys_of(&out)), (3, vec![4, 5, 9]));
        assert!(a.is_empty() && b.is_empty());
    }

    #[test]
    fn descending_and_byte_bounded() {
        let (mut a, mut b) = (Buffered::default(), Buffered::default());
        a.take(batch(&[9, 4]), 2).unwrap();
        b.take(batch(&[7, 1]), 2).unwrap();
        let mut out = Vec::new();
        // Room for one row only: one goes.
        let n = merge(&mut [(true, &mut a), (true, &mut b)], true, 1, &mut out);
        assert_eq!((n, keys_of(&out)), (1, vec![9]));
        out.clear();
        let n = merge(
            &mut [(true, &mut a), (true, &mut b)],
            true,
            1 << 20,
            &mut out,
        );
        assert_eq!((n, keys_of(&out)), (3, vec![7, 4, 1]));
        // A merge after a refill appends to the round's rows: its first row
        // is held to the bound too.
        a.take(batch(&[5]), 1).unwrap();
        let mut out = vec![0; 10];
        let n = merge(&mut [(true, &mut a)], false, 10, &mut out);
        assert_eq!((n, out.len()), (0, 10));
        assert!(!a.is_empty());
    }

    #[test]
    fn a_malformed_batch_is_refused_whole() {
        let mut a = Buffered::default();
        let mut bad = batch(&[1, 2]);
        bad.pop();
        assert!(a.take(bad, 2).is_err());
        assert!(a.take(batch(&[1]), 2).is_err());
        assert!(a.take(batch(&[1, 2]), 1).is_err());
        assert!(a.is_empty());
        // A batch for a fragment whose rows still wait is a bug, refused.
        a.take(batch(&[1]), 1).unwrap();
        assert!(a.take(batch(&[2]), 1).is_err());
        assert!(!a.is_empty());
    }

    /// A batch of rows each holding its key `keys[i]` (any length) as
    /// column 0's value.
    fn batch_of(keys: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for k in keys {
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k);
            let len_at = out.len();
            out.extend_from_slice(&[0; 4]);
            let mut w = shoal_types::layout::AttrListWriter::begin(&mut out);
            w.push(&mut out, 0, Some(k));
            w.finish(&mut out);
            let len = (out.len() - len_at - 4) as u32;
            out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        }
        out
    }

    proptest::proptest! {
        /// Keys of 0 to 12 bytes from a small alphabet (so that many share
        /// their first eight bytes, or are prefixes of each other), spread
        /// over three streams, merge as a stable sort of them all: the
        /// eight-byte prefixes never order two keys wrongly.
        #[test]
        fn the_merge_orders_keys_as_bytes_do(
            rows in proptest::collection::vec(
                (0usize..3, proptest::collection::vec(0u8..3, 0..12)),
                0..60,
            ),
            descending: bool,
        ) {
            let mut per_stream: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
            for (s, key) in &rows {
                per_stream[*s].push(key.clone());
            }
            for keys in &mut per_stream {
                keys.sort();
                if descending {
                    keys.reverse();
                }
            }
            let mut bufs: Vec<Buffered> = per_stream
                .iter()
                .map(|keys| {
                    let mut b = Buffered::default();
                    b.take(batch_of(keys), keys.len() as u32).unwrap();
                    b
                })
                .collect();
            let mut streams: Vec<(bool, &mut Buffered)> =
                bufs.iter_mut().map(|b| (true, b)).collect();
            let mut out = Vec::new();
            let n = merge(&mut streams, descending, usize::MAX, &mut out);
            let mut got = Vec::new();
            let mut rest = &out[..];
            while !rest.is_empty() {
                let (attrs, r) = AttrSlice::parse(rest).unwrap();
                got.push(attrs.iter().next().unwrap().1.unwrap().to_vec());
                rest = r;
            }
            let mut want: Vec<Vec<u8>> = rows.iter().map(|(_, k)| k.clone()).collect();
            want.sort();
            if descending {
                want.reverse();
            }
            proptest::prop_assert_eq!(n as usize, rows.len());
            proptest::prop_assert_eq!(got, want);
        }
    }
}
