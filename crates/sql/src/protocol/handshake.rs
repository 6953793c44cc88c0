//! The connection phase: the server's `HandshakeV10` greeting, the
//! client's `HandshakeResponse41`, and authentication (with an auth switch
//! when the client's plugin is not one the account can be checked with).
//!
//! Authentication, by the plugin the client answered with:
//! - `mysql_native_password`: the proof is checked against SHA1(SHA1(pw));
//! - `caching_sha2_password`: the fast path is checked against
//!   SHA256(SHA256(pw)) and answered with `fast_auth_success` (0x01 0x03)
//!   before the OK; an account without that hash, an unknown user, or an
//!   empty answer for an account with a password (a client that kept the
//!   scramble to itself) gets an auth switch to `mysql_native_password`
//!   instead (full caching_sha2 authentication needs TLS or RSA, which
//!   Shoal has not);
//! - anything else: an auth switch to `mysql_native_password`.
//!
//! An unknown user, a wrong password and a host the account does not
//! allow all end in the same 1045, after the same exchange.

use std::net::IpAddr;

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::{AsyncRead, AsyncWrite};

use super::auth::{
    check_native, check_sha2_fast, new_scramble, UserDirectory, CACHING_SHA2_PLUGIN, NATIVE_PLUGIN,
    SCRAMBLE_BYTES,
};
use super::errors;
use super::packet::{PacketError, PacketIo};
use super::resultset::err_packet;
use super::wire::{put_nul_terminated, put_u16, put_u32, Malformed, Reader};

/// What the server offers. No `CLIENT_SSL` (no TLS yet), no compression,
/// no session tracking, no query attributes.
pub(crate) fn server_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
}

/// `utf8mb4_0900_ai_ci`, the default collation a MySQL 8.0 server
/// announces; clients then choose their own in their response.
const GREETING_COLLATION: u8 = 255;

/// Bytes of the response before the user name; a response this short with
/// `CLIENT_SSL` is an `SSLRequest`.
const RESPONSE_FIXED_BYTES: usize = 32;

/// The `HandshakeV10` packet.
pub(crate) fn greeting(
    server_version: &str,
    connection_id: u32,
    scramble: &[u8; SCRAMBLE_BYTES],
) -> Vec<u8> {
    let capabilities = server_capabilities().bits();
    let (first, second) = scramble.split_at(8);
    let mut out = Vec::with_capacity(80 + server_version.len());
    out.push(10);
    // A NUL would end the version early; config validation keeps them out.
    let version: Vec<u8> = server_version.bytes().filter(|&b| b != 0).collect();
    put_nul_terminated(&mut out, &version);
    put_u32(&mut out, connection_id);
    out.extend_from_slice(first);
    out.push(0);
    put_u16(&mut out, capabilities as u16);
    out.push(GREETING_COLLATION);
    put_u16(&mut out, StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits());
    put_u16(&mut out, (capabilities >> 16) as u16);
    out.push((SCRAMBLE_BYTES + 1) as u8);
    out.extend_from_slice(&[0; 10]);
    // The rest of the scramble, NUL-terminated: 13 bytes in all.
    out.extend_from_slice(second);
    out.push(0);
    put_nul_terminated(&mut out, NATIVE_PLUGIN.as_bytes());
    out
}

/// A parsed `HandshakeResponse41`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandshakeResponse {
    /// What the client asked for (the connection uses these ∩ the server's).
    pub(crate) capabilities: CapabilityFlags,
    pub(crate) collation: u8,
    pub(crate) user: String,
    pub(crate) auth_response: Vec<u8>,
    pub(crate) database: Option<String>,
    pub(crate) auth_plugin: Option<String>,
    pub(crate) attributes: Vec<(String, String)>,
}

/// Why a handshake response was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ResponseError {
    Malformed(Malformed),
    /// An `SSLRequest`: the client wants TLS, which was not offered.
    TlsRequested,
    /// A pre-4.1 client (`HandshakeResponse320`).
    ProtocolTooOld,
}

impl From<Malformed> for ResponseError {
    fn from(m: Malformed) -> ResponseError {
        ResponseError::Malformed(m)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Parses a `HandshakeResponse41`.
pub(crate) fn parse_response(payload: &[u8]) -> Result<HandshakeResponse, ResponseError> {
    let mut reader = Reader::new(payload);
    let client = CapabilityFlags::from_bits_retain(reader.u32("the capability flags")?);
    if !client.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
        return Err(ResponseError::ProtocolTooOld);
    }
    if client.contains(CapabilityFlags::CLIENT_SSL) && payload.len() == RESPONSE_FIXED_BYTES {
        return Err(ResponseError::TlsRequested);
    }
    let _max_packet_bytes = reader.u32("the maximum packet size")?;
    let collation = reader.u8("the character set")?;
    reader.bytes(23, "the reserved bytes")?;
    let user = text(reader.nul_terminated("the user name")?);
    let auth_response =
        if client.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            reader.lenenc_bytes("the auth response")?
        } else if client.contains(CapabilityFlags::CLIENT_SECURE_CONNECTION) {
            let len = usize::from(reader.u8("the auth response length")?);
            reader.bytes(len, "the auth response")?
        } else {
            reader.nul_terminated("the auth response")?
        }
        .to_vec();
    let database = if client.contains(CapabilityFlags::CLIENT_CONNECT_WITH_DB) && !reader.is_empty()
    {
        Some(text(reader.nul_terminated_or_rest())).filter(|d| !d.is_empty())
    } else {
        None
    };
    let auth_plugin = if client.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH) && !reader.is_empty()
    {
        Some(text(reader.nul_terminated_or_rest()))
    } else {
        None
    };
    let mut attributes = Vec::new();
    if client.contains(CapabilityFlags::CLIENT_CONNECT_ATTRS) && !reader.is_empty() {
        let mut attrs = Reader::new(reader.lenenc_bytes("the connection attributes")?);
        while !attrs.is_empty() {
            let key = text(attrs.lenenc_bytes("an attribute name")?);
            let value = text(attrs.lenenc_bytes("an attribute value")?);
            attributes.push((key, value));
        }
    }
    Ok(HandshakeResponse {
        capabilities: client,
        collation,
        user,
        auth_response,
        database,
        auth_plugin,
        attributes,
    })
}

/// A client that logged in.
#[derive(Clone, Debug)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) database: Option<String>,
    /// The client's capabilities ∩ the server's.
    pub(crate) capabilities: CapabilityFlags,
    pub(crate) attributes: Vec<(String, String)>,
}

/// Why a login ended without a session.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// Refused with this error, already sent to the client.
    #[error("{0}")]
    Refused(crate::outcome::SqlError),
    #[error("no randomness for the scramble: {0}")]
    Random(std::io::Error),
}

/// Greets the client and authenticates it. On success nothing is sent
/// yet past the auth exchange: the caller opens the session (and the
/// database) and then sends the OK.
pub(crate) async fn login<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    users: &dyn UserDirectory,
    peer: IpAddr,
    server_version: &str,
    connection_id: u32,
) -> Result<Login, LoginError> {
    let scramble = new_scramble().map_err(LoginError::Random)?;
    io.push(&greeting(server_version, connection_id, &scramble));
    io.flush().await?;

    let payload = io.read_packet().await?;
    let response = match parse_response(&payload) {
        Ok(response) => response,
        Err(error_kind) => {
            let error = match &error_kind {
                ResponseError::Malformed(m) => {
                    errors::malformed(format!("handshake response: {m}"))
                }
                ResponseError::TlsRequested => errors::bad_handshake(
                    "this server does not offer TLS yet; connect without it \
                     (mariadb --skip-ssl, mysql --ssl-mode=DISABLED)",
                ),
                ResponseError::ProtocolTooOld => {
                    errors::bad_handshake("the client is older than protocol 4.1")
                }
            };
            // A pre-4.1 client would not parse a SQLSTATE.
            let protocol_41 = error_kind != ResponseError::ProtocolTooOld;
            io.send_final(&err_packet(&error, protocol_41)).await;
            return Err(LoginError::Refused(error));
        }
    };
    let capabilities = response.capabilities & server_capabilities();
    let account = match users.account(&response.user, peer).await {
        Ok(account) => account,
        Err(error) => {
            io.send_final(&err_packet(&error, true)).await;
            return Err(LoginError::Refused(error));
        }
    };
    let password = account.as_ref().and_then(|a| a.password.as_ref());

    let plugin = match response.auth_plugin.as_deref() {
        Some(plugin) => plugin,
        // Without CLIENT_PLUGIN_AUTH the proof is mysql_native_password's.
        None => NATIVE_PLUGIN,
    };
    let can_switch = capabilities.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH);
    let mut proof = response.auth_response.clone();
    let accepted = match plugin {
        NATIVE_PLUGIN => check_native(password, &scramble, &proof),
        // A client whose own default plugin is caching_sha2 (`--default-auth`)
        // keeps the greeting's scramble to itself, because the greeting
        // labels it mysql_native_password's, and answers empty: ask again.
        CACHING_SHA2_PLUGIN if proof.is_empty() && password.is_some() && can_switch => {
            proof = switch_to_native(io, &scramble).await?;
            check_native(password, &scramble, &proof)
        }
        CACHING_SHA2_PLUGIN if account.is_some() => {
            match check_sha2_fast(password, &scramble, &proof) {
                Some(true) => {
                    // AuthMoreData fast_auth_success, then the OK. A client with
                    // an empty password has finished already and waits for the OK.
                    if password.is_some() {
                        io.push(&[0x01, 0x03]);
                    }
                    true
                }
                Some(false) => false,
                None => {
                    proof = switch_to_native(io, &scramble).await?;
                    check_native(password, &scramble, &proof)
                }
            }
        }
        _ if can_switch => {
            proof = switch_to_native(io, &scramble).await?;
            check_native(password, &scramble, &proof)
        }
        _ => check_native(password, &scramble, &proof),
    };
    if !accepted || account.is_none() {
        let host = peer.to_canonical().to_string();
        let error = errors::access_denied(&response.user, &host, !proof.is_empty());
        io.send_final(&err_packet(&error, true)).await;
        return Err(LoginError::Refused(error));
    }
    Ok(Login {
        user: response.user,
        database: response.database,
        capabilities,
        attributes: response.attributes,
    })
}

/// Asks the client to answer the scramble with `mysql_native_password`
/// (AuthSwitchRequest) and returns its proof.
async fn switch_to_native<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    scramble: &[u8; SCRAMBLE_BYTES],
) -> Result<Vec<u8>, PacketError> {
    let mut switch = vec![0xFE];
    put_nul_terminated(&mut switch, NATIVE_PLUGIN.as_bytes());
    switch.extend_from_slice(scramble);
    switch.push(0);
    io.push(&switch);
    io.flush().await?;
    io.read_packet().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire::{put_lenenc_bytes, put_lenenc_int};

    fn response(capabilities: CapabilityFlags, tail: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, capabilities.bits());
        put_u32(&mut out, 1 << 24);
        out.push(45);
        out.extend_from_slice(&[0; 23]);
        tail(&mut out);
        out
    }

    fn modern() -> CapabilityFlags {
        server_capabilities()
    }

    #[test]
    fn greeting_layout() {
        let scramble = *b"ABCDEFGHIJKLMNOPQRST";
        let packet = greeting("8.0.35-Shoal-0.1", 7, &scramble);
        let mut reader = Reader::new(&packet);
        assert_eq!(reader.u8("v"), Ok(10));
        assert_eq!(reader.nul_terminated("s"), Ok(&b"8.0.35-Shoal-0.1"[..]));
        assert_eq!(reader.u32("id"), Ok(7));
        assert_eq!(reader.bytes(8, "s1"), Ok(&b"ABCDEFGH"[..]));
        assert_eq!(reader.u8("f"), Ok(0));
        let low = reader.u16("c").expect("caps");
        assert_eq!(reader.u8("cs"), Ok(255));
        assert_eq!(reader.u16("st"), Ok(2));
        let high = reader.u16("c").expect("caps");
        assert_eq!(
            u32::from(low) | u32::from(high) << 16,
            server_capabilities().bits()
        );
        assert!(!server_capabilities().contains(CapabilityFlags::CLIENT_SSL));
        assert_eq!(reader.u8("len"), Ok(21));
        assert_eq!(reader.bytes(10, "r"), Ok(&[0u8; 10][..]));
        assert_eq!(reader.nul_terminated("s2"), Ok(&b"IJKLMNOPQRST"[..]));
        assert_eq!(reader.nul_terminated("p"), Ok(NATIVE_PLUGIN.as_bytes()));
        assert!(reader.is_empty());
    }

    #[test]
    fn full_response() {
        let payload = response(modern(), |out| {
            put_nul_terminated(out, b"root");
            put_lenenc_bytes(out, &[9; 20]);
            put_nul_terminated(out, b"shop");
            put_nul_terminated(out, b"caching_sha2_password");
            let mut attrs = Vec::new();
            put_lenenc_bytes(&mut attrs, b"_client_name");
            put_lenenc_bytes(&mut attrs, b"libmariadb");
            put_lenenc_bytes(out, &attrs);
        });
        let parsed = parse_response(&payload).expect("parses");
        assert_eq!(parsed.user, "root");
        assert_eq!(parsed.auth_response, vec![9; 20]);
        assert_eq!(parsed.database.as_deref(), Some("shop"));
        assert_eq!(parsed.auth_plugin.as_deref(), Some("caching_sha2_password"));
        assert_eq!(
            parsed.attributes,
            vec![("_client_name".to_string(), "libmariadb".to_string())]
        );
    }

    #[test]
    fn minimal_and_odd_responses() {
        // Secure connection without lenenc data, no database, no plugin.
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41 | CapabilityFlags::CLIENT_SECURE_CONNECTION;
        let payload = response(caps, |out| {
            put_nul_terminated(out, b"u");
            out.push(0);
        });
        let parsed = parse_response(&payload).expect("parses");
        assert_eq!(
            (parsed.user.as_str(), parsed.database, parsed.auth_plugin),
            ("u", None, None)
        );
        // A plugin name without its NUL at the end of the packet.
        let payload = response(modern() - CapabilityFlags::CLIENT_CONNECT_WITH_DB, |out| {
            put_nul_terminated(out, b"u");
            put_lenenc_int(out, 0);
            out.extend_from_slice(b"mysql_native_password");
        });
        let parsed = parse_response(&payload).expect("parses");
        assert_eq!(parsed.auth_plugin.as_deref(), Some("mysql_native_password"));
    }

    #[test]
    fn refusals() {
        let ssl = response(modern() | CapabilityFlags::CLIENT_SSL, |_| {});
        assert_eq!(parse_response(&ssl), Err(ResponseError::TlsRequested));
        let old = response(CapabilityFlags::CLIENT_LONG_PASSWORD, |_| {});
        assert_eq!(parse_response(&old), Err(ResponseError::ProtocolTooOld));
        let no_user_end = response(modern(), |out| out.extend_from_slice(b"root"));
        assert!(matches!(
            parse_response(&no_user_end),
            Err(ResponseError::Malformed(_))
        ));
        let long_auth = response(modern(), |out| {
            put_nul_terminated(out, b"root");
            out.push(200);
        });
        assert!(matches!(
            parse_response(&long_auth),
            Err(ResponseError::Malformed(_))
        ));
    }

    #[test]
    fn every_prefix_and_random_bytes_parse_or_fail_cleanly() {
        let payload = response(modern(), |out| {
            put_nul_terminated(out, b"root");
            put_lenenc_bytes(out, &[1; 20]);
            put_nul_terminated(out, b"db");
            put_nul_terminated(out, b"mysql_native_password");
            put_lenenc_bytes(out, &[3, b'k', b'e', b'y', 1, b'v']);
        });
        for len in 0..=payload.len() {
            let _ = parse_response(&payload[..len]);
        }
        let mut state = 0xDEAD_BEEF_CAFE_F00Du64;
        for _ in 0..5000 {
            let mut bytes = payload.clone();
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state as usize) % bytes.len();
                bytes[at] = (state >> 32) as u8;
            }
            let _ = parse_response(&bytes);
        }
    }
}
