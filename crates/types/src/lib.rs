//! Shared vocabulary of Shoal: identifiers, column types and values, table
//! schemas, the stored-row layout and the error-code registry.
//!
//! Every other crate (wire, storage, kernel, mgmd, client) speaks in these
//! types, so they stay free of I/O and cheap to construct.

#![forbid(unsafe_code)]

pub mod arbitration;
pub mod decimal;
pub mod distribution;
pub mod error;
pub mod filter;
pub mod ids;
pub mod index_key;
pub mod layout;
pub mod schema;
pub mod temporal;
pub mod value;

pub use decimal::Decimal;
pub use error::{ErrorClass, ErrorCode, ShoalError};
pub use ids::{NodeId, SchemaVersion, TableId, TransId};
pub use layout::{AttrSlice, RowLayout};
pub use schema::{ColumnDef, ColumnType, IndexDef, TableDef, TableOptions, UniqueIndexDef};
pub use value::Value;

/// Hash of an encoded key. The client and the data nodes use the same
/// function: on the distribution key it picks the fragment (so the client
/// starts a transaction on the node holding its first key's primary), on
/// the whole primary key it is the hash index's bucket hash.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    mix_hash(key)
}

/// A small, dependency-free 64-bit hash (a multiply-xorshift over 8-byte
/// words). Good distribution for short keys and fast on the hot path.
#[inline]
fn mix_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0x2545_F491_4F6C_DD1D ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        h = (h ^ w).wrapping_mul(K);
        h ^= h >> 29;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h = (h ^ tail_word(rest)).wrapping_mul(K);
        h ^= h >> 29;
    }
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 32)
}

/// The 1 to 7 bytes `rest` as a little-endian word, zero above them: what
/// copying them into a zeroed 8-byte buffer gives, read with at most two
/// overlapping loads instead (the copy was a `memcpy` call, and the wide
/// load after narrow stores missed store forwarding: 3–4 % of a data
/// node's time, as every key is hashed up to three times).
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    debug_assert!((1..8).contains(&n));
    if n >= 4 {
        let lo = u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
        let hi = u64::from(u32::from_le_bytes([
            rest[n - 4],
            rest[n - 3],
            rest[n - 2],
            rest[n - 1],
        ]));
        // The bytes both loads hold land on the same places.
        lo | (hi << ((n - 4) * 8))
    } else if n >= 2 {
        let lo = u64::from(u16::from_le_bytes([rest[0], rest[1]]));
        let hi = u64::from(u16::from_le_bytes([rest[n - 2], rest[n - 1]]));
        lo | (hi << ((n - 2) * 8))
    } else {
        u64::from(rest[0])
    }
}

#[cfg(test)]
mod tests {
    /// The tail as it was first written: copied into a zeroed buffer.
    fn tail_by_copy(rest: &[u8]) -> u64 {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        u64::from_le_bytes(buf)
    }

    /// The whole hash as it was first written, for the equivalence test.
    fn hash_by_copy(bytes: &[u8]) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h: u64 = 0x2545_F491_4F6C_DD1D ^ (bytes.len() as u64).wrapping_mul(K);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
            h ^= h >> 29;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            h = (h ^ tail_by_copy(rest)).wrapping_mul(K);
            h ^= h >> 29;
        }
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }

    #[test]
    fn every_key_hashes_as_before() {
        let mut x: u64 = 42;
        let mut key = Vec::new();
        for len in 0..40 {
            for _ in 0..200 {
                key.clear();
                for _ in 0..len {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    key.push((x >> 56) as u8);
                }
                assert_eq!(super::hash_key(&key), hash_by_copy(&key), "{key:?}");
            }
        }
    }

    #[test]
    fn the_tail_is_read_as_the_zeroed_copy_would_be() {
        let mut x: u64 = 0x0123_4567_89AB_CDEF;
        for _ in 0..2000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let bytes = x.to_le_bytes();
            for n in 1..8 {
                assert_eq!(super::tail_word(&bytes[..n]), tail_by_copy(&bytes[..n]));
            }
        }
        for n in 1..8 {
            assert_eq!(
                super::tail_word(&[0xFF; 7][..n]),
                tail_by_copy(&[0xFF; 7][..n])
            );
        }
    }

    /// Hashes place rows in fragments and are kept in data files and
    /// computed by clients: they must never change. (These are what the
    /// first version, `hash_by_copy`, gives.)
    #[test]
    fn hashes_never_change() {
        let keys: [&[u8]; 6] = [
            b"",
            &[7],
            &1u32.to_le_bytes(),
            &123_456_789u64.to_le_bytes(),
            b"hello, world",
            b"0123456789abcdef0123",
        ];
        let hashes: Vec<u64> = keys.iter().map(|k| super::hash_key(k)).collect();
        assert_eq!(hashes, GOLDEN);
    }

    const GOLDEN: [u64; 6] = [
        16_218_463_410_748_732_542,
        14_232_804_300_945_854_980,
        1_361_879_596_675_233_512,
        10_790_256_770_921_838_822,
        15_616_773_842_344_704_356,
        744_358_840_528_840_289,
    ];

    #[test]
    fn hash_differs_for_nearby_keys() {
        let a = super::hash_key(&1u32.to_le_bytes());
        let b = super::hash_key(&2u32.to_le_bytes());
        assert_ne!(a, b);
        assert_ne!(super::hash_key(b""), super::hash_key(&[0]));
    }
}
