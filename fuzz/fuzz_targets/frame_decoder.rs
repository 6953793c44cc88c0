//! Feeds arbitrary bytes to every decoder of the wire protocol: the frame
//! decoder (at small limits, so the limit checks are reached), `Hello` and
//! `HelloReply`. Nothing may panic, and whatever decodes must re-encode to
//! exactly the bytes it came from (the encoding is canonical) and decode
//! again to the same values.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_wire::{FrameDecoder, FrameEncoder, Hello, HelloReply, Signal, HELLO_BYTES};

const MAX_FRAME_BYTES: usize = 512;
const MAX_SIGNALS: usize = 4;

fuzz_target!(|data: &[u8]| {
    check_frames(data);
    check_handshake(data);
});

fn check_frames(data: &[u8]) {
    let mut decoder = FrameDecoder::new(MAX_FRAME_BYTES, MAX_SIGNALS);
    let mut encoder = FrameEncoder::new(MAX_FRAME_BYTES, MAX_SIGNALS);
    let mut signals = Vec::new();
    let mut reencoded = Vec::new();
    let mut pos = 0;
    while let Ok(Some(consumed)) = decoder.decode(&data[pos..], &mut signals) {
        assert!(consumed <= data.len() - pos);
        // Re-encode this frame alone: same sequence number, same signals,
        // so the bytes must be identical.
        let frame_start = signals.len() - count_of(&data[pos..]);
        for signal in &signals[frame_start..] {
            encoder.push(&mut reencoded, signal);
        }
        encoder.finish(&mut reencoded);
        pos += consumed;
        assert_eq!(reencoded, data[..pos], "re-encoded frames differ from the input");
    }
    if signals.is_empty() {
        return;
    }
    let mut again = Vec::new();
    let mut decoder = FrameDecoder::new(MAX_FRAME_BYTES, MAX_SIGNALS);
    let mut at = 0;
    while at < reencoded.len() {
        at += decoder
            .decode(&reencoded[at..], &mut again)
            .expect("re-encoded frames decode")
            .expect("re-encoded frames are whole");
    }
    assert_eq!(again, signals);
    for signal in &signals {
        let mut body = Vec::new();
        signal.encode_body(&mut body);
        assert_eq!(Signal::decode(signal.gsn(), &body).as_ref(), Ok(signal));
    }
}

/// The signal count field of the frame header at the front of `frame`.
fn count_of(frame: &[u8]) -> usize {
    usize::from(u16::from_le_bytes([frame[8], frame[9]]))
}

fn check_handshake(data: &[u8]) {
    if let Some(prefix) = data.get(..HELLO_BYTES) {
        if let Ok(hello) = Hello::decode(prefix) {
            assert_eq!(hello.encode()[..], prefix[..]);
        }
    }
    let _ = Hello::decode(data);
    if let Ok(Some((reply, consumed))) = HelloReply::decode(data) {
        let mut bytes = Vec::new();
        reply.encode(&mut bytes);
        assert_eq!(bytes[..], data[..consumed]);
        assert_eq!(HelloReply::decode(&bytes), Ok(Some((reply, consumed))));
    }
}
