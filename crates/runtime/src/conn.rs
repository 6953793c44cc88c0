//! One connection of the data node — to a client, or a link to another
//! data node: handshake state, receive buffer and frame decoder, send
//! buffer and frame encoder.
//!
//! Both buffers are bounded: a read takes at most a budget of bytes before
//! the event loop serves other connections (the rest is read on a later
//! turn), so the receive buffer holds at most one partial frame plus one
//! budget; the send buffer is capped by the event loop, which closes a
//! connection whose peer does not read.

use mio::net::TcpStream;
use shoal_wire::{FrameDecoder, FrameEncoder, Signal, WireError};
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// Bytes read per `read` call at most.
const READ_CHUNK_BYTES: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Accepted: waiting for the peer's Hello.
    Handshake,
    /// Opened by us to another data node: waiting for its HelloReply.
    AwaitReply,
    Open,
}

/// Who is at the other end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not known until the handshake.
    Unknown,
    Client,
    /// Data node `node` in its start `incarnation` (0 until its reply
    /// names it, on a link this node opened).
    Peer {
        node: u16,
        incarnation: u32,
    },
}

pub struct Conn {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub phase: Phase,
    pub role: Role,
    /// When the connection was opened or accepted (the handshake must end
    /// in time).
    pub opened_ms: u64,
    inbuf: Vec<u8>,
    in_start: usize,
    decoder: FrameDecoder,
    encoder: FrameEncoder,
    outbuf: Vec<u8>,
    out_pos: usize,
    pub want_write: bool,
    pub dirty: bool,
}

pub enum ReadOutcome {
    /// Read everything the socket had; the connection is open.
    Drained,
    /// Stopped at the budget: more may be waiting (read again later, the
    /// socket will not signal it again).
    Budget,
    /// The peer closed its side or the socket failed.
    Closed(String),
}

impl Conn {
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        now_ms: u64,
        max_frame_bytes: usize,
        max_signals: usize,
    ) -> Self {
        Conn {
            stream,
            peer,
            phase: Phase::Handshake,
            role: Role::Unknown,
            opened_ms: now_ms,
            inbuf: Vec::with_capacity(64 * 1024),
            in_start: 0,
            decoder: FrameDecoder::new(max_frame_bytes, max_signals),
            encoder: FrameEncoder::new(max_frame_bytes, max_signals),
            outbuf: Vec::with_capacity(64 * 1024),
            out_pos: 0,
            want_write: false,
            dirty: false,
        }
    }

    pub fn is_peer(&self) -> bool {
        matches!(self.role, Role::Peer { .. })
    }

    /// Reads what is available, at most `budget` bytes.
    pub fn read_available(&mut self, budget: usize) -> ReadOutcome {
        let mut taken = 0;
        loop {
            if taken >= budget {
                return ReadOutcome::Budget;
            }
            if self.in_start > 0 && self.in_start == self.inbuf.len() {
                self.inbuf.clear();
                self.in_start = 0;
            }
            let len = self.inbuf.len();
            let chunk = READ_CHUNK_BYTES.min(budget - taken);
            self.inbuf.resize(len + chunk, 0);
            match self.stream.read(&mut self.inbuf[len..]) {
                Ok(0) => {
                    self.inbuf.truncate(len);
                    return ReadOutcome::Closed("peer closed the connection".into());
                }
                Ok(n) => {
                    self.inbuf.truncate(len + n);
                    taken += n;
                    if n < chunk {
                        return ReadOutcome::Drained;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.inbuf.truncate(len);
                    return ReadOutcome::Drained;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.inbuf.truncate(len),
                Err(e) => {
                    self.inbuf.truncate(len);
                    return ReadOutcome::Closed(format!("read failed: {e}"));
                }
            }
        }
    }

    /// Unconsumed received bytes.
    pub fn input(&self) -> &[u8] {
        &self.inbuf[self.in_start..]
    }

    /// Decodes the next whole frame from the buffered input into `out` and
    /// consumes its bytes. `Ok(false)`: no whole frame buffered yet.
    pub fn decode_frame(&mut self, out: &mut Vec<Signal>) -> Result<bool, WireError> {
        match self.decoder.decode(&self.inbuf[self.in_start..], out)? {
            Some(n) => {
                self.consume(n);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn consume(&mut self, n: usize) {
        self.in_start += n;
        if self.in_start == self.inbuf.len() {
            self.inbuf.clear();
            self.in_start = 0;
        } else if self.in_start > 1 << 20 {
            self.inbuf.drain(..self.in_start);
            self.in_start = 0;
        }
    }

    /// Queues a signal; `Err` if it cannot fit any frame this connection
    /// may carry (nothing is queued then).
    pub fn push_signal(&mut self, signal: &Signal) -> Result<(), String> {
        let bytes = signal.encoded_len();
        if bytes > self.encoder.max_signal_bytes() {
            return Err(format!(
                "a {} of {bytes} bytes does not fit a frame of at most {} bytes",
                signal.name(),
                self.encoder.max_signal_bytes()
            ));
        }
        self.encoder.push(&mut self.outbuf, signal);
        self.dirty = true;
        Ok(())
    }

    pub fn push_raw(&mut self, bytes: &[u8]) {
        self.outbuf.extend_from_slice(bytes);
        self.dirty = true;
    }

    pub fn backlog_bytes(&self) -> usize {
        self.outbuf.len() - self.out_pos
    }

    /// Closes the open frame and writes as much as the socket takes.
    /// Returns an error string if the socket failed.
    pub fn flush(&mut self) -> Result<(), String> {
        self.encoder.finish(&mut self.outbuf);
        self.dirty = false;
        while self.out_pos < self.outbuf.len() {
            match self.stream.write(&self.outbuf[self.out_pos..]) {
                Ok(0) => return Err("socket accepted no bytes".into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.want_write = true;
                    // Keep the buffer from growing forever at the front.
                    if self.out_pos > 1 << 20 {
                        self.outbuf.drain(..self.out_pos);
                        self.out_pos = 0;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        self.outbuf.clear();
        self.out_pos = 0;
        self.want_write = false;
        Ok(())
    }
}
