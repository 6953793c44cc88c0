//! MySQL packet framing: a 3-byte little-endian payload length and a
//! 1-byte sequence id before each payload, with payloads of 16 MiB - 1 or
//! more split into full 16 MiB - 1 chunks and a shorter last one (empty
//! if the payload is an exact multiple).
//!
//! Invariants:
//! - the sequence id counts every chunk in both directions within one
//!   command (or the handshake) and starts at 0 with each command; a packet
//!   that skips one is refused ([`PacketError::OutOfOrder`]);
//! - a joined payload never grows past `packet_bytes_max` (MySQL's
//!   `max_allowed_packet`): the length in each header is checked before
//!   its bytes are read, and memory grows only with bytes actually
//!   received, so a lying header costs nothing;
//! - every read and write is bounded in time (`net_read_timeout`,
//!   `net_write_timeout`), so a stalled client cannot hold a connection's
//!   handler (and its locks) forever.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::timeout;

use super::errors;
use crate::outcome::SqlError;

/// The largest payload one chunk carries; a chunk this long says that
/// another follows.
pub(crate) const CHUNK_BYTES_MAX: usize = 0xFF_FFFF;

/// Output is written to the socket once this much is buffered (and at
/// the end of each answer), so a large result streams out in pieces.
const FLUSH_BYTES: usize = 64 * 1024;

/// Read buffer per connection.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Why a packet could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PacketError {
    /// The client closed the connection between packets.
    #[error("the client closed the connection")]
    Closed,
    /// The socket failed, or closed inside a packet.
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    /// A payload longer than `packet_bytes_max`.
    #[error("a packet of at least {bytes} bytes, past max_allowed_packet ({bytes_max})")]
    TooLarge { bytes: usize, bytes_max: usize },
    /// A packet whose sequence id is not the next one.
    #[error("packet sequence id {got} where {expected} was next")]
    OutOfOrder { expected: u8, got: u8 },
    /// No packet started within the idle timeout.
    #[error("no command within the idle timeout")]
    Idle,
    /// A packet started but its bytes stopped coming, or the client stopped
    /// reading what the server writes.
    #[error("timed out in the middle of a packet")]
    Timeout,
}

impl PacketError {
    /// The error to tell the client before closing, if it can still hear
    /// one (not after it closed or the socket broke).
    pub(crate) fn answer(&self) -> Option<SqlError> {
        match self {
            PacketError::Closed | PacketError::Io(_) => None,
            PacketError::TooLarge { .. } => Some(errors::packet_too_large()),
            PacketError::OutOfOrder { expected, got } => {
                Some(errors::packets_out_of_order(*expected, *got))
            }
            PacketError::Idle => Some(errors::idle_timeout()),
            PacketError::Timeout => Some(errors::read_timeout(
                "net_read_timeout or net_write_timeout",
            )),
        }
    }

    /// The client went away or idled out: routine, not a protocol error
    /// worth a warning.
    pub(crate) fn is_routine(&self) -> bool {
        matches!(
            self,
            PacketError::Closed | PacketError::Io(_) | PacketError::Idle
        )
    }
}

/// The limits a connection's framing enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PacketLimits {
    pub(crate) packet_bytes_max: usize,
    pub(crate) net_read_timeout: Duration,
    pub(crate) net_write_timeout: Duration,
}

/// One connection's packets: framed reads, and writes gathered in a
/// buffer that goes out on [`PacketIo::flush`].
pub(crate) struct PacketIo<S> {
    stream: BufReader<S>,
    out: Vec<u8>,
    sequence: u8,
    limits: PacketLimits,
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    pub(crate) fn new(stream: S, limits: PacketLimits) -> PacketIo<S> {
        PacketIo {
            stream: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
            out: Vec::new(),
            sequence: 0,
            limits,
        }
    }

    /// Replaces the limits (they grow once the client has logged in).
    pub(crate) fn set_limits(&mut self, limits: PacketLimits) {
        self.limits = limits;
    }

    /// A new command starts: its first packet (the client's) has sequence id 0.
    pub(crate) fn reset_sequence(&mut self) {
        self.sequence = 0;
    }

    /// The sequence id the next packet (either way) carries.
    #[cfg(test)]
    pub(crate) fn sequence(&self) -> u8 {
        self.sequence
    }

    /// The next packet, which must start within the read timeout.
    pub(crate) async fn read_packet(&mut self) -> Result<Vec<u8>, PacketError> {
        self.read_packet_within(self.limits.net_read_timeout).await
    }

    /// The next packet, whose first byte may take up to `idle` to come
    /// (a client between commands); the rest is under the read timeout.
    pub(crate) async fn read_packet_within(
        &mut self,
        idle: Duration,
    ) -> Result<Vec<u8>, PacketError> {
        match timeout(idle, self.stream.fill_buf()).await {
            Err(_) => return Err(PacketError::Idle),
            Ok(Err(e)) => return Err(PacketError::Io(e)),
            Ok(Ok([])) => return Err(PacketError::Closed),
            Ok(Ok(_)) => {}
        }
        let mut payload = Vec::new();
        loop {
            let mut header = [0u8; 4];
            self.read_exact_timed(&mut header).await?;
            let [l0, l1, l2, sequence] = header;
            let chunk_len = u32::from_le_bytes([l0, l1, l2, 0]) as usize;
            if sequence != self.sequence {
                // The ERR that follows continues the client's numbering, so
                // that the client reads it rather than a second mismatch.
                let expected = self.sequence;
                self.sequence = sequence.wrapping_add(1);
                return Err(PacketError::OutOfOrder {
                    expected,
                    got: sequence,
                });
            }
            self.sequence = self.sequence.wrapping_add(1);
            let total = payload.len().saturating_add(chunk_len);
            if total > self.limits.packet_bytes_max {
                return Err(PacketError::TooLarge {
                    bytes: total,
                    bytes_max: self.limits.packet_bytes_max,
                });
            }
            self.read_chunk(&mut payload, chunk_len).await?;
            if chunk_len < CHUNK_BYTES_MAX {
                return Ok(payload);
            }
        }
    }

    async fn read_exact_timed(&mut self, buf: &mut [u8]) -> Result<(), PacketError> {
        match timeout(self.limits.net_read_timeout, self.stream.read_exact(buf)).await {
            Err(_) => Err(PacketError::Timeout),
            Ok(Err(e)) => Err(PacketError::Io(e)),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Appends `len` bytes to `payload`, growing it only as bytes arrive;
    /// each socket read (not the whole chunk) is under the read timeout, as
    /// MySQL's `net_read_timeout` is, so a big packet on a slow link passes.
    async fn read_chunk(&mut self, payload: &mut Vec<u8>, len: usize) -> Result<(), PacketError> {
        let mut left = len;
        while left > 0 {
            let available =
                match timeout(self.limits.net_read_timeout, self.stream.fill_buf()).await {
                    Err(_) => return Err(PacketError::Timeout),
                    Ok(Err(e)) => return Err(PacketError::Io(e)),
                    Ok(Ok([])) => return Err(PacketError::Io(io::ErrorKind::UnexpectedEof.into())),
                    Ok(Ok(bytes)) => bytes,
                };
            let n = available.len().min(left);
            payload.extend_from_slice(available.get(..n).unwrap_or_default());
            self.stream.consume(n);
            left -= n;
        }
        Ok(())
    }

    /// Frames `payload` into the output buffer (split into chunks if it
    /// needs to be) without writing anything yet.
    pub(crate) fn push(&mut self, payload: &[u8]) {
        let mut rest = payload;
        loop {
            let (chunk, tail) = rest.split_at(rest.len().min(CHUNK_BYTES_MAX));
            let len = (chunk.len() as u32).to_le_bytes();
            self.out
                .extend_from_slice(&[len[0], len[1], len[2], self.sequence]);
            self.out.extend_from_slice(chunk);
            self.sequence = self.sequence.wrapping_add(1);
            rest = tail;
            // A full chunk says "more follows", so a payload that is an
            // exact multiple of the chunk size ends with an empty one.
            if chunk.len() < CHUNK_BYTES_MAX {
                return;
            }
        }
    }

    /// Bytes framed and not yet written.
    pub(crate) fn buffered(&self) -> usize {
        self.out.len()
    }

    /// [`push`](Self::push), then a write if enough is buffered.
    pub(crate) async fn send(&mut self, payload: &[u8]) -> Result<(), PacketError> {
        self.push(payload);
        if self.out.len() >= FLUSH_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes everything buffered.
    pub(crate) async fn flush(&mut self) -> Result<(), PacketError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let write = async {
            let stream = self.stream.get_mut();
            stream.write_all(&self.out).await?;
            stream.flush().await
        };
        let result = timeout(self.limits.net_write_timeout, write).await;
        self.out.clear();
        if self.out.capacity() > 4 * FLUSH_BYTES {
            // One huge row should not pin its buffer for the connection's life.
            self.out = Vec::new();
        }
        match result {
            Err(_) => Err(PacketError::Timeout),
            Ok(Err(e)) => Err(PacketError::Io(e)),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Sends and flushes one packet, ignoring errors: the last word on a
    /// connection that is being closed anyway.
    pub(crate) async fn send_final(&mut self, payload: &[u8]) {
        self.push(payload);
        let _ = self.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(packet_bytes_max: usize) -> PacketLimits {
        PacketLimits {
            packet_bytes_max,
            net_read_timeout: Duration::from_secs(10),
            net_write_timeout: Duration::from_secs(10),
        }
    }

    /// Writes `payloads` from one end of a pipe and reads them back at the
    /// other: the model is the list of payloads itself.
    async fn round_trip(payloads: Vec<Vec<u8>>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let sent = payloads.clone();
        let writer = tokio::spawn(async move {
            let mut io = PacketIo::new(a, limits(usize::MAX));
            for payload in &sent {
                io.send(payload).await.expect("send");
            }
            io.flush().await.expect("flush");
            io.sequence()
        });
        let mut io = PacketIo::new(b, limits(usize::MAX));
        for payload in &payloads {
            let got = io.read_packet().await.expect("read");
            assert_eq!(got.len(), payload.len());
            assert!(got == *payload);
        }
        assert_eq!(writer.await.expect("writer"), io.sequence());
    }

    #[tokio::test]
    async fn payloads_at_the_chunk_boundaries_split_and_join() {
        let sizes = [
            0,
            1,
            250,
            CHUNK_BYTES_MAX - 1,
            CHUNK_BYTES_MAX,
            CHUNK_BYTES_MAX + 1,
            2 * CHUNK_BYTES_MAX,
        ];
        let payloads = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (j * 31 + i) as u8).collect())
            .collect();
        round_trip(payloads).await;
    }

    #[tokio::test]
    async fn an_exact_multiple_ends_with_an_empty_chunk() {
        let (a, _b) = tokio::io::duplex(64);
        let mut io = PacketIo::new(a, limits(usize::MAX));
        io.push(&vec![7u8; CHUNK_BYTES_MAX]);
        assert_eq!(io.out.len(), 4 + CHUNK_BYTES_MAX + 4);
        assert_eq!(io.out[io.out.len() - 4..], [0, 0, 0, 1]);
        assert_eq!(io.sequence(), 2);
    }

    async fn read_raw(bytes: Vec<u8>, packet_bytes_max: usize) -> Result<Vec<u8>, PacketError> {
        let (mut a, b) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let _ = a.write_all(&bytes).await;
            // Keep the pipe open briefly so a reader waiting for more
            // bytes sees end-of-file, not a race.
            drop(a);
        });
        let mut io = PacketIo::new(b, limits(packet_bytes_max));
        io.read_packet().await
    }

    #[tokio::test]
    async fn a_header_past_the_limit_is_refused_before_its_bytes_come() {
        let result = read_raw(vec![101, 0, 0, 0], 100).await;
        assert!(matches!(
            result,
            Err(PacketError::TooLarge {
                bytes: 101,
                bytes_max: 100
            })
        ));
        // Exactly at the limit is fine.
        let mut ok = vec![100, 0, 0, 0];
        ok.extend(std::iter::repeat_n(b'x', 100));
        assert_eq!(read_raw(ok, 100).await.expect("at the limit").len(), 100);
    }

    #[tokio::test]
    async fn the_limit_counts_the_joined_payload() {
        let mut bytes = vec![0xFF, 0xFF, 0xFF, 0];
        bytes.extend(std::iter::repeat_n(1u8, CHUNK_BYTES_MAX));
        bytes.extend([11, 0, 0, 1]);
        bytes.extend([2u8; 11]);
        let result = read_raw(bytes, CHUNK_BYTES_MAX + 10).await;
        assert!(matches!(result, Err(PacketError::TooLarge { .. })));
    }

    #[tokio::test]
    async fn a_skipped_sequence_id_is_out_of_order() {
        let result = read_raw(vec![1, 0, 0, 5, b'x'], 100).await;
        assert!(matches!(
            result,
            Err(PacketError::OutOfOrder {
                expected: 0,
                got: 5
            })
        ));
    }

    #[tokio::test]
    async fn end_of_file_between_packets_is_a_close_and_inside_one_an_error() {
        assert!(matches!(
            read_raw(vec![], 100).await,
            Err(PacketError::Closed)
        ));
        assert!(matches!(
            read_raw(vec![5, 0], 100).await,
            Err(PacketError::Io(_))
        ));
        assert!(matches!(
            read_raw(vec![5, 0, 0, 0, b'a'], 100).await,
            Err(PacketError::Io(_))
        ));
    }

    #[tokio::test]
    async fn random_bytes_never_panic_the_reader() {
        // A xorshift stream, seeded, so a failure replays.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..300 {
            let len = (state % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let result = read_raw(bytes.clone(), 32).await;
            if let Ok(payload) = result {
                // Whatever was accepted was well-framed: a header saying
                // its length, sequence 0, and that many bytes.
                assert_eq!(bytes[3], 0);
                assert_eq!(bytes[0] as usize, payload.len());
                assert!(payload.len() <= 32);
            }
        }
    }
}
