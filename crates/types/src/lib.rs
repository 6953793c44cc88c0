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
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(buf)).wrapping_mul(K);
        h ^= h >> 29;
    }
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn hash_differs_for_nearby_keys() {
        let a = super::hash_key(&1u32.to_le_bytes());
        let b = super::hash_key(&2u32.to_le_bytes());
        assert_ne!(a, b);
        assert_ne!(super::hash_key(b""), super::hash_key(&[0]));
    }
}
