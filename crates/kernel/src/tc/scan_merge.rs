//! TC: the merge of an ordered scan (NDB merges in the API; here the
//! coordinator does, so a client gets one stream in index order). Each
//! fragment's replica returns its rows in index order, each after its
//! index key; the coordinator keeps what it has not handed out per
//! fragment and hands out the smallest (or, descending, the largest) key
//! next — but only while every fragment not done has a row waiting: the
//! next row of one that has none may come before any waiting row.

use shoal_types::AttrSlice;
use std::collections::VecDeque;

/// One fragment's rows received and not handed out yet.
#[derive(Default)]
pub(super) struct Buffered {
    bytes: Vec<u8>,
    /// (key start, key length, row start, row length) into `bytes`.
    items: VecDeque<(usize, usize, usize, usize)>,
}

impl Buffered {
    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Takes a batch of `count` rows, each `u16 key_len | key | attribute
    /// list`. A malformed batch (a peer's bug) is refused whole.
    pub(super) fn take(&mut self, rows: &[u8], count: u32) -> Result<(), String> {
        if self.items.is_empty() {
            self.bytes.clear();
        }
        let base = self.bytes.len();
        let mut at = 0;
        // Each row takes at least four bytes (key length, attribute
        // count): a forged count allocates no more than the batch.
        let mut items = Vec::with_capacity((count as usize).min(rows.len() / 4));
        for i in 0..count {
            let rest = &rows[at..];
            if rest.len() < 2 {
                return Err(format!("row {i}: truncated key length"));
            }
            let key_len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
            if rest.len() < 2 + key_len {
                return Err(format!("row {i}: truncated key"));
            }
            let row = &rest[2 + key_len..];
            let (_, after) = AttrSlice::parse(row).map_err(|e| format!("row {i}: {e}"))?;
            let row_len = row.len() - after.len();
            items.push((base + at + 2, key_len, base + at + 2 + key_len, row_len));
            at += 2 + key_len + row_len;
        }
        if at != rows.len() {
            return Err(format!("{} bytes after {count} rows", rows.len() - at));
        }
        self.bytes.extend_from_slice(rows);
        self.items.extend(items);
        Ok(())
    }

    fn front_key(&self) -> Option<&[u8]> {
        self.items
            .front()
            .map(|&(k, len, _, _)| &self.bytes[k..k + len])
    }

    fn front_row_len(&self) -> usize {
        self.items.front().map_or(0, |&(_, _, _, len)| len)
    }

    /// Appends the front row to `out` and drops it.
    fn pop_into(&mut self, out: &mut Vec<u8>) {
        let (_, _, row, len) = self.items.pop_front().expect("a row waits");
        out.extend_from_slice(&self.bytes[row..row + len]);
        if self.items.is_empty() {
            self.bytes.clear();
        }
    }
}

/// Hands out rows in index order into `out` while every stream not done
/// (`streams[i].0` false: more may come) has a row waiting and `out`
/// stays within `max_bytes` (at least one row goes if any can). Equal
/// keys go in fragment order. Returns the rows handed out.
pub(super) fn merge(
    streams: &mut [(bool, &mut Buffered)],
    descending: bool,
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> u32 {
    let mut count = 0;
    loop {
        if streams.iter().any(|(done, b)| !*done && b.is_empty()) {
            return count;
        }
        let mut best: Option<usize> = None;
        for (i, (_, b)) in streams.iter().enumerate() {
            let Some(key) = b.front_key() else {
                continue;
            };
            let better = match best {
                None => true,
                Some(j) => {
                    let other = streams[j].1.front_key().expect("a candidate has a row");
                    if descending {
                        key > other
                    } else {
                        key < other
                    }
                }
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else {
            return count;
        };
        if count > 0 && out.len() + streams[i].1.front_row_len() > max_bytes {
            return count;
        }
        streams[i].1.pop_into(out);
        count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of rows whose key is one byte and whose row is an attribute
    /// list of column 0 holding that byte.
    fn batch(keys: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &k in keys {
            out.extend_from_slice(&1u16.to_le_bytes());
            out.push(k);
            let mut w = shoal_types::layout::AttrListWriter::begin(&mut out);
            w.push(&mut out, 0, Some(&[k]));
            w.finish(&mut out);
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
        a.take(&batch(&[1, 4, 9]), 3).unwrap();
        b.take(&batch(&[2, 3]), 2).unwrap();
        let mut out = Vec::new();
        let n = merge(
            &mut [(false, &mut a), (false, &mut b)],
            false,
            1 << 20,
            &mut out,
        );
        // b ran dry after 3: 4 may not go before b's next batch.
        assert_eq!((n, keys_of(&out)), (3, vec![1, 2, 3]));
        b.take(&batch(&[5]), 1).unwrap();
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
        a.take(&batch(&[9, 4]), 2).unwrap();
        b.take(&batch(&[7, 1]), 2).unwrap();
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
    }

    #[test]
    fn a_malformed_batch_is_refused_whole() {
        let mut a = Buffered::default();
        let mut bad = batch(&[1, 2]);
        bad.pop();
        assert!(a.take(&bad, 2).is_err());
        assert!(a.take(&batch(&[1]), 2).is_err());
        assert!(a.take(&batch(&[1, 2]), 1).is_err());
        assert!(a.is_empty());
    }
}
