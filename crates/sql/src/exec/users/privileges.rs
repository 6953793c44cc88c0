//! What a session may do: the account it logged in with and the
//! databases that account was granted, and the checks the catalog makes
//! wherever a statement names a database or a table.
//!
//! The session puts its privileges in scope ([`scope`]) around each
//! statement it runs; the catalog's lookups (`catalog::resolve`,
//! `catalog::table`, ...) check against them, so every statement that
//! reaches a table or a database is checked at the one place that
//! resolves names, whatever the statement.
//!
//! Invariants:
//! - Outside a session's scope nothing is allowed: a lookup the session
//!   did not wrap (a task spawned off a statement) fails with 1044 saying
//!   so, rather than running unchecked.
//! - `information_schema` is every account's; any other database needs
//!   its grant (`db.*`) or ALL on `*.*`, as MySQL's database-level
//!   privileges.
//! - Only ALL on `*.*` may manage accounts (MySQL's CREATE USER and
//!   GRANT OPTION, which Shoal's ALL on `*.*` includes).

use crate::outcome::SqlError;
use shoal_client::{AccountName, UserAccount};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

/// The database every account may read.
pub const OPEN_DATABASE: &str = "information_schema";

/// A session's privileges, as read at its login or its last USE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Privileges {
    /// The account: its user and host pattern (`CURRENT_USER()`).
    pub account: AccountName,
    /// ALL on `*.*`.
    pub all_databases: bool,
    /// ALL on these `db.*`.
    pub databases: BTreeSet<String>,
}

impl Privileges {
    /// The privileges of `account`.
    pub fn of(account: &UserAccount) -> Privileges {
        Privileges {
            account: account.name(),
            all_databases: account.grants.all_databases,
            databases: account.grants.databases.clone(),
        }
    }

    /// No account (it was dropped since the login): `information_schema`
    /// only.
    pub fn none(user: &str, host: &str) -> Privileges {
        Privileges {
            account: AccountName::new(user, host),
            all_databases: false,
            databases: BTreeSet::new(),
        }
    }

    /// Everything (the root of a fresh cluster).
    pub fn all(user: &str, host: &str) -> Privileges {
        Privileges {
            all_databases: true,
            ..Privileges::none(user, host)
        }
    }

    /// Whether the session may use database `database` (and its tables).
    pub fn may_use(&self, database: &str) -> bool {
        self.all_databases || database == OPEN_DATABASE || self.databases.contains(database)
    }

    /// 1044 unless the session may use `database`.
    pub fn check_database(&self, database: &str) -> Result<(), SqlError> {
        if self.may_use(database) {
            Ok(())
        } else {
            Err(database_denied(&self.account, database))
        }
    }

    /// 1227 unless the session may manage accounts (`what`: the
    /// privilege MySQL would name, `CREATE USER`).
    pub fn check_manage(&self, what: &str) -> Result<(), SqlError> {
        if self.all_databases {
            Ok(())
        } else {
            Err(SqlError::new(
                1227,
                "42000",
                format!(
                    "Access denied; you need (at least one of) the {what} privilege(s) for this operation (in Shoal: ALL PRIVILEGES ON *.*)"
                ),
            ))
        }
    }
}

/// 1044, as MySQL words it.
pub fn database_denied(account: &AccountName, database: &str) -> SqlError {
    SqlError::new(
        1044,
        "42000",
        format!(
            "Access denied for user '{}'@'{}' to database '{database}'",
            account.user, account.host
        ),
    )
}

tokio::task_local! {
    /// The privileges of the session whose statement runs on this task.
    static SESSION: Arc<Privileges>;
}

/// Runs `work` (a statement of the session) with `privileges` in scope.
pub async fn scope<F: Future>(privileges: Arc<Privileges>, work: F) -> F::Output {
    SESSION.scope(privileges, work).await
}

/// The privileges in scope, if any.
pub fn current() -> Option<Arc<Privileges>> {
    SESSION.try_with(Arc::clone).ok()
}

/// 1044 unless the session in scope may use `database` (and 1044 with
/// no session in scope).
pub fn check_database(database: &str) -> Result<(), SqlError> {
    match current() {
        Some(p) => p.check_database(database),
        None => Err(SqlError::new(
            1044,
            "42000",
            format!(
                "Access denied to database '{database}': no session's privileges are in scope (a catalog lookup must run inside the session's statement, exec::users::privileges::scope)"
            ),
        )),
    }
}

/// Whether the session in scope may see `database` (SHOW DATABASES);
/// nothing with no session in scope.
pub fn may_see(database: &str) -> bool {
    current().is_some_and(|p| p.may_use(database))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_decide_what_a_session_may_use() {
        let mut p = Privileges::none("app", "%");
        p.databases.insert("shop".into());
        assert!(p.may_use("shop"));
        assert!(p.may_use(OPEN_DATABASE));
        assert!(!p.may_use("Shop"));
        assert!(!p.may_use("mysql"));
        let e = p.check_database("other").unwrap_err();
        assert_eq!(e.code, 1044);
        assert_eq!(
            e.message,
            "Access denied for user 'app'@'%' to database 'other'"
        );
        assert_eq!(p.check_manage("CREATE USER").unwrap_err().code, 1227);
        let root = Privileges::all("root", "localhost");
        assert!(root.may_use("anything"));
        assert!(root.check_manage("CREATE USER").is_ok());
    }

    #[tokio::test]
    async fn checks_use_the_scope_and_deny_outside_it() {
        assert_eq!(check_database("shop").unwrap_err().code, 1044);
        assert!(!may_see(OPEN_DATABASE));
        let mut p = Privileges::none("app", "%");
        p.databases.insert("shop".into());
        scope(Arc::new(p), async {
            assert!(check_database("shop").is_ok());
            assert!(check_database("other").is_err());
            assert!(may_see(OPEN_DATABASE));
            // A nested scope (USE reading the privileges again) wins.
            scope(Arc::new(Privileges::all("root", "%")), async {
                assert!(check_database("other").is_ok());
            })
            .await;
            assert!(check_database("other").is_err());
        })
        .await;
    }
}
