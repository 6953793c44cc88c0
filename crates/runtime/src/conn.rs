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
/// Room a read wants at the end of the receive buffer; less, and the
/// buffer is compacted or grown.
const READ_ROOM_MIN_BYTES: usize = 64 * 1024;
/// A receive buffer grown past this is shrunk back once empty.
const INBUF_KEEP_BYTES: usize = 4 << 20;

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
    /// Received bytes are `inbuf[in_start..in_end]`; the rest of it is
    /// room for the next reads (allocated and zeroed once, not per read).
    inbuf: Vec<u8>,
    in_start: usize,
    in_end: usize,
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
            inbuf: vec![0; 2 * READ_ROOM_MIN_BYTES],
            in_start: 0,
            in_end: 0,
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
            self.make_room();
            let chunk = READ_CHUNK_BYTES
                .min(budget - taken)
                .min(self.inbuf.len() - self.in_end);
            match self
                .stream
                .read(&mut self.inbuf[self.in_end..self.in_end + chunk])
            {
                Ok(0) => return ReadOutcome::Closed("peer closed the connection".into()),
                Ok(n) => {
                    self.in_end += n;
                    taken += n;
                    if n < chunk {
                        return ReadOutcome::Drained;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ReadOutcome::Closed(format!("read failed: {e}")),
            }
        }
    }

    /// Leaves at least [`READ_ROOM_MIN_BYTES`] free at the end of the
    /// receive buffer: moves the unread bytes to the front, or grows it.
    fn make_room(&mut self) {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
            if self.inbuf.len() > INBUF_KEEP_BYTES {
                self.inbuf.truncate(2 * READ_ROOM_MIN_BYTES);
                self.inbuf.shrink_to_fit();
            }
        }
        if self.inbuf.len() - self.in_end >= READ_ROOM_MIN_BYTES {
            return;
        }
        if self.in_start > 0 {
            self.inbuf.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        if self.inbuf.len() - self.in_end < READ_ROOM_MIN_BYTES {
            let len = (self.inbuf.len() * 2).max(self.in_end + READ_CHUNK_BYTES);
            self.inbuf.resize(len, 0);
        }
    }

    /// Unconsumed received bytes.
    pub fn input(&self) -> &[u8] {
        &self.inbuf[self.in_start..self.in_end]
    }

    /// Decodes the next whole frame from the buffered input into `out` and
    /// consumes its bytes. `Ok(false)`: no whole frame buffered yet.
    pub fn decode_frame(&mut self, out: &mut Vec<Signal>) -> Result<bool, WireError> {
        match self
            .decoder
            .decode(&self.inbuf[self.in_start..self.in_end], out)?
        {
            Some(n) => {
                self.consume(n);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn consume(&mut self, n: usize) {
        debug_assert!(self.in_start + n <= self.in_end, "consumed past the input");
        self.in_start += n;
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
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
