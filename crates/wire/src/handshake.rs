//! The handshake: the connecting side sends [`Hello`], the accepting side
//! answers [`HelloReply`]; only then do frames flow.
//!
//! Invariants: both messages start with [`MAGIC`]; every reserved field is
//! zero; a reply's detail is at most [`HELLO_DETAIL_BYTES_MAX`] bytes of
//! UTF-8; an accepting reply (status 0) carries frame limits the codecs
//! accept. The decoders check the shape of the messages; whether the
//! protocol version, cluster id and node ids are acceptable is the
//! caller's decision (see [`Hello::is_compatible`]).

use crate::frame::{WireError, FRAME_BYTES_MAX, FRAME_BYTES_MIN, SIGNALS_PER_FRAME_MAX};
use crate::signals::{put_u16, put_u32, truncate_at_char_boundary, Reader};

pub const MAGIC: u32 = u32::from_le_bytes(*b"SHOL");
pub const PROTOCOL_VERSION: u16 = 4;
pub const HELLO_BYTES: usize = 24;
/// The fixed part of a [`HelloReply`], before its detail bytes.
pub const HELLO_REPLY_FIXED_BYTES: usize = 22;
/// The longest detail a [`HelloReply`] carries; longer ones are cut at a
/// character boundary when encoded and rejected when decoded.
pub const HELLO_DETAIL_BYTES_MAX: usize = 1024;
/// [`HelloReply::status`] of an accepted handshake.
pub const HELLO_STATUS_ACCEPTED: u16 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NodeType {
    Api = 1,
    DataNode = 2,
}

impl NodeType {
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(NodeType::Api),
            2 => Some(NodeType::DataNode),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub protocol_version: u16,
    pub node_type: NodeType,
    pub cluster_id: u64,
    /// The connecting node's id (from mgmd).
    pub node_id: u16,
    /// The node id the sender expects to reach.
    pub target_node_id: u16,
    /// A data node's start number (mgmd counts each start of a node id):
    /// a link belongs to one incarnation of its peer, and a restarted
    /// node is a new incarnation. API nodes send 0.
    pub incarnation: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloReply {
    /// 0 = accepted, else an error code from the registry.
    pub status: u16,
    pub node_id: u16,
    pub max_frame_bytes: u32,
    pub max_signals_per_frame: u32,
    /// The answering data node's start number: a client tells a restarted
    /// node from the incarnation it knew (0 in a rejection).
    pub incarnation: u32,
    pub detail: String,
}

impl Hello {
    /// A Hello for this build's [`PROTOCOL_VERSION`].
    pub fn new(node_type: NodeType, cluster_id: u64, node_id: u16, target_node_id: u16) -> Self {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            node_type,
            cluster_id,
            node_id,
            target_node_id,
            incarnation: 0,
        }
    }

    /// The same Hello from a data node in its `incarnation`.
    pub fn with_incarnation(mut self, incarnation: u32) -> Self {
        self.incarnation = incarnation;
        self
    }

    /// Whether the accepting side should take this Hello: same protocol
    /// version, same cluster, and addressed to `own_node_id`. A `false`
    /// is answered with a [`HelloReply`] of status 5003.
    pub fn is_compatible(&self, cluster_id: u64, own_node_id: u16) -> bool {
        self.protocol_version == PROTOCOL_VERSION
            && self.cluster_id == cluster_id
            && self.target_node_id == own_node_id
    }

    /// `u32 magic | u16 protocol_version | u8 node_type | u8 reserved |
    /// u64 cluster_id | u16 node_id | u16 target_node_id | u32 incarnation`.
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut out = [0u8; HELLO_BYTES];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&self.protocol_version.to_le_bytes());
        out[6] = self.node_type as u8;
        out[8..16].copy_from_slice(&self.cluster_id.to_le_bytes());
        out[16..18].copy_from_slice(&self.node_id.to_le_bytes());
        out[18..20].copy_from_slice(&self.target_node_id.to_le_bytes());
        out[20..24].copy_from_slice(&self.incarnation.to_le_bytes());
        out
    }

    /// Decodes a Hello from exactly [`HELLO_BYTES`] bytes. Checks the magic,
    /// the node type and the reserved fields, not the version.
    pub fn decode(buf: &[u8]) -> Result<Hello, WireError> {
        if buf.len() != HELLO_BYTES {
            return Err(WireError::Malformed(format!(
                "Hello: {} bytes, must be exactly {HELLO_BYTES}",
                buf.len()
            )));
        }
        let mut r = Reader::new(buf, "Hello");
        check_magic(&mut r)?;
        let protocol_version = r.u16("protocol_version")?;
        let node_type = r.enum_u8("node_type", NodeType::from_u8)?;
        r.reserved_u8("reserved")?;
        let cluster_id = r.u64("cluster_id")?;
        let node_id = r.u16("node_id")?;
        let target_node_id = r.u16("target_node_id")?;
        let incarnation = r.u32("incarnation")?;
        r.finish()?;
        Ok(Hello {
            protocol_version,
            node_type,
            cluster_id,
            node_id,
            target_node_id,
            incarnation,
        })
    }
}

impl HelloReply {
    /// An accepting reply that announces the limits of frames sent to
    /// `node_id`.
    pub fn accepted(
        node_id: u16,
        max_frame_bytes: u32,
        max_signals_per_frame: u32,
        incarnation: u32,
    ) -> Self {
        HelloReply {
            status: HELLO_STATUS_ACCEPTED,
            node_id,
            max_frame_bytes,
            max_signals_per_frame,
            incarnation,
            detail: String::new(),
        }
    }

    /// A rejecting reply with a registry error code (normally 5003) and a
    /// detail saying why.
    pub fn rejected(node_id: u16, status: u16, detail: impl Into<String>) -> Self {
        assert_ne!(
            status, HELLO_STATUS_ACCEPTED,
            "a rejection needs an error code"
        );
        HelloReply {
            status,
            node_id,
            max_frame_bytes: 0,
            max_signals_per_frame: 0,
            incarnation: 0,
            detail: detail.into(),
        }
    }

    /// The encoded size (the detail cut to [`HELLO_DETAIL_BYTES_MAX`]).
    pub fn encoded_len(&self) -> usize {
        HELLO_REPLY_FIXED_BYTES
            + truncate_at_char_boundary(&self.detail, HELLO_DETAIL_BYTES_MAX).len()
    }

    /// Appends `u32 magic | u16 status | u16 node_id | u32 max_frame_bytes |
    /// u32 max_signals_per_frame | u32 incarnation | u16 detail_len |
    /// detail` to `out`. A
    /// detail above [`HELLO_DETAIL_BYTES_MAX`] is cut at a character
    /// boundary.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let detail = truncate_at_char_boundary(&self.detail, HELLO_DETAIL_BYTES_MAX);
        out.reserve(HELLO_REPLY_FIXED_BYTES + detail.len());
        put_u32(out, MAGIC);
        put_u16(out, self.status);
        put_u16(out, self.node_id);
        put_u32(out, self.max_frame_bytes);
        put_u32(out, self.max_signals_per_frame);
        put_u32(out, self.incarnation);
        put_u16(out, detail.len() as u16);
        out.extend_from_slice(detail.as_bytes());
    }

    /// Decodes a reply from the front of `buf`. Returns `Ok(None)` when
    /// more bytes are needed, else the reply and the bytes it used (bytes
    /// after it belong to the frame stream). The magic is checked as soon
    /// as 4 bytes are present. An accepting reply must carry limits within
    /// the protocol's (`FRAME_BYTES_MIN..=FRAME_BYTES_MAX`,
    /// `1..=SIGNALS_PER_FRAME_MAX`), so they can be handed to the codecs.
    pub fn decode(buf: &[u8]) -> Result<Option<(HelloReply, usize)>, WireError> {
        let mut r = Reader::new(buf, "HelloReply");
        if r.remaining() < 4 {
            return Ok(None);
        }
        check_magic(&mut r)?;
        if r.remaining() < HELLO_REPLY_FIXED_BYTES - 4 {
            return Ok(None);
        }
        let status = r.u16("status")?;
        let node_id = r.u16("node_id")?;
        let max_frame_bytes = r.u32("max_frame_bytes")?;
        let max_signals_per_frame = r.u32("max_signals_per_frame")?;
        if status == HELLO_STATUS_ACCEPTED {
            if !(FRAME_BYTES_MIN..=FRAME_BYTES_MAX).contains(&(max_frame_bytes as usize)) {
                return Err(r.malformed_at(
                    8,
                    format_args!(
                        "max_frame_bytes {max_frame_bytes} outside {FRAME_BYTES_MIN}..={FRAME_BYTES_MAX}"
                    ),
                ));
            }
            if !(1..=SIGNALS_PER_FRAME_MAX).contains(&(max_signals_per_frame as usize)) {
                return Err(r.malformed_at(
                    12,
                    format_args!(
                        "max_signals_per_frame {max_signals_per_frame} outside 1..={SIGNALS_PER_FRAME_MAX}"
                    ),
                ));
            }
        }
        let incarnation = r.u32("incarnation")?;
        let detail_len = usize::from(r.u16("detail_len")?);
        if detail_len > HELLO_DETAIL_BYTES_MAX {
            return Err(r.malformed_at(
                20,
                format_args!("detail_len {detail_len} above {HELLO_DETAIL_BYTES_MAX}"),
            ));
        }
        if r.remaining() < detail_len {
            return Ok(None);
        }
        let detail = r.utf8(detail_len, "detail")?;
        Ok(Some((
            HelloReply {
                status,
                node_id,
                max_frame_bytes,
                max_signals_per_frame,
                incarnation,
                detail,
            },
            r.pos,
        )))
    }
}

fn check_magic(r: &mut Reader<'_>) -> Result<(), WireError> {
    let magic = r.u32("magic")?;
    if magic != MAGIC {
        return Err(r.malformed_at(
            0,
            format_args!(
                "bad magic {magic:#010x} (expected {MAGIC:#010x}, \"SHOL\"): not a Shoal peer"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello::new(NodeType::DataNode, 0xDEAD_BEEF_0011_2233, 200, 3).with_incarnation(0x0102_0304)
    }

    fn malformed<T: std::fmt::Debug>(result: Result<T, WireError>) -> String {
        match result {
            Err(WireError::Malformed(msg)) => msg,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn hello_layout_is_byte_exact() {
        let bytes = hello().encode();
        let mut expected = b"SHOL".to_vec();
        expected.extend_from_slice(&[4, 0, 2, 0]);
        expected.extend_from_slice(&0xDEAD_BEEF_0011_2233u64.to_le_bytes());
        expected.extend_from_slice(&[200, 0, 3, 0, 4, 3, 2, 1]);
        assert_eq!(bytes.to_vec(), expected);
        assert_eq!(Hello::decode(&bytes), Ok(hello()));
    }

    #[test]
    fn hello_rejects_bad_magic_type_reserved_and_length() {
        let good = hello().encode();
        let mut bad = good;
        bad[0] = b'X';
        assert!(malformed(Hello::decode(&bad)).contains("bad magic"));
        let mut bad = good;
        bad[6] = 3;
        assert!(malformed(Hello::decode(&bad)).contains("node_type value 3"));
        let mut bad = good;
        bad[7] = 1;
        let msg = malformed(Hello::decode(&bad));
        assert!(
            msg.contains("reserved") && msg.contains("offset 7"),
            "{msg}"
        );
        assert!(malformed(Hello::decode(&good[..23])).contains("23 bytes"));
        let mut long = good.to_vec();
        long.push(0);
        assert!(malformed(Hello::decode(&long)).contains("25 bytes"));
    }

    #[test]
    fn hello_version_is_exposed_not_checked() {
        let mut h = hello();
        h.protocol_version = 99;
        let decoded = Hello::decode(&h.encode()).unwrap();
        assert_eq!(decoded.protocol_version, 99);
        assert!(!decoded.is_compatible(0xDEAD_BEEF_0011_2233, 3));
        assert!(hello().is_compatible(0xDEAD_BEEF_0011_2233, 3));
        assert!(!hello().is_compatible(1, 3));
        assert!(!hello().is_compatible(0xDEAD_BEEF_0011_2233, 4));
    }

    #[test]
    fn hello_reply_round_trips_byte_at_a_time() {
        let replies = [
            HelloReply::accepted(3, 65536, 512, 7),
            HelloReply::rejected(3, 5003, "cluster id 7, expected 8 — ✗"),
        ];
        for reply in replies {
            let mut bytes = Vec::new();
            reply.encode(&mut bytes);
            assert_eq!(bytes.len(), reply.encoded_len());
            for end in 0..bytes.len() {
                assert_eq!(HelloReply::decode(&bytes[..end]), Ok(None), "prefix {end}");
            }
            // Bytes after the reply belong to the frame stream.
            bytes.extend_from_slice(&[1, 2, 3]);
            assert_eq!(
                HelloReply::decode(&bytes),
                Ok(Some((reply.clone(), bytes.len() - 3)))
            );
        }
    }

    #[test]
    fn hello_reply_layout_is_byte_exact() {
        let mut bytes = Vec::new();
        HelloReply::rejected(9, 5003, "no").encode(&mut bytes);
        let mut expected = b"SHOL".to_vec();
        expected.extend_from_slice(&5003u16.to_le_bytes());
        expected.extend_from_slice(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&[0, 0, 0, 0, 2, 0, b'n', b'o']);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn hello_reply_rejects_bad_magic_early() {
        assert!(malformed(HelloReply::decode(b"SHOX")).contains("bad magic"));
        assert_eq!(HelloReply::decode(b"SHO"), Ok(None));
    }

    #[test]
    fn hello_reply_rejects_bad_fields() {
        let encode = |reply: &HelloReply| {
            let mut b = Vec::new();
            reply.encode(&mut b);
            b
        };
        let bad_limits = [
            HelloReply::accepted(1, 0, 10, 1),
            HelloReply::accepted(1, FRAME_BYTES_MAX as u32 + 1, 10, 1),
            HelloReply::accepted(1, 4096, 0, 1),
            HelloReply::accepted(1, 4096, SIGNALS_PER_FRAME_MAX as u32 + 1, 1),
        ];
        for reply in &bad_limits {
            assert!(malformed(HelloReply::decode(&encode(reply))).contains("outside"));
        }
        let mut long = encode(&HelloReply::rejected(1, 5003, ""));
        long[20..22].copy_from_slice(&1025u16.to_le_bytes());
        assert!(malformed(HelloReply::decode(&long)).contains("detail_len 1025"));
        let mut bad_utf8 = encode(&HelloReply::rejected(1, 5003, "ab"));
        bad_utf8[23] = 0xC0;
        assert!(malformed(HelloReply::decode(&bad_utf8)).contains("UTF-8"));
    }

    #[test]
    fn long_reply_detail_is_cut() {
        let reply = HelloReply::rejected(1, 5003, "ü".repeat(600));
        let mut bytes = Vec::new();
        reply.encode(&mut bytes);
        let (decoded, _) = HelloReply::decode(&bytes).unwrap().unwrap();
        assert_eq!(decoded.detail.len(), HELLO_DETAIL_BYTES_MAX);
        assert!(reply.detail.starts_with(&decoded.detail));
    }
}
