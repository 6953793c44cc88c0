//! A minimal MySQL protocol client for tests that look at packets: enough
//! to log in as root without a password and send a COM_QUERY.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a read may wait for the server.
const WAIT: Duration = Duration::from_secs(10);

/// Capabilities: protocol 4.1, secure connection, plugin auth, multiple
/// statements (and no CLIENT_DEPRECATE_EOF: EOF packets end the lists).
pub const CAPABILITIES: u32 = 0x0000_0200 // CLIENT_PROTOCOL_41
    | 0x0000_8000 // CLIENT_SECURE_CONNECTION
    | 0x0001_0000 // CLIENT_MULTI_STATEMENTS
    | 0x0002_0000 // CLIENT_MULTI_RESULTS
    | 0x0008_0000 // CLIENT_PLUGIN_AUTH
    | 0x0000_0001 // CLIENT_LONG_PASSWORD
    | 0x0000_2000; // CLIENT_TRANSACTIONS

pub fn read_packet(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut header = [0u8; 4];
    s.read_exact(&mut header).expect("a packet header");
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).expect("a packet body");
    (header[3], payload)
}

pub fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    let mut packet = vec![len[0], len[1], len[2], seq];
    packet.extend_from_slice(payload);
    s.write_all(&packet).expect("write a packet");
}

/// Logs in as root (no password); the connection, ready for a command.
pub fn login(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the SQL node");
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    let (seq, greeting) = read_packet(&mut s);
    assert_eq!(greeting[0], 10, "protocol version 10");
    let mut response = CAPABILITIES.to_le_bytes().to_vec();
    response.extend((16u32 << 20).to_le_bytes());
    response.push(45); // utf8mb4
    response.extend([0u8; 23]);
    response.extend(b"root\0");
    response.push(0); // an empty proof: no password
    response.extend(b"mysql_native_password\0");
    let mut seq = seq + 1;
    write_packet(&mut s, seq, &response);
    loop {
        let (at, answer) = read_packet(&mut s);
        seq = at + 1;
        match answer.first() {
            Some(0x00) => return s,
            // An auth switch: the proof of an empty password is empty.
            Some(0xFE) => write_packet(&mut s, seq, &[]),
            other => panic!("login refused: {other:?} {answer:?}"),
        }
    }
}

pub fn send_query(s: &mut TcpStream, sql: &str) {
    let mut payload = vec![0x03]; // COM_QUERY
    payload.extend(sql.as_bytes());
    write_packet(s, 0, &payload);
}
