//! The accounts an SQL node logs clients in with: mgmd's, asked at each
//! login ([`ClusterUsers`], the protocol's [`UserDirectory`]).
//!
//! Asking at each login (rather than mgmd pushing changes) is what makes
//! a `DROP USER` or a new password, made through any SQL node, hold for
//! the next login on every SQL node; logins are rare next to statements,
//! and one mgmd round trip is small beside a handshake.
//!
//! Invariants:
//! - mgmd's answer is the truth. The last answer per user name is kept
//!   (at most [`KNOWN_USERS_MAX`] names) and used only when mgmd does not
//!   answer within [`LOOKUP_TIMEOUT`] — mgmd restarting, or this node's
//!   one mgmd session busy with a long schema change — and only while
//!   mgmd confirmed it less than [`FALLBACK_MAX_AGE`] ago, so clients
//!   this node has seen keep logging in through a short stall. Past that
//!   the login fails with an error saying mgmd is unreachable.
//! - A name mgmd knows no account of is never kept, so strangers trying
//!   names cannot push real accounts out.
//! - The most specific account matching the client is chosen first; if
//!   its hashes do not decode it lets nobody in (and says so in the log),
//!   rather than a less specific account being tried. Nothing mgmd sends
//!   can make the node panic.

use super::privileges::Privileges;
use crate::outcome::SqlError;
use crate::protocol::{Account, AccountFuture, PasswordHashes, UserDirectory, Users};
use shoal_client::{Cluster, StoredPassword, UserAccount};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// User names whose accounts are kept for when mgmd does not answer.
pub const KNOWN_USERS_MAX: usize = 1024;
/// How long a login waits for mgmd before it uses the accounts last seen.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);
/// How recently mgmd must have confirmed a kept account for a login to
/// use it when mgmd does not answer. A short mgmd stall (behind a long
/// schema change, or an mgmd restart) should not lock everyone out; but a
/// dropped account or an old password must not keep working for long
/// after mgmd changed it, so the copy ages out.
pub const FALLBACK_MAX_AGE: Duration = Duration::from_secs(60);

/// The cluster's accounts, as a login and a session's privileges need
/// them.
pub struct ClusterUsers {
    cluster: Cluster,
    known: Mutex<Known>,
}

/// The last accounts mgmd gave, by user name, with the order they came
/// in (the oldest goes first when full) and when mgmd gave them.
#[derive(Default)]
struct Known {
    by_user: HashMap<String, (u64, Instant, Vec<UserAccount>)>,
    next: u64,
}

impl Known {
    /// mgmd answered `accounts` for `user` at `now`.
    fn remember(&mut self, user: &str, accounts: &[UserAccount], now: Instant) {
        if accounts.is_empty() {
            self.by_user.remove(user);
            return;
        }
        if !self.by_user.contains_key(user) && self.by_user.len() >= KNOWN_USERS_MAX {
            let oldest = self
                .by_user
                .iter()
                .min_by_key(|(_, (seq, _, _))| *seq)
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                self.by_user.remove(&name);
            }
        }
        self.next += 1;
        self.by_user
            .insert(user.to_string(), (self.next, now, accounts.to_vec()));
    }

    /// The accounts of `user` a login at `now` may use without mgmd: the
    /// kept ones if mgmd confirmed them within [`FALLBACK_MAX_AGE`].
    fn fallback(&self, user: &str, now: Instant) -> Option<Vec<UserAccount>> {
        let (_, confirmed, accounts) = self.by_user.get(user)?;
        (now.saturating_duration_since(*confirmed) <= FALLBACK_MAX_AGE).then(|| accounts.clone())
    }
}

/// 1105 for a login that cannot be checked: mgmd does not answer and
/// this node has no recent copy of the account.
fn mgmd_unreachable(user: &str, why: &str) -> SqlError {
    SqlError::new(
        1105,
        "HY000",
        format!(
            "Cannot check the account of '{user}': the management server (mgmd) is unreachable \
             ({why}) and this SQL node has no copy of the account confirmed in the last {} s; \
             try again once mgmd answers",
            FALLBACK_MAX_AGE.as_secs()
        ),
    )
}

/// The hashes of a stored password (`None` if they do not decode).
pub fn hashes_of(stored: &StoredPassword) -> Option<PasswordHashes> {
    PasswordHashes::from_hex(&stored.native, stored.sha256.as_deref())
}

/// What mgmd keeps of `hashes`.
pub fn stored(hashes: &PasswordHashes) -> StoredPassword {
    StoredPassword {
        native: hashes.native_hex().trim_start_matches('*').to_string(),
        sha256: hashes.sha256_hex(),
    }
}

/// The login account of a stored one; `None` if its hashes do not decode.
fn login_account(a: &UserAccount) -> Option<Account> {
    let password = match &a.password {
        None => None,
        Some(p) => match hashes_of(p) {
            Some(h) => Some(h),
            None => {
                tracing::warn!(
                    account = %a.name(),
                    "the account's password hashes from mgmd do not decode; nobody logs in with it"
                );
                return None;
            }
        },
    };
    Some(Account {
        user: a.user.clone(),
        host: a.host.clone(),
        password,
    })
}

/// Among `accounts` (all of user `user`), the one a client at `peer`
/// logs in with, as MySQL picks it (the most specific host); `None` if
/// none matches or the chosen one's hashes do not decode (a less
/// specific account is not tried then: it may grant what the chosen one
/// was meant to restrict).
pub fn pick(accounts: &[UserAccount], user: &str, peer: IpAddr) -> Option<UserAccount> {
    // Hosts only: the choice does not depend on the hashes.
    let mut hosts = Users::empty();
    for a in accounts {
        hosts.insert(Account {
            user: a.user.clone(),
            host: a.host.clone(),
            password: None,
        });
    }
    let chosen = hosts.find(user, peer)?;
    let account = accounts
        .iter()
        .find(|a| a.user == chosen.user && a.host == chosen.host)?;
    login_account(account)?;
    Some(account.clone())
}

/// The address a session without a handshake names its client by
/// (`localhost` is the loopback; anything else that is not an address
/// matches only `%`-style hosts).
pub fn peer_address(host: &str) -> IpAddr {
    if host.eq_ignore_ascii_case("localhost") {
        return IpAddr::V4(Ipv4Addr::LOCALHOST);
    }
    host.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

impl ClusterUsers {
    pub fn new(cluster: Cluster) -> ClusterUsers {
        ClusterUsers {
            cluster,
            known: Mutex::new(Known::default()),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        // Nothing in `Known` spans a panic point; keep serving.
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The accounts of `user`: mgmd's, or, if mgmd does not answer in
    /// time, the last it gave if that is recent enough (an error saying
    /// mgmd is unreachable otherwise).
    async fn accounts_of(&self, user: &str) -> Result<Vec<UserAccount>, SqlError> {
        // Giving up on the request mostly means giving up the wait for
        // the cluster's mgmd session; one cut off mid-request leaves a
        // late answer the session skips, or a half frame after which mgmd
        // closes the session and the next request registers again.
        match tokio::time::timeout(LOOKUP_TIMEOUT, self.cluster.users(Some(user))).await {
            Ok(Ok(accounts)) => {
                // mgmd filters by name; a stray one is not this user's.
                let accounts: Vec<UserAccount> =
                    accounts.into_iter().filter(|a| a.user == user).collect();
                self.known().remember(user, &accounts, Instant::now());
                Ok(accounts)
            }
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {} s", LOOKUP_TIMEOUT.as_secs()),
                };
                let known = self.known().fallback(user, Instant::now());
                tracing::warn!(
                    user,
                    recent_copy = known.is_some(),
                    "cannot ask mgmd for the accounts ({why}); using the ones this SQL node saw \
                     last if mgmd confirmed them in the last {} s",
                    FALLBACK_MAX_AGE.as_secs()
                );
                known.ok_or_else(|| mgmd_unreachable(user, &why))
            }
        }
    }

    /// The account `user` logs in with from `peer`, if any.
    pub async fn find(&self, user: &str, peer: IpAddr) -> Result<Option<UserAccount>, SqlError> {
        Ok(pick(&self.accounts_of(user).await?, user, peer))
    }

    /// The privileges of `user` connected from `peer` (`host` names the
    /// client in a message when no account lets it in any more, or the
    /// account cannot be checked).
    pub async fn privileges(&self, user: &str, peer: IpAddr, host: &str) -> Privileges {
        match self.find(user, peer).await {
            Ok(Some(a)) => Privileges::of(&a),
            Ok(None) | Err(_) => Privileges::none(user, host),
        }
    }
}

impl UserDirectory for ClusterUsers {
    fn account<'a>(&'a self, user: &'a str, peer: IpAddr) -> AccountFuture<'a> {
        Box::pin(async move {
            Ok(self
                .find(user, peer)
                .await?
                .as_ref()
                .and_then(login_account))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_client::Grants;

    fn account(user: &str, host: &str, password: Option<&str>) -> UserAccount {
        UserAccount {
            user: user.into(),
            host: host.into(),
            password: password.map(|p| stored(&PasswordHashes::of(p))),
            grants: Grants::default(),
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn stored_hashes_round_trip() {
        let h = PasswordHashes::of("pw");
        let s = stored(&h);
        assert_eq!(s.native.len(), 40);
        assert_eq!(hashes_of(&s), Some(h));
    }

    #[test]
    fn the_most_specific_account_is_picked_and_refused_if_broken() {
        let mut broken = account("app", "127.0.0.1", Some("x"));
        broken.password = Some(StoredPassword {
            native: "zz".into(),
            sha256: None,
        });
        let accounts = vec![
            account("app", "%", Some("any")),
            account("app", "localhost", None),
            broken,
        ];
        let host = |peer: &str| pick(&accounts, "app", ip(peer)).map(|a| a.host);
        // The broken account is the most specific from 127.0.0.1: nobody
        // logs in from there (app@localhost and app@% are not tried).
        assert_eq!(host("127.0.0.1"), None);
        assert_eq!(host("127.0.0.2").as_deref(), Some("localhost"));
        assert_eq!(host("10.1.2.3").as_deref(), Some("%"));
        assert_eq!(pick(&accounts, "other", ip("10.1.2.3")), None);
        assert_eq!(login_account(&accounts[2]), None);
    }

    #[test]
    fn known_accounts_are_bounded_and_keep_no_strangers() {
        let mut known = Known::default();
        let now = Instant::now();
        known.remember("ghost", &[], now);
        assert!(known.by_user.is_empty());
        for i in 0..KNOWN_USERS_MAX + 5 {
            let name = format!("u{i}");
            known.remember(&name, &[account(&name, "%", None)], now);
        }
        assert_eq!(known.by_user.len(), KNOWN_USERS_MAX);
        // The oldest went first.
        assert!(!known.by_user.contains_key("u0"));
        assert!(known
            .by_user
            .contains_key(&format!("u{}", KNOWN_USERS_MAX + 4)));
        // An account mgmd no longer has is forgotten.
        let last = format!("u{}", KNOWN_USERS_MAX + 4);
        known.remember(&last, &[], now);
        assert!(!known.by_user.contains_key(&last));
    }

    #[test]
    fn kept_accounts_serve_a_login_only_while_recent() {
        let mut known = Known::default();
        let t0 = Instant::now();
        known.remember("app", &[account("app", "%", None)], t0);
        let at = |secs: u64| known.fallback("app", t0 + Duration::from_secs(secs));
        assert_eq!(at(0).map(|a| a.len()), Some(1));
        assert!(at(FALLBACK_MAX_AGE.as_secs()).is_some());
        assert!(at(FALLBACK_MAX_AGE.as_secs() + 1).is_none(), "too old");
        assert!(known.fallback("stranger", t0).is_none());
        // A fresh answer from mgmd restarts the age.
        let t1 = t0 + Duration::from_secs(100);
        known.remember("app", &[account("app", "%", None)], t1);
        assert!(known
            .fallback("app", t1 + Duration::from_secs(30))
            .is_some());
        let e = mgmd_unreachable("app", "no answer within 3 s");
        assert_eq!(e.code, 1105);
        assert!(e.message.contains("mgmd) is unreachable"), "{}", e.message);
    }

    #[test]
    fn sessions_without_a_handshake_name_their_peer() {
        assert_eq!(peer_address("localhost"), ip("127.0.0.1"));
        assert_eq!(peer_address("10.0.0.2"), ip("10.0.0.2"));
        assert_eq!(peer_address("::1"), ip("::1"));
        assert_eq!(peer_address("some.host"), ip("0.0.0.0"));
    }
}
