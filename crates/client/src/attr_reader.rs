//! A checked, single-pass reader of an attribute list received from a data
//! node (`u16 count`, then per attribute `u16 column id`, `u16 length`
//! (`0xFFFF` = NULL) and the value bytes; `shoal_types::layout`).
//!
//! Unlike `shoal_types::layout::AttrIter`, which trusts a list that
//! `AttrSlice::parse` has already walked, this reader checks every length
//! as it goes, so a row is parsed once rather than walked twice. Every
//! read is bounds-checked: nothing here can panic on any input.

use shoal_types::layout::NULL_LEN;

/// One attribute: its column id, where its value starts in the list, and
/// the value bytes (`None` for NULL).
pub(crate) struct Attr<'a> {
    pub col: u16,
    /// Offset of the attribute's header (column id) in the whole list.
    pub at: usize,
    pub value: Option<&'a [u8]>,
}

pub(crate) struct AttrReader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Attributes the count announces that are not read yet.
    left: u16,
}

impl<'a> AttrReader<'a> {
    /// Reads the count; fails if the list is too short to hold one.
    pub fn new(buf: &'a [u8]) -> Result<AttrReader<'a>, &'static str> {
        let count = read_u16(buf, 0).ok_or("attribute list truncated")?;
        Ok(AttrReader {
            buf,
            pos: 2,
            left: count,
        })
    }

    /// How many attributes the list announces that are not read yet.
    pub fn left(&self) -> u16 {
        self.left
    }

    /// The next attribute, `Ok(None)` after the last one the count
    /// announces.
    #[inline]
    pub fn next_attr(&mut self) -> Result<Option<Attr<'a>>, &'static str> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let at = self.pos;
        let col = read_u16(self.buf, at).ok_or("attribute header truncated")?;
        let len = read_u16(self.buf, at + 2).ok_or("attribute header truncated")?;
        self.pos = at + 4;
        let value = if len == NULL_LEN {
            None
        } else {
            let end = self.pos + len as usize;
            let v = self
                .buf
                .get(self.pos..end)
                .ok_or("attribute value truncated")?;
            self.pos = end;
            Some(v)
        };
        Ok(Some(Attr { col, at, value }))
    }

    /// Bytes after the last attribute read (all of them once the count is
    /// exhausted: a well-formed answer has none).
    pub fn trailing(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
}

/// The little-endian `u16` at `at`, if the buffer holds it.
#[inline]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_checks_every_length() {
        // count 2: (col 3, 2 bytes "ab"), (col 1, NULL), then 1 extra byte.
        let list = [2, 0, 3, 0, 2, 0, b'a', b'b', 1, 0, 0xFF, 0xFF, 9];
        let mut r = AttrReader::new(&list).unwrap();
        let a = r.next_attr().unwrap().unwrap();
        assert_eq!((a.col, a.at, a.value), (3, 2, Some(&b"ab"[..])));
        let b = r.next_attr().unwrap().unwrap();
        assert_eq!((b.col, b.at, b.value), (1, 8, None));
        assert!(r.next_attr().unwrap().is_none());
        assert_eq!(r.trailing(), 1);
        for cut in 0..12 {
            let mut ok = true;
            match AttrReader::new(&list[..cut]) {
                Err(_) => ok = false,
                Ok(mut r) => {
                    while let Some(res) = r.next_attr().transpose() {
                        if res.is_err() {
                            ok = false;
                            break;
                        }
                    }
                }
            }
            assert!(!ok, "a list cut at {cut} bytes must fail");
        }
    }
}
