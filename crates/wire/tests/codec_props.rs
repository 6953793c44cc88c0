//! Randomized tests of the frame codec and the handshake against simple
//! models: signals survive a round trip through the encoder and decoder at
//! tiny limits, frames split exactly where a greedy packer would split
//! them, partial input is never decoded early, and no input makes a decoder
//! panic.

use proptest::prelude::*;
use shoal_types::{SchemaVersion, TableId, TransId};
use shoal_wire::{
    ErrorReport, ExecType, FrameDecoder, FrameEncoder, Hello, HelloReply, KeyOp, LockMode,
    NodeType, OpResult, OpType, Signal, TcKeyConf, TcKeyRef, TcKeyReq, TransState, WireError,
    FRAME_BYTES_MIN, FRAME_HEADER_BYTES, OP_IGNORE_ERROR,
};

fn small_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..12)
}

fn detail() -> impl Strategy<Value = String> {
    "\\PC{0,8}"
}

fn key_op() -> impl Strategy<Value = KeyOp> {
    (
        prop_oneof![
            Just(OpType::Read),
            Just(OpType::Insert),
            Just(OpType::Update),
            Just(OpType::Write),
            Just(OpType::Delete)
        ],
        prop_oneof![
            Just(LockMode::CommittedRead),
            Just(LockMode::Shared),
            Just(LockMode::Exclusive)
        ],
        prop_oneof![Just(0u8), Just(OP_IGNORE_ERROR)],
        any::<u32>(),
        any::<u32>(),
        small_bytes(),
        small_bytes(),
    )
        .prop_map(|(op, lock, flags, table, version, key, attrs)| {
            KeyOp::new(
                op,
                lock,
                flags,
                TableId(table),
                SchemaVersion(version),
                &key,
                &attrs,
            )
        })
}

fn signal() -> impl Strategy<Value = Signal> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u32>(),
            prop_oneof![
                Just(ExecType::NoCommit),
                Just(ExecType::Commit),
                Just(ExecType::Rollback)
            ],
            prop::collection::vec(key_op(), 0..4),
        )
            .prop_map(|(trans, request, exec, ops)| Signal::TcKeyReq(TcKeyReq {
                trans: TransId(trans),
                request,
                exec,
                durable: false,
                ops
            })),
        (
            any::<u64>(),
            any::<u32>(),
            prop_oneof![
                Just(TransState::Open),
                Just(TransState::Committed),
                Just(TransState::Aborted)
            ],
            prop::collection::vec(
                (any::<u16>(), small_bytes()).prop_map(|(code, data)| OpResult { code, data }),
                0..4
            ),
        )
            .prop_map(
                |(trans, request, state, results)| Signal::TcKeyConf(TcKeyConf {
                    trans: TransId(trans),
                    request,
                    state,
                    ack_wanted: state == TransState::Committed && trans % 2 == 0,
                    results
                })
            ),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            detail()
        )
            .prop_map(|(trans, request, code, op_index, detail)| {
                Signal::TcKeyRef(TcKeyRef {
                    trans: TransId(trans),
                    request,
                    code,
                    op_index,
                    detail,
                })
            }),
        (any::<u16>(), detail())
            .prop_map(|(code, detail)| Signal::ErrorReport(ErrorReport { code, detail })),
        prop::collection::vec(any::<u64>(), 0..6).prop_map(|t| Signal::TcCommitAck(
            shoal_wire::TcCommitAck {
                trans: t.into_iter().map(TransId).collect()
            }
        )),
        (any::<u16>(), any::<u32>(), any::<u64>(), any::<bool>()).prop_map(
            |(node, incarnation, trans, committed)| Signal::TcKeyFailConf(
                shoal_wire::TcKeyFailConf {
                    node,
                    incarnation,
                    trans: TransId(trans),
                    committed
                }
            )
        ),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(t, table, frag, from_row, max_bytes)| Signal::FragmentRowsReq(
                    shoal_wire::FragmentRowsReq {
                        trans: TransId(t),
                        table: TableId(table),
                        frag,
                        from_row,
                        max_bytes
                    }
                )
            ),
        (
            any::<u64>(),
            any::<u16>(),
            any::<u32>(),
            prop::collection::vec(
                (any::<u32>(), prop::collection::vec(any::<u8>(), 0..16)),
                0..6
            )
        )
            .prop_map(|(t, code, next_row, rows)| Signal::FragmentRowsConf(
                shoal_wire::FragmentRowsConf {
                    trans: TransId(t),
                    code,
                    next_row,
                    rows
                }
            )),
        (
            any::<u16>(),
            any::<u32>(),
            prop::collection::vec(any::<u64>().prop_map(TransId), 0..8)
        )
            .prop_map(|(node, incarnation, committed)| Signal::TcNodeFailRep(
                shoal_wire::TcNodeFailRep {
                    node,
                    incarnation,
                    committed
                }
            )),
    ]
}

/// Signals, each with a flag saying whether to call `finish` after it.
fn pushes() -> impl Strategy<Value = Vec<(Signal, bool)>> {
    prop::collection::vec((signal(), prop::bool::weighted(0.2)), 1..16)
}

/// Limits small enough to force splitting but big enough for every signal.
fn limits_for(pushes: &[(Signal, bool)], extra_bytes: usize, max_signals: usize) -> (usize, usize) {
    let largest = pushes
        .iter()
        .map(|(s, _)| s.encoded_len())
        .max()
        .unwrap_or(0);
    (
        (FRAME_HEADER_BYTES + largest + extra_bytes).max(FRAME_BYTES_MIN),
        max_signals,
    )
}

fn encode(pushes: &[(Signal, bool)], max_frame: usize, max_signals: usize) -> Vec<u8> {
    let mut enc = FrameEncoder::new(max_frame, max_signals);
    let mut out = Vec::new();
    for (signal, finish) in pushes {
        enc.push(&mut out, signal);
        if *finish {
            enc.finish(&mut out);
        }
    }
    enc.finish(&mut out);
    out
}

/// The model: a greedy packer. Returns each frame's (length, signal count).
fn model_frames(pushes: &[(Signal, bool)], max_frame: usize, max_signals: usize) -> FrameShapes {
    let mut frames = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    for (signal, finish) in pushes {
        let size = signal.encoded_len();
        if let Some((len, count)) = open {
            if count == max_signals || len + size > max_frame {
                frames.push((len, count));
                open = None;
            }
        }
        let (len, count) = open.unwrap_or((FRAME_HEADER_BYTES, 0));
        open = Some((len + size, count + 1));
        if *finish {
            frames.extend(open.take());
        }
    }
    frames.extend(open);
    frames
}

/// Each frame's (length in bytes, signal count).
type FrameShapes = Vec<(usize, usize)>;

/// Decodes a whole stream, returning the signals and each frame's shape.
fn decode_stream(
    bytes: &[u8],
    max_frame: usize,
    max_signals: usize,
) -> Result<(Vec<Signal>, FrameShapes), WireError> {
    let mut dec = FrameDecoder::new(max_frame, max_signals);
    let mut signals = Vec::new();
    let mut frames = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let before = signals.len();
        match dec.decode(&bytes[pos..], &mut signals)? {
            Some(n) => {
                frames.push((n, signals.len() - before));
                pos += n;
            }
            None => {
                return Err(WireError::Malformed(format!(
                    "stream ends inside a frame at {pos}"
                )))
            }
        }
    }
    Ok((signals, frames))
}

/// Feeds `bytes` to a decoder loop until it needs more or fails; must not
/// panic whatever the bytes.
fn drain(dec: &mut FrameDecoder, bytes: &[u8]) -> Vec<Signal> {
    let mut signals = Vec::new();
    let mut pos = 0;
    while let Ok(Some(n)) = dec.decode(&bytes[pos..], &mut signals) {
        assert!(n >= FRAME_HEADER_BYTES && n <= bytes.len() - pos);
        pos += n;
    }
    signals
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_splits_like_the_model(
        pushes in pushes(),
        extra_bytes in 0usize..96,
        max_signals in 1usize..6,
    ) {
        let (max_frame, max_signals) = limits_for(&pushes, extra_bytes, max_signals);
        let bytes = encode(&pushes, max_frame, max_signals);
        let (signals, frames) = decode_stream(&bytes, max_frame, max_signals).unwrap();
        let expected: Vec<Signal> = pushes.iter().map(|(s, _)| s.clone()).collect();
        prop_assert_eq!(signals, expected);
        prop_assert_eq!(&frames, &model_frames(&pushes, max_frame, max_signals));
        for (len, count) in frames {
            prop_assert!(len <= max_frame && (1..=max_signals).contains(&count));
        }
    }

    #[test]
    fn byte_at_a_time_decodes_only_whole_frames(pushes in pushes(), max_signals in 1usize..4) {
        let (max_frame, max_signals) = limits_for(&pushes, 16, max_signals);
        let bytes = encode(&pushes, max_frame, max_signals);
        let frames = model_frames(&pushes, max_frame, max_signals);
        let mut dec = FrameDecoder::new(max_frame, max_signals);
        let mut buf = Vec::new();
        let mut signals = Vec::new();
        let mut frame_ends = Vec::new();
        for (i, &b) in bytes.iter().enumerate() {
            buf.push(b);
            match dec.decode(&buf, &mut signals).unwrap() {
                None => {}
                Some(n) => {
                    // Decoded exactly when the frame's last byte arrived.
                    prop_assert_eq!(n, buf.len());
                    buf.clear();
                    frame_ends.push(i + 1);
                }
            }
        }
        prop_assert!(buf.is_empty());
        let expected_ends: Vec<usize> =
            frames.iter().scan(0, |end, (len, _)| { *end += len; Some(*end) }).collect();
        prop_assert_eq!(frame_ends, expected_ends);
        prop_assert_eq!(signals.len(), pushes.len());
    }

    #[test]
    fn truncated_frames_never_decode(pushes in pushes(), cut in 1usize..64) {
        let (max_frame, _) = limits_for(&pushes, 0, 1000);
        let bytes = encode(&pushes, max_frame, 1000);
        let frame_len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
        let cut = cut.min(frame_len - FRAME_HEADER_BYTES);
        let short = &bytes[..frame_len - cut];
        // A prefix is just incomplete...
        prop_assert_eq!(FrameDecoder::new(max_frame, 1000).decode(short, &mut Vec::new()), Ok(None));
        // ...and a prefix whose length field claims it is whole is rejected.
        let mut lying = short.to_vec();
        let lying_len = lying.len() as u32;
        lying[0..4].copy_from_slice(&lying_len.to_le_bytes());
        let mut out = Vec::new();
        prop_assert!(FrameDecoder::new(max_frame, 1000).decode(&lying, &mut out).is_err());
        prop_assert!(out.is_empty());
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        gsn in 0u16..32,
        max_frame in FRAME_BYTES_MIN..200,
        max_signals in 1usize..8,
    ) {
        drain(&mut FrameDecoder::new(max_frame, max_signals), &bytes);
        let _ = Signal::decode(gsn, &bytes);
        let _ = Hello::decode(&bytes);
        let _ = HelloReply::decode(&bytes);
    }

    #[test]
    fn random_frames_with_a_plausible_header_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..200),
        count in 0u16..6,
        gsn in prop_oneof![0u16..6, 16u16..26],
    ) {
        // A valid header and one signal header in front of random bytes
        // reach the body decoders far more often than pure noise does.
        let mut frame = Vec::new();
        let len = (FRAME_HEADER_BYTES + 8 + body.len()) as u32;
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&0u32.to_le_bytes());
        frame.extend_from_slice(&count.to_le_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(&gsn.to_le_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
        frame.extend_from_slice(&body);
        let signals = drain(&mut FrameDecoder::new(4096, 8), &frame);
        // Whatever decoded must re-encode to a stream that decodes the same.
        if !signals.is_empty() {
            let pushes: Vec<(Signal, bool)> = signals.iter().map(|s| (s.clone(), false)).collect();
            let again = decode_stream(&encode(&pushes, 4096, 8), 4096, 8).unwrap().0;
            prop_assert_eq!(again, signals);
        }
    }

    #[test]
    fn mutated_frames_never_panic(
        pushes in pushes(),
        mutations in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        max_signals in 1usize..4,
    ) {
        let (max_frame, max_signals) = limits_for(&pushes, 8, max_signals);
        let mut bytes = encode(&pushes, max_frame, max_signals);
        for (index, value) in &mutations {
            let i = index.index(bytes.len());
            bytes[i] = *value;
        }
        let signals = drain(&mut FrameDecoder::new(max_frame, max_signals), &bytes);
        // Whatever decoded must re-encode to a stream that decodes the same.
        if !signals.is_empty() {
            let pushes: Vec<(Signal, bool)> = signals.iter().map(|s| (s.clone(), false)).collect();
            let (max_frame, _) = limits_for(&pushes, 0, 1);
            let again = decode_stream(&encode(&pushes, max_frame, 2), max_frame, 2).unwrap().0;
            prop_assert_eq!(again, signals);
        }
    }

    #[test]
    fn hello_round_trips(
        version in any::<u16>(),
        api in any::<bool>(),
        cluster_id in any::<u64>(),
        node_id in any::<u16>(),
        target_node_id in any::<u16>(),
        incarnation in any::<u32>(),
    ) {
        let hello = Hello {
            protocol_version: version,
            node_type: if api { NodeType::Api } else { NodeType::DataNode },
            cluster_id,
            node_id,
            target_node_id,
            incarnation,
        };
        prop_assert_eq!(Hello::decode(&hello.encode()), Ok(hello));
    }

    #[test]
    fn hello_reply_round_trips(
        status in prop_oneof![Just(0u16), any::<u16>()],
        node_id in any::<u16>(),
        max_frame in FRAME_BYTES_MIN as u32..=shoal_wire::FRAME_BYTES_MAX as u32,
        max_signals in 1u32..=shoal_wire::SIGNALS_PER_FRAME_MAX as u32,
        detail in "\\PC{0,40}",
        tail in prop::collection::vec(any::<u8>(), 0..8),
        incarnation in any::<u32>(),
    ) {
        let reply = HelloReply { status, node_id, max_frame_bytes: max_frame, max_signals_per_frame: max_signals, incarnation, detail };
        let mut bytes = Vec::new();
        reply.encode(&mut bytes);
        let len = bytes.len();
        bytes.extend_from_slice(&tail);
        prop_assert_eq!(HelloReply::decode(&bytes), Ok(Some((reply, len))));
        for end in 0..len {
            prop_assert_eq!(HelloReply::decode(&bytes[..end]), Ok(None));
        }
    }
}

/// Node-to-node signals: an encoded signal with some bytes changed either
/// fails to decode or decodes to a signal that encodes back to those bytes;
/// it never panics.
mod node_signals {
    use super::*;
    use shoal_wire::node::{
        first_txn_ref, BlockSignal, Chain, ClusterSignal, CopyRow, EpochSignal, Member, View,
    };

    fn samples(key: Vec<u8>, data: Vec<u8>) -> Vec<BlockSignal> {
        let txn = first_txn_ref(2, 5) + 7;
        let view = View {
            number: 4,
            dist_version: 9,
            history: 3,
            members: vec![
                Member {
                    node: 1,
                    incarnation: 2,
                    started: true,
                },
                Member {
                    node: 3,
                    incarnation: 1,
                    started: false,
                },
            ],
        };
        vec![
            BlockSignal::from(ClusterSignal::ViewPrepare {
                to: 3,
                view: view.clone(),
            }),
            BlockSignal::from(ClusterSignal::ViewPrepareConf {
                to: 1,
                number: 4,
                committed: view.clone(),
                dist_version: 8,
                prepared: Some(view),
            }),
            BlockSignal::from(ClusterSignal::TakeoverTxn {
                to: 1,
                reporter: 3,
                txn,
                api_node: 60,
                trans: TransId(9),
                committed: false,
                epoch: 0,
                frags: vec![(TableId(4), 1)],
            }),
            BlockSignal::from(ClusterSignal::CopyRows {
                to: 3,
                table: TableId(4),
                frag: 1,
                seq: 2,
                from_row: 0,
                to_row: 64,
                id_end: 128,
                rows: vec![CopyRow {
                    row: 9,
                    epoch: 40,
                    fixed: key.clone(),
                    var: data.clone(),
                }],
                occupied: vec![0x55; 8],
                last: false,
            }),
            BlockSignal::LqhKeyReq {
                txn,
                op_no: 3,
                low_water: txn - 1,
                frag: 1,
                frag_version: 7,
                row: 12,
                row_new: false,
                copied: false,
                api_node: 60,
                trans: TransId(9),
                op: KeyOp::new(
                    OpType::Write,
                    LockMode::Exclusive,
                    0,
                    TableId(4),
                    SchemaVersion(1),
                    &key,
                    &data,
                ),
                chain: Chain::new(&[2, 3]),
                hop: 0,
                commit_at_last: false,
                fired: vec![1, 0, 5, 9, 0, 0, 0, 2, 1, 0, 7].into(),
            },
            BlockSignal::LqhKeyConf {
                txn,
                committed: false,
                epoch: 0,
                op_no: 0,
                result: OpResult { code: 0, data },
                fired: vec![1, 0, 5, 9, 0, 0, 0, 1, 1, 0, 7].into(),
            },
            BlockSignal::CommitReq {
                txn,
                node: 3,
                frags: vec![(TableId(4), 1)].into(),
                release: false,
                visible_at_complete: false,
                epoch: 5,
            },
            BlockSignal::from(ClusterSignal::Epoch(EpochSignal::Progress {
                to: 1,
                completed: 4,
                saved: 3,
            })),
            BlockSignal::CommitConf {
                txn,
                node: 3,
                release: false,
            },
            BlockSignal::AbortReq { txn, node: 2 },
        ]
    }

    proptest! {
        #[test]
        fn mutated_node_signals_never_panic(
            key in prop::collection::vec(any::<u8>(), 0..16),
            data in prop::collection::vec(any::<u8>(), 0..32),
            flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            for sig in samples(key.clone(), data.clone()) {
                let mut body = Vec::new();
                sig.encode_body(&mut body);
                let decoded = BlockSignal::decode(sig.gsn(), &body);
                prop_assert_eq!(decoded, Ok(sig.clone()));
                for &(at, byte) in &flips {
                    let i = at % body.len();
                    body[i] = byte;
                }
                if let Ok(again) = BlockSignal::decode(sig.gsn(), &body) {
                    let mut re = Vec::new();
                    again.encode_body(&mut re);
                    prop_assert_eq!(re, body);
                }
            }
        }
    }
}
