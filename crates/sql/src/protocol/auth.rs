//! Accounts and password checks: who may log in from where, and the
//! `mysql_native_password` and `caching_sha2_password` (fast path)
//! challenge-response proofs.
//!
//! Invariants:
//! - no password is kept, only hashes a client's proof is checked against:
//!   SHA1(SHA1(password)) (`mysql_native_password`, mysql.user's `*HEX`
//!   form) and SHA256(SHA256(password)) (the value MySQL keeps in its
//!   caching_sha2 cache, which is what makes the fast path possible
//!   without TLS);
//! - each scramble is 20 fresh random bytes per connection, so a proof
//!   seen on the wire cannot be replayed.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// The length of the handshake's scramble (both plugins use 20 bytes).
pub(crate) const SCRAMBLE_BYTES: usize = 20;

pub(crate) const NATIVE_PLUGIN: &str = "mysql_native_password";
pub(crate) const CACHING_SHA2_PLUGIN: &str = "caching_sha2_password";

/// The hashes an account's password is checked against.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHashes {
    /// SHA1(SHA1(password)): checks `mysql_native_password` proofs.
    pub native: [u8; 20],
    /// SHA256(SHA256(password)): checks `caching_sha2_password` fast-path
    /// proofs. `None` (an account known only by its native hash) sends
    /// such clients to `mysql_native_password` with an auth switch.
    pub sha256: Option<[u8; 32]>,
}

impl PasswordHashes {
    /// Both hashes of `password`.
    pub fn of(password: &str) -> PasswordHashes {
        let native: [u8; 20] = Sha1::digest(Sha1::digest(password.as_bytes())).into();
        let sha256: [u8; 32] = Sha256::digest(Sha256::digest(password.as_bytes())).into();
        PasswordHashes {
            native,
            sha256: Some(sha256),
        }
    }

    /// From MySQL's stored form of a `mysql_native_password` hash: `*`
    /// and 40 hex digits (`SELECT authentication_string FROM mysql.user`),
    /// as `CREATE USER … IDENTIFIED WITH mysql_native_password AS '*…'`
    /// takes it. `None` if `text` is not in that form.
    pub fn from_native_hex(text: &str) -> Option<PasswordHashes> {
        PasswordHashes::from_hex(text.strip_prefix('*')?, None)
    }

    /// The `*HEX` form of the native hash.
    pub fn native_hex(&self) -> String {
        format!("*{}", hex(&self.native))
    }

    /// The SHA-256 hash in upper-case hex, if the account has one.
    pub fn sha256_hex(&self) -> Option<String> {
        self.sha256.map(|h| hex(&h))
    }

    /// From the hashes in hex as mgmd keeps them (40 digits for the
    /// native hash, 64 for the SHA-256 one). `None` if either is not in
    /// that form.
    pub fn from_hex(native: &str, sha256: Option<&str>) -> Option<PasswordHashes> {
        Some(PasswordHashes {
            native: unhex(native)?,
            sha256: match sha256 {
                Some(text) => Some(unhex(text)?),
                None => None,
            },
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// `N` bytes from exactly `2N` hex digits.
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl std::fmt::Debug for PasswordHashes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Hashes stay out of logs: they are enough to log in with
        // mysql_native_password's proof if combined with a sniffed scramble.
        f.write_str("PasswordHashes(..)")
    }
}

/// One account: a user name, the hosts it may connect from, its password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub user: String,
    /// `%` (anywhere), `localhost` (a loopback address), an IP address, or
    /// a pattern with `%` and `_` as in MySQL (`192.168.1.%`).
    pub host: String,
    /// `None`: no password (the client sends an empty proof).
    pub password: Option<PasswordHashes>,
}

impl Account {
    /// Whether a client at `peer` may use this account.
    pub fn allows(&self, peer: IpAddr) -> bool {
        host_matches(&self.host, peer)
    }
}

/// The future [`UserDirectory::account`] answers with.
/// An error refuses the login with it (the accounts could not be read).
pub type AccountFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Account>, crate::outcome::SqlError>> + Send + 'a>>;

/// Where the server looks accounts up: [`Users`] in memory here, or the
/// cluster's accounts in mgmd (`exec::users::ClusterUsers`, what `shoal
/// sql` uses). Asked once per login.
pub trait UserDirectory: Send + Sync + 'static {
    /// The account `user` logs in with from `peer`: among the accounts of
    /// that name whose host allows `peer`, the most specific host (an
    /// address before a pattern, `%` last), as MySQL picks. `None` if no
    /// account lets `user` in from there.
    fn account<'a>(&'a self, user: &'a str, peer: IpAddr) -> AccountFuture<'a>;
}

/// Accounts held in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Users {
    accounts: Vec<Account>,
}

impl Default for Users {
    /// `root` with no password, from 127.0.0.1 only: what MySQL's
    /// `--initialize-insecure` creates, enough to log in and create users.
    fn default() -> Users {
        Users::empty().with_account(Account {
            user: "root".to_string(),
            host: "127.0.0.1".to_string(),
            password: None,
        })
    }
}

impl Users {
    /// No accounts: nobody can log in.
    pub fn empty() -> Users {
        Users {
            accounts: Vec::new(),
        }
    }

    /// Adds `account`, replacing one with the same user and host.
    pub fn with_account(mut self, account: Account) -> Users {
        self.insert(account);
        self
    }

    /// Adds `user`@`host` with `password` (empty: no password).
    pub fn with_password(self, user: &str, host: &str, password: &str) -> Users {
        self.with_account(Account {
            user: user.to_string(),
            host: host.to_string(),
            password: (!password.is_empty()).then(|| PasswordHashes::of(password)),
        })
    }

    /// Adds `account`, replacing one with the same user and host.
    pub fn insert(&mut self, account: Account) {
        self.remove(&account.user, &account.host);
        self.accounts.push(account);
    }

    /// Removes `user`@`host`; whether it existed.
    pub fn remove(&mut self, user: &str, host: &str) -> bool {
        let before = self.accounts.len();
        self.accounts
            .retain(|a| !(a.user == user && a.host.eq_ignore_ascii_case(host)));
        self.accounts.len() != before
    }

    pub fn accounts(&self) -> &[Account] {
        &self.accounts
    }

    /// The account `user` logs in with from `peer` (see
    /// [`UserDirectory::account`]).
    pub fn find(&self, user: &str, peer: IpAddr) -> Option<&Account> {
        most_specific(&self.accounts, user, peer)
    }
}

impl UserDirectory for Users {
    fn account<'a>(&'a self, user: &'a str, peer: IpAddr) -> AccountFuture<'a> {
        let found = self.find(user, peer).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }
}

/// Among `accounts`, the one `user` logs in with from `peer` (see
/// [`UserDirectory::account`]).
pub fn most_specific<'a>(
    accounts: impl IntoIterator<Item = &'a Account>,
    user: &str,
    peer: IpAddr,
) -> Option<&'a Account> {
    accounts
        .into_iter()
        .filter(|a| a.user == user && a.allows(peer))
        .max_by_key(|a| host_specificity(&a.host))
}

/// Higher is more specific: an address beats `localhost`, which beats
/// any pattern, and a pattern with a longer literal prefix beats a
/// shorter one (so `%` is last).
fn host_specificity(host: &str) -> usize {
    match host.find(['%', '_']) {
        Some(prefix) => prefix,
        None if host.eq_ignore_ascii_case("localhost") => usize::MAX - 1,
        None => usize::MAX,
    }
}

/// Whether `pattern` (an account's host) admits `peer`.
fn host_matches(pattern: &str, peer: IpAddr) -> bool {
    let peer = peer.to_canonical();
    if pattern.eq_ignore_ascii_case("localhost") {
        return peer.is_loopback();
    }
    like(pattern.as_bytes(), peer.to_string().as_bytes())
}

/// SQL `LIKE` with `%` and `_`, no escapes (host names have none).
fn like(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative with one backtrack point: linear enough for host names,
    // and no recursion a crafted pattern could deepen.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while let Some(&tc) = text.get(t) {
        match pattern.get(p) {
            Some(b'%') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'_' || c.eq_ignore_ascii_case(&tc) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|&c| c == b'%')
}

/// A fresh scramble: random bytes mapped into printable ASCII, as MySQL
/// does, because some clients copy it as a NUL-terminated string.
pub(crate) fn new_scramble() -> std::io::Result<[u8; SCRAMBLE_BYTES]> {
    let mut scramble = [0u8; SCRAMBLE_BYTES];
    getrandom::fill(&mut scramble).map_err(std::io::Error::other)?;
    for byte in &mut scramble {
        // 94 printable characters from '!' (0x21) to '~' (0x7E).
        *byte = 0x21 + *byte % 94;
    }
    Ok(scramble)
}

/// Checks a `mysql_native_password` proof: the client sends
/// SHA1(pw) XOR SHA1(scramble ‖ SHA1(SHA1(pw))); XOR-ing that with the
/// second term (computable from the stored hash) gives SHA1(pw), whose
/// SHA1 must be the stored hash.
pub(crate) fn check_native(
    password: Option<&PasswordHashes>,
    scramble: &[u8; SCRAMBLE_BYTES],
    proof: &[u8],
) -> bool {
    let Some(hashes) = password else {
        return proof.is_empty();
    };
    let Ok(proof) = <[u8; 20]>::try_from(proof) else {
        return false;
    };
    let mask: [u8; 20] = Sha1::new()
        .chain_update(scramble)
        .chain_update(hashes.native)
        .finalize()
        .into();
    let candidate = xor(proof, mask);
    let check: [u8; 20] = Sha1::digest(candidate).into();
    equal_in_constant_time(&check, &hashes.native)
}

/// Checks a `caching_sha2_password` fast-path proof: the client sends
/// SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) ‖ scramble). `None` when the
/// account has no SHA-256 hash, so the proof cannot be checked (the
/// caller then switches the client to `mysql_native_password`).
pub(crate) fn check_sha2_fast(
    password: Option<&PasswordHashes>,
    scramble: &[u8; SCRAMBLE_BYTES],
    proof: &[u8],
) -> Option<bool> {
    let Some(hashes) = password else {
        return Some(proof.is_empty());
    };
    let stored = hashes.sha256?;
    let Ok(proof) = <[u8; 32]>::try_from(proof) else {
        return Some(false);
    };
    let mask: [u8; 32] = Sha256::new()
        .chain_update(stored)
        .chain_update(scramble)
        .finalize()
        .into();
    let candidate = xor(proof, mask);
    let check: [u8; 32] = Sha256::digest(candidate).into();
    Some(equal_in_constant_time(&check, &stored))
}

fn xor<const N: usize>(a: [u8; N], b: [u8; N]) -> [u8; N] {
    let mut out = a;
    for (o, m) in out.iter_mut().zip(b) {
        *o ^= m;
    }
    out
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell an attacker how much of a guess was right.
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::auth::plugins::caching_sha2_password::scramble_sha256;
    use mysql_common::auth::plugins::mysql_native_password::scramble_native;

    const SCRAMBLE: [u8; 20] = *b"abcdefghij0123456789";

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn native_proofs_from_mysql_common_check_out() {
        let hashes = PasswordHashes::of("secret");
        let proof = scramble_native(&SCRAMBLE, b"secret").expect("proof");
        assert!(check_native(Some(&hashes), &SCRAMBLE, &proof));
        let wrong = scramble_native(&SCRAMBLE, b"Secret").expect("proof");
        assert!(!check_native(Some(&hashes), &SCRAMBLE, &wrong));
        assert!(!check_native(Some(&hashes), &SCRAMBLE, b""));
        assert!(!check_native(Some(&hashes), &SCRAMBLE, &proof[..19]));
        // No password: only an empty proof.
        assert!(check_native(None, &SCRAMBLE, b""));
        assert!(!check_native(None, &SCRAMBLE, &proof));
    }

    #[test]
    fn sha2_fast_proofs_from_mysql_common_check_out() {
        let hashes = PasswordHashes::of("secret");
        let proof = scramble_sha256(&SCRAMBLE, b"secret").expect("proof");
        assert_eq!(
            check_sha2_fast(Some(&hashes), &SCRAMBLE, &proof),
            Some(true)
        );
        let wrong = scramble_sha256(&SCRAMBLE, b"secreT").expect("proof");
        assert_eq!(
            check_sha2_fast(Some(&hashes), &SCRAMBLE, &wrong),
            Some(false)
        );
        let native_only = PasswordHashes::from_native_hex(&hashes.native_hex()).expect("hex");
        assert_eq!(check_sha2_fast(Some(&native_only), &SCRAMBLE, &proof), None);
    }

    #[test]
    fn hashes_round_trip_through_hex() {
        let hashes = PasswordHashes::of("secret");
        let sha = hashes.sha256_hex().expect("sha");
        assert_eq!(sha.len(), 64);
        let back = PasswordHashes::from_hex(&hashes.native_hex()[1..], Some(&sha));
        assert_eq!(back, Some(hashes.clone()));
        assert_eq!(
            PasswordHashes::from_hex(&hashes.native_hex()[1..].to_lowercase(), None)
                .map(|h| h.native),
            Some(hashes.native)
        );
        assert_eq!(PasswordHashes::from_hex(&sha, None), None);
        assert_eq!(PasswordHashes::from_hex("", None), None);
        assert_eq!(
            PasswordHashes::from_hex(&hashes.native_hex()[1..], Some("00")),
            None
        );
    }

    #[test]
    fn native_hex_matches_mysql() {
        // SELECT PASSWORD('secret') in MySQL 5.7.
        let hashes = PasswordHashes::of("secret");
        assert_eq!(
            hashes.native_hex(),
            "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
        );
        assert_eq!(
            PasswordHashes::from_native_hex(&hashes.native_hex()).map(|h| h.native),
            Some(hashes.native)
        );
        assert_eq!(PasswordHashes::from_native_hex("14E6"), None);
        assert_eq!(PasswordHashes::from_native_hex("*ZZ"), None);
        assert_eq!(
            PasswordHashes::from_native_hex(&format!("*{}", "é".repeat(20))),
            None
        );
    }

    #[test]
    fn default_users_have_root_from_127_0_0_1_only() {
        let users = Users::default();
        assert!(users.find("root", ip("127.0.0.1")).is_some());
        assert!(users.find("root", ip("::ffff:127.0.0.1")).is_some());
        assert!(users.find("root", ip("10.0.0.1")).is_none());
        assert!(users.find("root", ip("::1")).is_none());
        assert!(users.find("admin", ip("127.0.0.1")).is_none());
    }

    #[test]
    fn the_most_specific_host_wins() {
        let users = Users::empty()
            .with_password("app", "%", "any")
            .with_password("app", "10.0.%", "lan")
            .with_password("app", "10.0.0.7", "box")
            .with_password("app", "localhost", "local");
        let pick = |peer: &str| users.find("app", ip(peer)).map(|a| a.host.clone());
        assert_eq!(pick("10.0.0.7").as_deref(), Some("10.0.0.7"));
        assert_eq!(pick("10.0.3.1").as_deref(), Some("10.0.%"));
        assert_eq!(pick("192.168.0.1").as_deref(), Some("%"));
        assert_eq!(pick("127.0.0.1").as_deref(), Some("localhost"));
        assert_eq!(pick("::1").as_deref(), Some("localhost"));
        // An address beats localhost, whatever their order.
        for users in [
            Users::empty()
                .with_password("root", "127.0.0.1", "a")
                .with_password("root", "localhost", "b"),
            Users::empty()
                .with_password("root", "localhost", "b")
                .with_password("root", "127.0.0.1", "a"),
        ] {
            let host = users.find("root", ip("127.0.0.1")).map(|a| a.host.clone());
            assert_eq!(host.as_deref(), Some("127.0.0.1"));
        }
    }

    #[test]
    fn like_patterns() {
        assert!(like(b"%", b""));
        assert!(like(b"10.0.0._", b"10.0.0.7"));
        assert!(!like(b"10.0.0._", b"10.0.0.77"));
        assert!(like(b"%.7", b"10.0.0.7"));
        assert!(like(b"1%0%7", b"10.0.0.7"));
        assert!(!like(b"1%0%8", b"10.0.0.7"));
        assert!(!like(b"", b"x"));
    }

    #[test]
    fn scrambles_are_printable_and_fresh() {
        let a = new_scramble().expect("random");
        let b = new_scramble().expect("random");
        assert!(a.iter().all(|&c| (0x21..=0x7E).contains(&c)));
        assert_ne!(a, b);
    }

    #[test]
    fn replacing_and_removing_accounts() {
        let mut users = Users::empty().with_password("u", "%", "one");
        users.insert(Account {
            user: "u".into(),
            host: "%".into(),
            password: None,
        });
        assert_eq!(users.accounts().len(), 1);
        assert_eq!(users.accounts()[0].password, None);
        assert!(users.remove("u", "%"));
        assert!(!users.remove("u", "%"));
    }
}
