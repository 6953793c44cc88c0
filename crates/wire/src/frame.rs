//! Frames: `u32 length | u32 sequence | u16 signal count | u16 reserved`
//! then `count` signals of `u16 gsn | u16 reserved | u32 body length | body`.
//!
//! Invariants: `length` counts the whole frame including its header and
//! lies in `FRAME_HEADER_BYTES..=max_frame_bytes`; `count` lies in
//! `1..=max_signals`; the signals fill the frame exactly; every reserved
//! field is zero; sequence numbers start at 0 on each direction of each
//! connection and go up by one per frame, wrapping at `u32::MAX`. The
//! decoder checks all of this (the length as soon as 4 bytes have arrived,
//! the rest of the header as soon as 12 have) and never trusts a count or a
//! length it has not checked against the bytes it holds.

use crate::signals::{gsn_name, put_u16, put_u32, ErrorReport, Signal};
use shoal_types::ErrorCode;

pub const FRAME_HEADER_BYTES: usize = 12;
pub const SIGNAL_HEADER_BYTES: usize = 8;
/// Hard protocol limits; a node may negotiate lower ones in the handshake.
pub const FRAME_BYTES_MAX: usize = 8 * 1024 * 1024;
pub const SIGNALS_PER_FRAME_MAX: usize = 16 * 1024;
/// The smallest frame limit a codec accepts: a header and one empty
/// signal header. Real deployments use far larger limits; tests use tiny
/// ones to exercise splitting.
pub const FRAME_BYTES_MIN: usize = FRAME_HEADER_BYTES + SIGNAL_HEADER_BYTES;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Frame length field above the limit (or below the header size).
    #[error("frame length {len} outside the allowed {FRAME_HEADER_BYTES}..={max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("frame holds {count} signals, the limit is {max}")]
    TooManySignals { count: usize, max: usize },
    /// Frame sequence number not the expected next one.
    #[error("frame sequence {got}, expected {expected}")]
    OutOfOrder { expected: u32, got: u32 },
    /// Anything else malformed: what and where.
    #[error("malformed: {0}")]
    Malformed(String),
    #[error("unknown signal number (GSN) {0}")]
    UnknownSignal(u16),
}

impl WireError {
    /// The registry code a node reports before closing the connection:
    /// `FrameTooLarge` (5002) for a frame above the limit, else
    /// `ProtocolViolation` (5001).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            WireError::FrameTooLarge { len, .. } if *len >= FRAME_HEADER_BYTES => {
                ErrorCode::FrameTooLarge
            }
            _ => ErrorCode::ProtocolViolation,
        }
    }

    /// The `ErrorReport` a node sends just before it closes a connection
    /// that produced this error.
    pub fn to_error_report(&self) -> ErrorReport {
        ErrorReport {
            code: self.error_code() as u16,
            detail: self.to_string(),
        }
    }
}

fn assert_limits(max_frame_bytes: usize, max_signals: usize) {
    assert!(
        (FRAME_BYTES_MIN..=FRAME_BYTES_MAX).contains(&max_frame_bytes),
        "max_frame_bytes {max_frame_bytes} outside {FRAME_BYTES_MIN}..={FRAME_BYTES_MAX}"
    );
    assert!(
        (1..=SIGNALS_PER_FRAME_MAX).contains(&max_signals),
        "max_signals {max_signals} outside 1..={SIGNALS_PER_FRAME_MAX}"
    );
}

#[inline]
fn le_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}

#[inline]
fn le_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Incremental decoder for one connection's receive direction.
///
/// After it returns an error the stream is unusable (the connection must be
/// closed, see `docs/PROTOCOL.md`); it does not resynchronise.
pub struct FrameDecoder {
    max_frame_bytes: usize,
    max_signals: usize,
    /// The sequence number the next frame must carry.
    next_sequence: u32,
}

impl FrameDecoder {
    /// Panics if a limit lies outside `FRAME_BYTES_MIN..=FRAME_BYTES_MAX`
    /// or `1..=SIGNALS_PER_FRAME_MAX` (a configuration bug).
    pub fn new(max_frame_bytes: usize, max_signals: usize) -> Self {
        assert_limits(max_frame_bytes, max_signals);
        FrameDecoder {
            max_frame_bytes,
            max_signals,
            next_sequence: 0,
        }
    }

    /// The sequence number the next frame must carry.
    pub fn next_sequence(&self) -> u32 {
        self.next_sequence
    }

    /// Tries to decode one whole frame from the front of `buf`. Returns
    /// `Ok(None)` when more bytes are needed, else the frame's signals and
    /// the number of bytes consumed. Checks length, count and sequence.
    ///
    /// The header is checked as soon as it has arrived, so an oversized or
    /// out-of-order frame fails before its body is buffered. On error `out`
    /// is left as it was.
    pub fn decode(
        &mut self,
        buf: &[u8],
        out: &mut Vec<Signal>,
    ) -> Result<Option<usize>, WireError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = le_u32(buf, 0) as usize;
        if !(FRAME_HEADER_BYTES..=self.max_frame_bytes).contains(&len) {
            return Err(WireError::FrameTooLarge {
                len,
                max: self.max_frame_bytes,
            });
        }
        if buf.len() < FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let sequence = le_u32(buf, 4);
        let count = usize::from(le_u16(buf, 8));
        let reserved = le_u16(buf, 10);
        if reserved != 0 {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}: reserved header field is {reserved:#06x} at offset 10, must be 0"
            )));
        }
        if sequence != self.next_sequence {
            return Err(WireError::OutOfOrder {
                expected: self.next_sequence,
                got: sequence,
            });
        }
        if count == 0 {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}: signal count is 0 at offset 8"
            )));
        }
        if count > self.max_signals {
            return Err(WireError::TooManySignals {
                count,
                max: self.max_signals,
            });
        }
        // Also bounds the `reserve` below by the frame length.
        if count * SIGNAL_HEADER_BYTES > len - FRAME_HEADER_BYTES {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}: {count} signals cannot fit in a {len}-byte frame"
            )));
        }
        if buf.len() < len {
            return Ok(None);
        }

        let frame = &buf[..len];
        let out_len_before = out.len();
        out.reserve(count);
        match decode_signals(frame, sequence, count, out) {
            Ok(()) => {
                self.next_sequence = self.next_sequence.wrapping_add(1);
                Ok(Some(len))
            }
            Err(e) => {
                out.truncate(out_len_before);
                Err(e)
            }
        }
    }
}

/// Decodes the `count` signals of a whole frame whose header is checked.
fn decode_signals(
    frame: &[u8],
    sequence: u32,
    count: usize,
    out: &mut Vec<Signal>,
) -> Result<(), WireError> {
    let mut pos = FRAME_HEADER_BYTES;
    for index in 0..count {
        let left = frame.len() - pos;
        if left < SIGNAL_HEADER_BYTES {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}, signal {index} at offset {pos}: header truncated, {left} bytes left in frame"
            )));
        }
        let gsn = le_u16(frame, pos);
        let reserved = le_u16(frame, pos + 2);
        let body_len = le_u32(frame, pos + 4) as usize;
        if reserved != 0 {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}, signal {index} at offset {pos}: reserved field is {reserved:#06x}, must be 0"
            )));
        }
        let body_start = pos + SIGNAL_HEADER_BYTES;
        if body_len > frame.len() - body_start {
            return Err(WireError::Malformed(format!(
                "frame seq {sequence}, signal {index} at offset {pos}: body_len {body_len} overruns the frame ({} bytes left)",
                frame.len() - body_start
            )));
        }
        let body = &frame[body_start..body_start + body_len];
        match Signal::decode(gsn, body) {
            Ok(signal) => out.push(signal),
            Err(WireError::Malformed(msg)) => {
                return Err(WireError::Malformed(format!(
                    "frame seq {sequence}, signal {index} ({}) body at frame offset {body_start}: {msg}",
                    gsn_name(gsn).unwrap_or("?")
                )));
            }
            Err(e) => return Err(e),
        }
        pos = body_start + body_len;
    }
    if pos != frame.len() {
        return Err(WireError::Malformed(format!(
            "frame seq {sequence}: {} trailing bytes after {count} signals at offset {pos}",
            frame.len() - pos
        )));
    }
    Ok(())
}

/// Encoder for one connection's send direction: appends signals to an
/// output buffer, opening and closing frames, splitting at the limits.
///
/// While a frame is open the encoder remembers where it starts in `out`:
/// between a `push` and the `finish` that closes the frame, `out` must be
/// the same buffer each time and must not be modified other than by the
/// encoder. After `finish`, `out` holds only whole frames and may be sent,
/// drained or replaced.
pub struct FrameEncoder {
    max_frame_bytes: usize,
    max_signals: usize,
    /// The sequence number the next frame opened will carry.
    next_sequence: u32,
    open: Option<OpenFrame>,
}

/// A frame whose header has not been patched yet.
struct OpenFrame {
    /// Offset of the frame header in `out`.
    start: usize,
    count: usize,
}

impl FrameEncoder {
    /// Panics if a limit lies outside `FRAME_BYTES_MIN..=FRAME_BYTES_MAX`
    /// or `1..=SIGNALS_PER_FRAME_MAX` (a configuration bug).
    pub fn new(max_frame_bytes: usize, max_signals: usize) -> Self {
        assert_limits(max_frame_bytes, max_signals);
        FrameEncoder {
            max_frame_bytes,
            max_signals,
            next_sequence: 0,
            open: None,
        }
    }

    /// The largest signal (header and body) that fits in a frame; pushing a
    /// bigger one panics, so callers check `Signal::encoded_len` against
    /// this when the size depends on user input.
    pub fn max_signal_bytes(&self) -> usize {
        self.max_frame_bytes - FRAME_HEADER_BYTES
    }

    /// Whether a frame is open (pushed to but not yet finished).
    pub fn has_open_frame(&self) -> bool {
        self.open.is_some()
    }

    /// Appends `signal` to the open frame in `out`, first closing that frame
    /// and opening a new one if the signal would exceed either limit.
    pub fn push(&mut self, out: &mut Vec<u8>, signal: &Signal) {
        let signal_bytes = signal.encoded_len();
        assert!(
            signal_bytes <= self.max_signal_bytes(),
            "{} of {signal_bytes} bytes cannot fit a frame of at most {} bytes",
            signal.name(),
            self.max_frame_bytes
        );
        let body_len = signal_bytes - SIGNAL_HEADER_BYTES;
        let must_close = match &self.open {
            Some(open) => {
                assert!(
                    out.len() >= open.start + FRAME_HEADER_BYTES,
                    "output buffer shrank under an open frame"
                );
                let frame_len = out.len() - open.start;
                open.count == self.max_signals || frame_len + signal_bytes > self.max_frame_bytes
            }
            None => false,
        };
        if must_close {
            self.finish(out);
        }
        match &mut self.open {
            Some(open) => open.count += 1,
            None => {
                out.reserve(FRAME_HEADER_BYTES + signal_bytes);
                let start = out.len();
                // Length and count are patched when the frame is closed.
                put_u32(out, 0);
                put_u32(out, self.next_sequence);
                put_u16(out, 0);
                put_u16(out, 0);
                self.next_sequence = self.next_sequence.wrapping_add(1);
                self.open = Some(OpenFrame { start, count: 1 });
            }
        }
        signal.encode_sized(out, body_len);
    }

    /// Closes the open frame (if any) so `out` holds only whole frames.
    pub fn finish(&mut self, out: &mut [u8]) {
        let Some(open) = self.open.take() else {
            return;
        };
        assert!(
            out.len() >= open.start + FRAME_HEADER_BYTES + SIGNAL_HEADER_BYTES,
            "output buffer shrank under an open frame"
        );
        let frame_len = out.len() - open.start;
        assert!(
            frame_len <= self.max_frame_bytes,
            "output buffer grew under an open frame"
        );
        assert!((1..=self.max_signals).contains(&open.count));
        let header = &mut out[open.start..open.start + FRAME_HEADER_BYTES];
        header[0..4].copy_from_slice(&(frame_len as u32).to_le_bytes());
        header[8..10].copy_from_slice(&(open.count as u16).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::{TcKeyRef, GSN_ERROR_REPORT};
    use shoal_types::TransId;

    fn report(detail: &str) -> Signal {
        Signal::ErrorReport(ErrorReport {
            code: 5001,
            detail: detail.into(),
        })
    }

    fn encode_all(max_frame: usize, max_signals: usize, signals: &[Signal]) -> Vec<u8> {
        let mut enc = FrameEncoder::new(max_frame, max_signals);
        let mut out = Vec::new();
        for s in signals {
            enc.push(&mut out, s);
        }
        enc.finish(&mut out);
        assert!(!enc.has_open_frame());
        out
    }

    /// A hand-built frame: header fields as given, then raw signal bytes.
    fn raw_frame(len: u32, seq: u32, count: u16, reserved: u16, signals: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&len.to_le_bytes());
        f.extend_from_slice(&seq.to_le_bytes());
        f.extend_from_slice(&count.to_le_bytes());
        f.extend_from_slice(&reserved.to_le_bytes());
        f.extend_from_slice(signals);
        f
    }

    fn raw_signal(gsn: u16, reserved: u16, body: &[u8]) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(&gsn.to_le_bytes());
        s.extend_from_slice(&reserved.to_le_bytes());
        s.extend_from_slice(&(body.len() as u32).to_le_bytes());
        s.extend_from_slice(body);
        s
    }

    fn empty_report_body() -> Vec<u8> {
        let mut b = 7u16.to_le_bytes().to_vec();
        b.extend_from_slice(&0u16.to_le_bytes());
        b
    }

    fn decode_one(
        dec: &mut FrameDecoder,
        buf: &[u8],
    ) -> Result<Option<(usize, Vec<Signal>)>, WireError> {
        let mut out = Vec::new();
        Ok(dec.decode(buf, &mut out)?.map(|n| (n, out)))
    }

    #[test]
    fn frame_layout_is_byte_exact() {
        let out = encode_all(1024, 16, &[report("")]);
        let sig = raw_signal(GSN_ERROR_REPORT, 0, &[0x89, 0x13, 0, 0]);
        assert_eq!(out, raw_frame(24, 0, 1, 0, &sig));
    }

    #[test]
    fn encoder_splits_at_signal_limit_and_numbers_frames() {
        let signals: Vec<Signal> = (0..5).map(|i| report(&i.to_string())).collect();
        let out = encode_all(1024, 2, &signals);
        let mut dec = FrameDecoder::new(1024, 2);
        let mut pos = 0;
        let mut got = Vec::new();
        let mut frames = 0;
        while pos < out.len() {
            assert_eq!(le_u32(&out, pos + 4), frames, "sequence");
            pos += dec.decode(&out[pos..], &mut got).unwrap().unwrap();
            frames += 1;
        }
        assert_eq!(frames, 3);
        assert_eq!(got, signals);
        assert_eq!(dec.next_sequence(), 3);
    }

    #[test]
    fn encoder_splits_at_byte_limit() {
        // Each signal is 8 + 4 + 4 = 16 bytes; a 44-byte frame holds two.
        let signals: Vec<Signal> = (0..3).map(|_| report("abcd")).collect();
        let out = encode_all(44, 100, &signals);
        assert_eq!(le_u32(&out, 0), 44);
        assert_eq!(le_u16(&out, 8), 2);
        assert_eq!(le_u32(&out, 44), 28);
        assert_eq!(out.len(), 72);
    }

    #[test]
    #[should_panic(expected = "cannot fit a frame")]
    fn encoder_asserts_on_oversized_signal() {
        encode_all(FRAME_BYTES_MIN, 1, &[report("too long")]);
    }

    #[test]
    fn finish_without_push_is_a_no_op() {
        let mut enc = FrameEncoder::new(64, 4);
        let mut out = vec![1, 2, 3];
        enc.finish(&mut out);
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn oversized_frame_detected_from_length_alone() {
        let mut dec = FrameDecoder::new(100, 4);
        assert_eq!(
            dec.decode(&101u32.to_le_bytes(), &mut Vec::new()),
            Err(WireError::FrameTooLarge { len: 101, max: 100 })
        );
        let err = WireError::FrameTooLarge { len: 101, max: 100 };
        assert_eq!(err.error_code(), ErrorCode::FrameTooLarge);
        assert_eq!(err.to_error_report().code, 5002);
    }

    #[test]
    fn undersized_length_is_rejected() {
        let mut dec = FrameDecoder::new(100, 4);
        let err = dec
            .decode(&11u32.to_le_bytes(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(err, WireError::FrameTooLarge { len: 11, max: 100 });
        assert_eq!(err.error_code(), ErrorCode::ProtocolViolation);
    }

    #[test]
    fn too_many_signals_detected_from_header() {
        let mut dec = FrameDecoder::new(1000, 2);
        let frame = raw_frame(1000, 0, 3, 0, &[]);
        assert_eq!(
            decode_one(&mut dec, &frame),
            Err(WireError::TooManySignals { count: 3, max: 2 })
        );
    }

    #[test]
    fn out_of_order_sequence_is_rejected() {
        let sig = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        let mut dec = FrameDecoder::new(100, 4);
        let frame = raw_frame(24, 0, 1, 0, &sig);
        assert!(decode_one(&mut dec, &frame).unwrap().is_some());
        // Replaying frame 0 is out of order, as is skipping to 2.
        assert_eq!(
            decode_one(&mut dec, &frame),
            Err(WireError::OutOfOrder {
                expected: 1,
                got: 0
            })
        );
        assert_eq!(
            decode_one(&mut dec, &raw_frame(24, 2, 1, 0, &sig)),
            Err(WireError::OutOfOrder {
                expected: 1,
                got: 2
            })
        );
        assert!(decode_one(&mut dec, &raw_frame(24, 1, 1, 0, &sig))
            .unwrap()
            .is_some());
    }

    #[test]
    fn sequence_wraps() {
        let mut dec = FrameDecoder {
            next_sequence: u32::MAX,
            ..FrameDecoder::new(100, 4)
        };
        let sig = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        assert!(decode_one(&mut dec, &raw_frame(24, u32::MAX, 1, 0, &sig))
            .unwrap()
            .is_some());
        assert!(decode_one(&mut dec, &raw_frame(24, 0, 1, 0, &sig))
            .unwrap()
            .is_some());
    }

    fn assert_malformed(result: Result<Option<(usize, Vec<Signal>)>, WireError>, needle: &str) {
        match result {
            Err(WireError::Malformed(msg)) => {
                assert!(msg.contains(needle), "{msg:?} lacks {needle:?}")
            }
            other => panic!("expected Malformed containing {needle:?}, got {other:?}"),
        }
    }

    #[test]
    fn reserved_fields_must_be_zero() {
        let sig = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        assert_malformed(
            decode_one(
                &mut FrameDecoder::new(100, 4),
                &raw_frame(24, 0, 1, 0x0100, &sig),
            ),
            "reserved header field",
        );
        let sig = raw_signal(GSN_ERROR_REPORT, 1, &empty_report_body());
        assert_malformed(
            decode_one(
                &mut FrameDecoder::new(100, 4),
                &raw_frame(24, 0, 1, 0, &sig),
            ),
            "signal 0 at offset 12: reserved field",
        );
    }

    #[test]
    fn zero_count_is_rejected() {
        assert_malformed(
            decode_one(&mut FrameDecoder::new(100, 4), &raw_frame(12, 0, 0, 0, &[])),
            "signal count is 0",
        );
    }

    #[test]
    fn unknown_gsn_is_rejected() {
        let sig = raw_signal(99, 0, &[]);
        assert_eq!(
            decode_one(
                &mut FrameDecoder::new(100, 4),
                &raw_frame(20, 0, 1, 0, &sig)
            ),
            Err(WireError::UnknownSignal(99))
        );
    }

    #[test]
    fn trailing_bytes_in_frame_are_rejected() {
        let mut sig = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        sig.extend_from_slice(&[0, 0]);
        assert_malformed(
            decode_one(
                &mut FrameDecoder::new(100, 4),
                &raw_frame(26, 0, 1, 0, &sig),
            ),
            "2 trailing bytes after 1 signals",
        );
    }

    #[test]
    fn trailing_bytes_in_body_are_rejected() {
        let mut body = empty_report_body();
        body.push(0);
        let sig = raw_signal(GSN_ERROR_REPORT, 0, &body);
        assert_malformed(
            decode_one(&mut FrameDecoder::new(100, 4), &raw_frame(25, 0, 1, 0, &sig)),
            "signal 0 (ErrorReport) body at frame offset 20: ErrorReport: 1 trailing bytes at offset 4",
        );
    }

    #[test]
    fn body_overrunning_frame_is_rejected() {
        let mut sig = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        sig[4] = 40; // body_len 40 in a frame with 4 body bytes
        assert_malformed(
            decode_one(
                &mut FrameDecoder::new(100, 4),
                &raw_frame(24, 0, 1, 0, &sig),
            ),
            "body_len 40 overruns the frame",
        );
    }

    #[test]
    fn count_that_cannot_fit_is_rejected_from_header() {
        // 3 signals need at least 24 bytes after the header; 20 - 12 = 8.
        assert_malformed(
            decode_one(&mut FrameDecoder::new(100, 4), &raw_frame(20, 0, 3, 0, &[])),
            "3 signals cannot fit",
        );
    }

    #[test]
    fn error_leaves_output_untouched() {
        let good = raw_signal(GSN_ERROR_REPORT, 0, &empty_report_body());
        let bad = raw_signal(99, 0, &[]);
        let mut signals = good.clone();
        signals.extend_from_slice(&bad);
        let frame = raw_frame(12 + signals.len() as u32, 0, 2, 0, &signals);
        let mut out = vec![report("earlier")];
        let mut dec = FrameDecoder::new(100, 4);
        assert!(dec.decode(&frame, &mut out).is_err());
        assert_eq!(out, vec![report("earlier")]);
        assert_eq!(dec.next_sequence(), 0);
    }

    #[test]
    fn partial_input_needs_more() {
        let out = encode_all(
            256,
            8,
            &[Signal::TcKeyRef(TcKeyRef {
                trans: TransId(1),
                request: 0,
                code: 2,
                op_index: 3,
                detail: "x".into(),
            })],
        );
        let mut dec = FrameDecoder::new(256, 8);
        for end in 0..out.len() {
            assert_eq!(decode_one(&mut dec, &out[..end]), Ok(None), "prefix {end}");
        }
        assert!(decode_one(&mut dec, &out).unwrap().is_some());
    }

    #[test]
    #[should_panic(expected = "max_frame_bytes")]
    fn limits_above_protocol_maximum_are_a_bug() {
        FrameDecoder::new(FRAME_BYTES_MAX + 1, 1);
    }
}
