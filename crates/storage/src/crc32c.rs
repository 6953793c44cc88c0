//! CRC-32C (Castagnoli), the checksum of every redo chunk: table-driven
//! ("slicing by 8": eight bytes per step through eight tables), in safe
//! code. Castagnoli's polynomial detects more of the error patterns of
//! storage than the older CRC-32, and the CPU has an instruction for it
//! should this ever show in a profile again.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// `TABLES[0]` is the classic byte table; `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes, so eight table lookups fold in
/// eight bytes at once.
const TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
};

/// Continues a checksum over `bytes` (start with [`crc32c`] or 0).
pub fn crc32c_update(crc: u32, bytes: &[u8]) -> u32 {
    let t = &TABLES;
    let mut c = !crc;
    let mut chunks = bytes.chunks_exact(8);
    for w in &mut chunks {
        let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        c = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][w[4] as usize]
            ^ t[2][w[5] as usize]
            ^ t[1][w[6] as usize]
            ^ t[0][w[7] as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_update(0, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The check value of CRC-32C (RFC 3720, appendix B.4 test data).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        assert_eq!(crc32c(b""), 0);
        // In pieces, the same.
        assert_eq!(crc32c_update(crc32c(b"1234"), b"56789"), 0xE306_9283);
    }

    /// The eight-bytes-a-step path equals the byte-at-a-time definition
    /// for every length and split.
    #[test]
    fn sliced_equals_bytewise() {
        fn bytewise(crc: u32, bytes: &[u8]) -> u32 {
            let mut c = !crc;
            for &b in bytes {
                c = TABLES[0][((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
            }
            !c
        }
        let data: Vec<u8> = (0..200u32).map(|i| (i * 131 + 7) as u8).collect();
        for len in 0..data.len() {
            for split in [0, 1, 3, 8, 13].into_iter().filter(|&s| s <= len) {
                let (a, b) = data[..len].split_at(split);
                assert_eq!(
                    crc32c_update(crc32c(a), b),
                    bytewise(bytewise(0, a), b),
                    "len {len} split {split}"
                );
            }
        }
    }
}
