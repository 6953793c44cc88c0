//! One connection of the data node — to a client, or a link to another
//! data node: handshake state, receive buffer and frame decoder, send
//! buffer and frame encoder.

use mio::net::TcpStream;
use shoal_wire::{FrameDecoder, FrameEncoder, Signal, WireError};
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// Bytes read per `read` call at most.
const READ_CHUNK_BYTES: usize = 256 * 1024;
/// A client whose unsent answers exceed this is not reading: close it.
pub const OUTPUT_BACKLOG_MAX_BYTES: usize = 64 << 20;

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
    Client,
    /// Data node with this id.
    Peer(u16),
}

pub struct Conn {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub phase: Phase,
    pub role: Role,
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
    /// Got bytes (maybe none); the connection is open.
    Open,
    /// The peer closed its side or the socket failed.
    Closed(String),
}

impl Conn {
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        max_frame_bytes: usize,
        max_signals: usize,
    ) -> Self {
        Conn {
            stream,
            peer,
            phase: Phase::Handshake,
            role: Role::Client,
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

    /// Reads everything available (edge-triggered readiness).
    pub fn read_available(&mut self) -> ReadOutcome {
        loop {
            if self.in_start > 0 && self.in_start == self.inbuf.len() {
                self.inbuf.clear();
                self.in_start = 0;
            }
            let len = self.inbuf.len();
            self.inbuf.resize(len + READ_CHUNK_BYTES, 0);
            match self.stream.read(&mut self.inbuf[len..]) {
                Ok(0) => {
                    self.inbuf.truncate(len);
                    return ReadOutcome::Closed("peer closed the connection".into());
                }
                Ok(n) => {
                    self.inbuf.truncate(len + n);
                    if n < READ_CHUNK_BYTES {
                        return ReadOutcome::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.inbuf.truncate(len);
                    return ReadOutcome::Open;
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

    pub fn push_signal(&mut self, signal: &Signal) {
        self.encoder.push(&mut self.outbuf, signal);
        self.dirty = true;
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
