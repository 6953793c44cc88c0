//! SQL accounts: who may log in to the SQL nodes, with which password
//! hashes, and which databases they may use. mgmd keeps them (in
//! `users.json`, see `store`) so that every SQL node of the cluster sees
//! the same accounts; SQL nodes ask at each login.
//!
//! Invariants:
//! - Accounts are keyed by (user, host); hosts are kept in lower case.
//! - A change is checked whole against a copy, written to disk, and only
//!   then becomes what requests see; a change that fails changes nothing.
//!   Changes run one at a time (the accounts' lock is held across the
//!   write), so a later write never carries an older state.
//! - Only hashes are kept (SHA1(SHA1(pw)) and SHA256(SHA256(pw)), upper-
//!   case hex), never a password: SQL nodes hash before they ask.
//! - Without a `users.json` (a fresh cluster) the accounts are `root` at
//!   `127.0.0.1` and at `localhost`, without a password, with ALL on
//!   `*.*` (MySQL's `--initialize-insecure`): reachable from this machine
//!   only. Once written, the file is the whole truth (dropping both roots
//!   does not bring them back; deleting the file with mgmd stopped does).
//! - Bounded: accounts, accounts per request, database grants in all, and
//!   the length of every name, so the whole list fits one frame.

use super::*;
use crate::proto::{AccountName, GrantLevel, PasswordChange, UserAccount, UsersRequest};
use shoal_types::schema::check_database_name;

/// The accounts, by name.
pub(crate) type Accounts = BTreeMap<AccountName, UserAccount>;

/// Most accounts the cluster holds.
pub const ACCOUNTS_MAX: usize = 4096;
/// Most accounts one request names.
pub const ACCOUNTS_PER_REQUEST_MAX: usize = 256;
/// Most `db.*` grants of all accounts together (so the whole list stays
/// a few MiB, well within a frame).
pub const DATABASE_GRANTS_MAX: usize = 65_536;
/// Longest user name, in characters (MySQL 8's limit).
pub const USER_NAME_CHARS_MAX: usize = 32;
/// Longest host pattern, in bytes (MySQL 8's limit).
pub const HOST_BYTES_MAX: usize = 255;
/// The database no grant may name: SQL nodes serve it to everyone.
const UNGRANTABLE_DATABASE: &str = "information_schema";

/// The accounts of a fresh cluster: `root` from this machine, without a
/// password, with every privilege.
pub(crate) fn default_accounts() -> Accounts {
    ["127.0.0.1", "localhost"]
        .into_iter()
        .map(|host| {
            let account = UserAccount {
                user: "root".to_string(),
                host: host.to_string(),
                password: None,
                grants: crate::proto::Grants {
                    all_databases: true,
                    databases: BTreeSet::new(),
                },
            };
            (account.name(), account)
        })
        .collect()
}

fn bad(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::BadRequest, detail)
}

/// Checks an account name and returns it as mgmd keys it (host in lower
/// case).
pub(crate) fn checked_name(name: &AccountName) -> Result<AccountName, ShoalError> {
    check_user(&name.user)?;
    let host = &name.host;
    let host_ok = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"%_.:-".contains(&b));
    if host.is_empty() || host.len() > HOST_BYTES_MAX || !host_ok {
        return Err(bad(format!(
            "host {host:?} of user {:?} must be 1..={HOST_BYTES_MAX} characters of A-Z, a-z, 0-9, '.', ':', '-' and the wildcards '%' and '_'",
            name.user
        )));
    }
    Ok(AccountName::new(&name.user, &host.to_ascii_lowercase()))
}

fn check_user(user: &str) -> Result<(), ShoalError> {
    let chars = user.chars().count();
    if chars == 0 || chars > USER_NAME_CHARS_MAX || user.chars().any(char::is_control) {
        return Err(bad(format!(
            "user name {user:?} must be 1..={USER_NAME_CHARS_MAX} characters without control characters"
        )));
    }
    Ok(())
}

/// Checks the hashes and returns them in upper case.
fn checked_password(
    password: &Option<crate::proto::StoredPassword>,
) -> Result<Option<crate::proto::StoredPassword>, ShoalError> {
    let Some(p) = password else {
        return Ok(None);
    };
    let hex = |text: &str, digits: usize, what: &str| {
        if text.len() == digits && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(text.to_ascii_uppercase())
        } else {
            Err(bad(format!(
                "the {what} password hash must be {digits} hex digits"
            )))
        }
    };
    Ok(Some(crate::proto::StoredPassword {
        native: hex(&p.native, 40, "native (SHA1(SHA1(pw)))")?,
        sha256: match &p.sha256 {
            Some(s) => Some(hex(s, 64, "SHA-256 (SHA256(SHA256(pw)))")?),
            None => None,
        },
    }))
}

fn check_database(name: &str) -> Result<(), ShoalError> {
    check_database_name(name).map_err(|e| bad(format!("grant: {}", e.detail)))?;
    if name == UNGRANTABLE_DATABASE {
        return Err(bad(format!(
            "{UNGRANTABLE_DATABASE} cannot be granted: every account may read it"
        )));
    }
    Ok(())
}

/// Checks a whole account and returns it as mgmd keeps it.
pub(crate) fn checked_account(account: &UserAccount) -> Result<UserAccount, ShoalError> {
    let name = checked_name(&account.name())?;
    for d in &account.grants.databases {
        check_database(d)?;
    }
    Ok(UserAccount {
        user: name.user,
        host: name.host,
        password: checked_password(&account.password)?,
        grants: account.grants.clone(),
    })
}

/// Checks the counts the whole set of accounts must stay within.
pub(crate) fn check_totals(accounts: &Accounts) -> Result<(), ShoalError> {
    if accounts.len() > ACCOUNTS_MAX {
        return Err(ShoalError::with_detail(
            ErrorCode::RequestTooLarge,
            format!("the cluster may hold {ACCOUNTS_MAX} accounts; drop some first"),
        ));
    }
    let grants: usize = accounts.values().map(|a| a.grants.databases.len()).sum();
    if grants > DATABASE_GRANTS_MAX {
        return Err(ShoalError::with_detail(
            ErrorCode::RequestTooLarge,
            format!(
                "the accounts may hold {DATABASE_GRANTS_MAX} database grants in all; revoke some or grant *.*"
            ),
        ));
    }
    Ok(())
}

fn check_count(n: usize) -> Result<(), ShoalError> {
    if n == 0 || n > ACCOUNTS_PER_REQUEST_MAX {
        return Err(bad(format!(
            "a request names 1..={ACCOUNTS_PER_REQUEST_MAX} accounts, not {n}"
        )));
    }
    Ok(())
}

fn names(names: &[AccountName]) -> Result<Vec<AccountName>, ShoalError> {
    check_count(names.len())?;
    names.iter().map(checked_name).collect()
}

fn listed(names: &[AccountName]) -> String {
    names
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The accounts of `names` missing from `accounts` (an error if any,
/// unless `skip_missing`), and the ones present.
fn present(
    accounts: &Accounts,
    names: Vec<AccountName>,
    code: ErrorCode,
    skip_missing: bool,
) -> Result<Vec<AccountName>, ShoalError> {
    let (found, missing): (Vec<_>, Vec<_>) =
        names.into_iter().partition(|n| accounts.contains_key(n));
    if !missing.is_empty() && !skip_missing {
        return Err(ShoalError::with_detail(
            code,
            format!("no account {}", listed(&missing)),
        ));
    }
    Ok(found)
}

/// Every account, or those of `user`, by name.
pub(crate) fn list(accounts: &Accounts, user: Option<&str>) -> Vec<UserAccount> {
    accounts
        .values()
        .filter(|a| user.is_none_or(|u| a.user == u))
        .cloned()
        .collect()
}

/// Applies one change to `accounts`: all of it, or nothing (everything
/// is checked before anything changes). Returns the accounts created or
/// changed, as they are now (a request that skipped every account, or
/// granted only what was held, changes nothing and may return them
/// unchanged). `List` is not a change: it returns the listed accounts.
pub(crate) fn apply(
    accounts: &mut Accounts,
    request: UsersRequest,
) -> Result<Vec<UserAccount>, ShoalError> {
    match request {
        UsersRequest::List { user } => {
            if let Some(u) = &user {
                check_user(u)?;
            }
            Ok(list(accounts, user.as_deref()))
        }
        UsersRequest::Create {
            accounts: new,
            if_not_exists,
        } => {
            check_count(new.len())?;
            let mut created = Vec::with_capacity(new.len());
            let mut seen = BTreeSet::new();
            let mut existing = Vec::new();
            for a in &new {
                let a = checked_account(a)?;
                if !seen.insert(a.name()) {
                    return Err(bad(format!("account {} is named twice", a.name())));
                }
                if accounts.contains_key(&a.name()) {
                    existing.push(a.name());
                } else {
                    created.push(a);
                }
            }
            if !existing.is_empty() && !if_not_exists {
                return Err(ShoalError::with_detail(
                    ErrorCode::UserExists,
                    format!("account {} exists already", listed(&existing)),
                ));
            }
            let mut next = accounts.clone();
            for a in &created {
                next.insert(a.name(), a.clone());
            }
            check_totals(&next)?;
            *accounts = next;
            Ok(created)
        }
        UsersRequest::SetPassword { changes, if_exists } => {
            check_count(changes.len())?;
            let mut checked = Vec::with_capacity(changes.len());
            for PasswordChange { account, password } in &changes {
                checked.push((checked_name(account)?, checked_password(password)?));
            }
            let found = present(
                accounts,
                checked.iter().map(|(n, _)| n.clone()).collect(),
                ErrorCode::NoSuchUser,
                if_exists,
            )?;
            let mut changed = Vec::new();
            for (name, password) in checked {
                if !found.contains(&name) {
                    continue;
                }
                if let Some(a) = accounts.get_mut(&name) {
                    a.password = password;
                    changed.push(a.clone());
                }
            }
            Ok(changed)
        }
        UsersRequest::Drop {
            accounts: dropped,
            if_exists,
        } => {
            let found = present(accounts, names(&dropped)?, ErrorCode::NoSuchUser, if_exists)?;
            Ok(found.iter().filter_map(|n| accounts.remove(n)).collect())
        }
        UsersRequest::Grant {
            accounts: to,
            level,
        } => {
            if let GrantLevel::Database(d) = &level {
                check_database(d)?;
            }
            let found = present(accounts, names(&to)?, ErrorCode::NoSuchUser, false)?;
            let mut next = accounts.clone();
            let mut changed = Vec::with_capacity(found.len());
            for name in &found {
                if let Some(a) = next.get_mut(name) {
                    match &level {
                        GrantLevel::AllDatabases => a.grants.all_databases = true,
                        GrantLevel::Database(d) => {
                            a.grants.databases.insert(d.clone());
                        }
                    }
                    changed.push(a.clone());
                }
            }
            check_totals(&next)?;
            *accounts = next;
            Ok(changed)
        }
        UsersRequest::Revoke {
            accounts: from,
            level,
        } => {
            let from = names(&from)?;
            let holds = |a: &UserAccount| match &level {
                GrantLevel::AllDatabases => a.grants.all_databases,
                GrantLevel::Database(d) => a.grants.databases.contains(d),
            };
            let without: Vec<AccountName> = from
                .iter()
                .filter(|n| !accounts.get(*n).is_some_and(holds))
                .cloned()
                .collect();
            if !without.is_empty() {
                let on = match &level {
                    GrantLevel::AllDatabases => "*.*".to_string(),
                    GrantLevel::Database(d) => format!("{d}.*"),
                };
                return Err(ShoalError::with_detail(
                    ErrorCode::NoSuchGrant,
                    format!("{} hold(s) no grant on {on}", listed(&without)),
                ));
            }
            let mut changed = Vec::with_capacity(from.len());
            for name in &from {
                if let Some(a) = accounts.get_mut(name) {
                    match &level {
                        GrantLevel::AllDatabases => a.grants.all_databases = false,
                        GrantLevel::Database(d) => {
                            a.grants.databases.remove(d);
                        }
                    }
                    changed.push(a.clone());
                }
            }
            Ok(changed)
        }
    }
}

impl Shared {
    /// Answers one `Users` request: a list from memory, or a change
    /// written to `users.json` before it is answered.
    pub(super) async fn users_request(
        &self,
        request: UsersRequest,
    ) -> Result<Response, ShoalError> {
        let mut accounts = self.users.lock().await;
        if let UsersRequest::List { .. } = request {
            return apply(&mut accounts, request).map(Response::Accounts);
        }
        let what = users_request_kind(&request);
        let mut next = accounts.clone();
        let changed = apply(&mut next, request)?;
        if next != *accounts {
            self.store.save_users(self.config.cluster_id, &next).await?;
            *accounts = next;
            info!(
                change = what,
                accounts = ?changed.iter().map(UserAccount::name).collect::<Vec<_>>(),
                "SQL accounts changed"
            );
        }
        Ok(Response::Accounts(changed))
    }
}

fn users_request_kind(request: &UsersRequest) -> &'static str {
    match request {
        UsersRequest::Create { .. } => "create",
        UsersRequest::SetPassword { .. } => "set password",
        UsersRequest::Drop { .. } => "drop",
        UsersRequest::Grant { .. } => "grant",
        UsersRequest::Revoke { .. } => "revoke",
        UsersRequest::List { .. } => "list",
    }
}

#[cfg(test)]
mod tests;
