//! The MySQL protocol's basic encodings: a bounds-checked reader over a
//! packet's payload, and writers for its integers and strings.
//!
//! Invariant: nothing here panics on any input. Every read checks the bytes
//! left first and answers [`Malformed`] naming the field that did not fit,
//! so a client's garbage becomes an error packet, never a crash.

/// A payload that does not hold what its command says it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A cursor over one packet's payload.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(payload: &'a [u8]) -> Reader<'a> {
        Reader { rest: payload }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// `n` bytes, or `Malformed(what)` if fewer are left.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Malformed> {
        if n > self.rest.len() {
            return Err(Malformed(what));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, Malformed> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u24(&mut self, what: &'static str) -> Result<u32, Malformed> {
        let [a, b, c] = self.array(what)?;
        Ok(u32::from_le_bytes([a, b, c, 0]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], Malformed> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    /// A length-encoded integer. 0xFB (NULL) and 0xFF (an ERR header) are
    /// not integers, so a client sending them here sent a broken packet.
    pub(crate) fn lenenc_int(&mut self, what: &'static str) -> Result<u64, Malformed> {
        match self.u8(what)? {
            n @ 0..=0xFA => Ok(u64::from(n)),
            0xFC => Ok(u64::from(self.u16(what)?)),
            0xFD => Ok(u64::from(self.u24(what)?)),
            0xFE => self.u64(what),
            _ => Err(Malformed(what)),
        }
    }

    /// A length-encoded string: the length is checked against what is left
    /// before anything is sliced or allocated.
    pub(crate) fn lenenc_bytes(&mut self, what: &'static str) -> Result<&'a [u8], Malformed> {
        let n = self.lenenc_int(what)?;
        let n = usize::try_from(n).map_err(|_| Malformed(what))?;
        self.bytes(n, what)
    }

    /// A NUL-terminated string (the NUL is consumed, not returned).
    pub(crate) fn nul_terminated(&mut self, what: &'static str) -> Result<&'a [u8], Malformed> {
        let end = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(Malformed(what))?;
        let text = self.bytes(end, what)?;
        self.bytes(1, what)?;
        Ok(text)
    }

    /// A NUL-terminated string whose NUL some clients leave off at the end
    /// of the packet (the auth plugin name): the rest of the packet then.
    pub(crate) fn nul_terminated_or_rest(&mut self) -> &'a [u8] {
        match self.rest.iter().position(|&b| b == 0) {
            Some(end) => {
                let (text, tail) = self.rest.split_at(end);
                self.rest = tail.get(1..).unwrap_or_default();
                text
            }
            None => self.rest(),
        }
    }

    /// Everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
}

pub(crate) fn put_u16(out: &mut Vec<u8>, n: u16) {
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => out.push(n as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

pub(crate) fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc_int(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A NUL-terminated string; a NUL inside `bytes` would end it early, so
/// callers pass only text they made (versions, plugin names).
pub(crate) fn put_nul_terminated(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(!bytes.contains(&0));
    out.extend_from_slice(bytes);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_ints_round_trip_at_every_width_boundary() {
        for n in [
            0u64,
            1,
            0xFA,
            0xFB,
            0xFC,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, n);
            let mut reader = Reader::new(&out);
            assert_eq!(reader.lenenc_int("n"), Ok(n));
            assert!(reader.is_empty(), "{n} left bytes behind");
        }
    }

    #[test]
    fn short_input_is_malformed_not_a_panic() {
        assert_eq!(Reader::new(&[]).u8("a"), Err(Malformed("a")));
        assert_eq!(Reader::new(&[1]).u16("b"), Err(Malformed("b")));
        assert_eq!(Reader::new(&[0xFC, 1]).lenenc_int("c"), Err(Malformed("c")));
        assert_eq!(Reader::new(&[0xFB]).lenenc_int("d"), Err(Malformed("d")));
        assert_eq!(Reader::new(&[0xFF]).lenenc_int("d"), Err(Malformed("d")));
        // A length far past the payload: no allocation, no slice panic.
        let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, b'x'];
        assert_eq!(Reader::new(&huge).lenenc_bytes("e"), Err(Malformed("e")));
        assert_eq!(Reader::new(b"abc").nul_terminated("f"), Err(Malformed("f")));
    }

    #[test]
    fn strings() {
        let mut out = Vec::new();
        put_lenenc_bytes(&mut out, b"hello");
        put_nul_terminated(&mut out, b"plugin");
        out.extend_from_slice(b"tail");
        let mut reader = Reader::new(&out);
        assert_eq!(reader.lenenc_bytes("s"), Ok(&b"hello"[..]));
        assert_eq!(reader.nul_terminated("p"), Ok(&b"plugin"[..]));
        assert_eq!(reader.nul_terminated_or_rest(), b"tail");
        assert!(reader.is_empty());
    }
}
