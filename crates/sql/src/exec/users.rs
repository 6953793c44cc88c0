//! Accounts and privileges in SQL: `CREATE USER`, `ALTER USER`, `DROP
//! USER`, `SET PASSWORD`, `GRANT` / `REVOKE` of ALL on a database or on
//! `*.*`, `SHOW GRANTS`, run against the accounts mgmd keeps for every
//! SQL node (through the native client's `Cluster::create_users` & co.).
//!
//! Parts: `parse` reads the statements (sqlparser takes few of them in
//! MySQL's form), [`privileges`] holds what a session may do and the
//! checks the catalog makes, `directory` looks accounts up at login.
//!
//! Passwords never leave the SQL node: it hashes them here and sends
//! mgmd the hashes. Errors are MySQL's: 1396 (an account statement
//! failed for some accounts), 1227 (the statement needs ALL on `*.*`),
//! 1044 (a database not granted), 1141 (no such grant), 1410 (GRANT to a
//! missing account), 1133 (SET PASSWORD for a missing account), 1470 (a
//! name too long), 1827 (a malformed password hash).
//!
//! A session reads its privileges at login and at each USE, as MySQL
//! does for database privileges; changes by account statements of its
//! own are read again at its next statement.

mod directory;
mod parse;
pub mod privileges;

pub use directory::{
    hashes_of, peer_address, stored, ClusterUsers, KNOWN_USERS_MAX, LOOKUP_TIMEOUT,
};
pub use parse::{recognize, AccountRef, AccountStatement, Auth, Level};
pub use privileges::Privileges;

use super::error::from_shoal;
use crate::catalog::quote;
use crate::outcome::{Outcome, SqlError};
use crate::protocol::PasswordHashes;
use shoal_client::{
    AccountName, Cluster, ErrorCode, GrantLevel, Grants, PasswordChange, ShoalError,
    StoredPassword, UserAccount,
};

/// Longest user name, in characters (mgmd's limit, MySQL 8's).
pub const USER_NAME_CHARS_MAX: usize = 32;
/// Longest host, in bytes (mgmd's limit, MySQL 8's).
pub const HOST_BYTES_MAX: usize = 255;

/// What an account statement runs with.
pub struct Context<'a> {
    pub cluster: &'a Cluster,
    /// The session's.
    pub privileges: &'a Privileges,
    /// The session's current database (`GRANT ... ON *`).
    pub database: Option<&'a str>,
}

/// Runs an account statement.
pub async fn run(ctx: &Context<'_>, statement: &AccountStatement) -> Result<Outcome, SqlError> {
    match statement {
        AccountStatement::CreateUser {
            if_not_exists,
            accounts,
        } => create_users(ctx, accounts, *if_not_exists).await,
        AccountStatement::AlterUser {
            if_exists,
            accounts,
        } => set_passwords(ctx, "ALTER USER", accounts, *if_exists).await,
        AccountStatement::SetPassword { account, auth } => {
            set_passwords(
                ctx,
                "SET PASSWORD",
                &[(account.clone(), auth.clone())],
                false,
            )
            .await
        }
        AccountStatement::DropUser {
            if_exists,
            accounts,
        } => drop_users(ctx, accounts, *if_exists).await,
        AccountStatement::Grant {
            level,
            accounts,
            usage_only,
        } => grant(ctx, level, accounts, *usage_only).await,
        AccountStatement::Revoke { level, accounts } => revoke(ctx, level, accounts).await,
        AccountStatement::ShowGrants { account } => show_grants(ctx, account).await,
    }
}

/// 1470 for a name mgmd would refuse for its length.
fn check_lengths(name: &AccountName) -> Result<(), SqlError> {
    let too_long = |text: &str, what: &str, max: usize| {
        SqlError::new(
            1470,
            "HY000",
            format!("String '{text}' is too long for {what} (should be no longer than {max})"),
        )
    };
    if name.user.chars().count() > USER_NAME_CHARS_MAX {
        return Err(too_long(&name.user, "user name", USER_NAME_CHARS_MAX));
    }
    if name.host.len() > HOST_BYTES_MAX {
        return Err(too_long(&name.host, "host name", HOST_BYTES_MAX));
    }
    Ok(())
}

/// What mgmd keeps of an `IDENTIFIED` clause (`None`: no password).
fn password_of(auth: &Auth) -> Result<Option<StoredPassword>, SqlError> {
    match auth {
        Auth::Unchanged => Ok(None),
        Auth::Password(pw) if pw.is_empty() => Ok(None),
        Auth::Password(pw) => Ok(Some(directory::stored(&PasswordHashes::of(pw)))),
        Auth::NativeHash(h) if h.is_empty() => Ok(None),
        Auth::NativeHash(h) => match PasswordHashes::from_native_hex(h) {
            Some(hashes) => Ok(Some(directory::stored(&hashes))),
            None => Err(SqlError::new(
                1827,
                "HY000",
                "The password hash doesn't have the expected format: a mysql_native_password hash is '*' and 40 hex digits",
            )),
        },
    }
}

/// The same account (hosts compare without case, as mgmd keeps them).
fn same(a: &AccountName, b: &AccountName) -> bool {
    a.user == b.user && a.host.eq_ignore_ascii_case(&b.host)
}

fn listed(names: &[&AccountName]) -> String {
    names
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// MySQL's 1396 for `names`.
fn operation_failed(operation: &str, names: &[&AccountName], detail: Option<&str>) -> SqlError {
    let mut message = format!("Operation {operation} failed for {}", listed(names));
    if let Some(d) = detail {
        message.push_str(&format!(" ({d})"));
    }
    SqlError::new(1396, "HY000", message)
}

/// Of `names`, those that exist (`want_existing`) or do not, as mgmd
/// says now; all of them if mgmd cannot say. For an error message after
/// a change failed whole (so nothing changed since).
async fn which<'n>(
    ctx: &Context<'_>,
    names: &'n [AccountName],
    want_existing: bool,
) -> Vec<&'n AccountName> {
    match ctx.cluster.users(None).await {
        Ok(all) => {
            let found: Vec<&AccountName> = names
                .iter()
                .filter(|n| all.iter().any(|a| same(&a.name(), n)) == want_existing)
                .collect();
            if found.is_empty() {
                names.iter().collect()
            } else {
                found
            }
        }
        Err(_) => names.iter().collect(),
    }
}

/// Maps a failed change: `code` → 1396 naming the accounts that caused
/// it; a name mgmd refused → 1396 with its reason; anything else as
/// Shoal's errors map.
async fn change_failed(
    ctx: &Context<'_>,
    operation: &str,
    names: &[AccountName],
    e: &ShoalError,
    existing_fail: bool,
) -> SqlError {
    match e.code {
        ErrorCode::UserExists | ErrorCode::NoSuchUser => {
            let failed = which(ctx, names, existing_fail).await;
            operation_failed(operation, &failed, None)
        }
        ErrorCode::BadRequest => {
            let all: Vec<&AccountName> = names.iter().collect();
            operation_failed(operation, &all, Some(&e.detail))
        }
        _ => from_shoal(e),
    }
}

async fn create_users(
    ctx: &Context<'_>,
    accounts: &[(AccountName, Auth)],
    if_not_exists: bool,
) -> Result<Outcome, SqlError> {
    ctx.privileges.check_manage("CREATE USER")?;
    let mut new = Vec::with_capacity(accounts.len());
    for (name, auth) in accounts {
        check_lengths(name)?;
        new.push(UserAccount {
            user: name.user.clone(),
            host: name.host.clone(),
            password: password_of(auth)?,
            grants: Grants::default(),
        });
    }
    match ctx.cluster.create_users(new, if_not_exists).await {
        Ok(_) => Ok(Outcome::ok()),
        Err(e) => {
            let names: Vec<AccountName> = accounts.iter().map(|(n, _)| n.clone()).collect();
            Err(change_failed(ctx, "CREATE USER", &names, &e, true).await)
        }
    }
}

/// ALTER USER ... IDENTIFIED and SET PASSWORD: a session may change its
/// own password; another's needs ALL on `*.*`.
async fn set_passwords(
    ctx: &Context<'_>,
    operation: &str,
    accounts: &[(AccountRef, Auth)],
    if_exists: bool,
) -> Result<Outcome, SqlError> {
    let own = &ctx.privileges.account;
    let mut changes = Vec::with_capacity(accounts.len());
    for (account, auth) in accounts {
        let name = match account {
            AccountRef::Current => own.clone(),
            AccountRef::Named(n) => n.clone(),
        };
        check_lengths(&name)?;
        changes.push(PasswordChange {
            account: name,
            password: password_of(auth)?,
        });
    }
    if !changes.iter().all(|c| same(&c.account, own)) {
        ctx.privileges.check_manage("CREATE USER")?;
    }
    match ctx.cluster.set_passwords(changes.clone(), if_exists).await {
        Ok(_) => Ok(Outcome::ok()),
        Err(e) if e.code == ErrorCode::NoSuchUser && operation == "SET PASSWORD" => {
            Err(SqlError::new(
                1133,
                "28000",
                "Can't find any matching row in the user table",
            ))
        }
        Err(e) => {
            let names: Vec<AccountName> = changes.into_iter().map(|c| c.account).collect();
            Err(change_failed(ctx, operation, &names, &e, false).await)
        }
    }
}

async fn drop_users(
    ctx: &Context<'_>,
    accounts: &[AccountName],
    if_exists: bool,
) -> Result<Outcome, SqlError> {
    ctx.privileges.check_manage("CREATE USER")?;
    for name in accounts {
        check_lengths(name)?;
    }
    match ctx.cluster.drop_users(accounts.to_vec(), if_exists).await {
        Ok(_) => Ok(Outcome::ok()),
        Err(e) => Err(change_failed(ctx, "DROP USER", accounts, &e, false).await),
    }
}

/// Where a GRANT or REVOKE applies, checked.
fn grant_level(ctx: &Context<'_>, level: &Level) -> Result<GrantLevel, SqlError> {
    let database = match level {
        Level::All => return Ok(GrantLevel::AllDatabases),
        // `*` with no database selected: MySQL's 1046.
        Level::Current => ctx
            .database
            .ok_or_else(crate::catalog::no_database_selected)?,
        Level::Database(d) => d.as_str(),
    };
    if database == privileges::OPEN_DATABASE {
        return Err(privileges::database_denied(
            &ctx.privileges.account,
            database,
        ));
    }
    if shoal_types::schema::check_database_name(database).is_err() {
        return Err(SqlError::new(
            1102,
            "42000",
            format!("Incorrect database name '{database}'"),
        ));
    }
    Ok(GrantLevel::Database(database.to_string()))
}

fn no_grant_to_missing() -> SqlError {
    SqlError::new(
        1410,
        "42000",
        "You are not allowed to create a user with GRANT (create the account with CREATE USER first)",
    )
}

async fn grant(
    ctx: &Context<'_>,
    level: &Level,
    accounts: &[AccountName],
    usage_only: bool,
) -> Result<Outcome, SqlError> {
    ctx.privileges.check_manage("GRANT OPTION")?;
    let level = grant_level(ctx, level)?;
    for name in accounts {
        check_lengths(name)?;
    }
    if usage_only {
        // Grants nothing; only the accounts must exist.
        let all = ctx.cluster.users(None).await.map_err(|e| from_shoal(&e))?;
        if !accounts
            .iter()
            .all(|n| all.iter().any(|a| same(&a.name(), n)))
        {
            return Err(no_grant_to_missing());
        }
        return Ok(Outcome::ok());
    }
    match ctx.cluster.grant(accounts.to_vec(), level).await {
        Ok(_) => Ok(Outcome::ok()),
        Err(e) if e.code == ErrorCode::NoSuchUser => Err(no_grant_to_missing()),
        Err(e) => Err(change_failed(ctx, "GRANT", accounts, &e, false).await),
    }
}

/// MySQL's 1141 for `name`.
fn no_such_grant(name: &AccountName) -> SqlError {
    SqlError::new(
        1141,
        "42000",
        format!(
            "There is no such grant defined for user '{}' on host '{}'",
            name.user, name.host
        ),
    )
}

async fn revoke(
    ctx: &Context<'_>,
    level: &Level,
    accounts: &[AccountName],
) -> Result<Outcome, SqlError> {
    ctx.privileges.check_manage("GRANT OPTION")?;
    let level = grant_level(ctx, level)?;
    for name in accounts {
        check_lengths(name)?;
    }
    match ctx.cluster.revoke(accounts.to_vec(), level.clone()).await {
        Ok(_) => Ok(Outcome::ok()),
        Err(e) if e.code == ErrorCode::NoSuchGrant => {
            // Name the first account without the grant, as MySQL does.
            let all = ctx.cluster.users(None).await.unwrap_or_default();
            let holds = |n: &AccountName| {
                all.iter().any(|a| {
                    same(&a.name(), n)
                        && match &level {
                            GrantLevel::AllDatabases => a.grants.all_databases,
                            GrantLevel::Database(d) => a.grants.databases.contains(d),
                        }
                })
            };
            let first = accounts
                .iter()
                .find(|n| !holds(n))
                .or(accounts.first())
                .cloned()
                .unwrap_or_else(|| ctx.privileges.account.clone());
            Err(no_such_grant(&first))
        }
        Err(e) => Err(change_failed(ctx, "REVOKE", accounts, &e, false).await),
    }
}

/// The GRANT statements that give `grants` to `name`, as SHOW GRANTS
/// lists them.
pub fn grant_lines(name: &AccountName, grants: &Grants) -> Vec<String> {
    let to = format!("{}@{}", quote(&name.user), quote(&name.host));
    let mut lines = vec![if grants.all_databases {
        format!("GRANT ALL PRIVILEGES ON *.* TO {to} WITH GRANT OPTION")
    } else {
        format!("GRANT USAGE ON *.* TO {to}")
    }];
    for d in &grants.databases {
        lines.push(format!("GRANT ALL PRIVILEGES ON {}.* TO {to}", quote(d)));
    }
    lines
}

async fn show_grants(ctx: &Context<'_>, account: &AccountRef) -> Result<Outcome, SqlError> {
    let own = &ctx.privileges.account;
    let name = match account {
        AccountRef::Current => own.clone(),
        AccountRef::Named(n) => n.clone(),
    };
    let is_own = same(&name, own);
    if !is_own && !ctx.privileges.all_databases {
        // MySQL asks for SELECT on its `mysql` database here.
        return Err(privileges::database_denied(own, "mysql"));
    }
    check_lengths(&name)?;
    let accounts = ctx
        .cluster
        .users(Some(&name.user))
        .await
        .map_err(|e| from_shoal(&e))?;
    let grants = match accounts.iter().find(|a| same(&a.name(), &name)) {
        Some(a) => a.grants.clone(),
        // The session's own account, dropped since: what it still holds.
        None if is_own => Grants {
            all_databases: ctx.privileges.all_databases,
            databases: ctx.privileges.databases.clone(),
        },
        None => return Err(no_such_grant(&name)),
    };
    let head = format!("Grants for {}@{}", name.user, name.host);
    let rows = grant_lines(&name, &grants)
        .into_iter()
        .map(|l| vec![Some(l)])
        .collect();
    Ok(super::show::strings(&[&head], rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_become_hashes_and_bad_hashes_are_refused() {
        assert_eq!(password_of(&Auth::Unchanged).unwrap(), None);
        assert_eq!(password_of(&Auth::Password(String::new())).unwrap(), None);
        let stored = password_of(&Auth::Password("secret".into()))
            .unwrap()
            .unwrap();
        // SELECT PASSWORD('secret') in MySQL 5.7.
        assert_eq!(stored.native, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
        assert!(stored.sha256.is_some());
        let from_hash = password_of(&Auth::NativeHash(
            "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7".into(),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(from_hash.native, stored.native);
        assert_eq!(from_hash.sha256, None);
        let e = password_of(&Auth::NativeHash("*12".into())).unwrap_err();
        assert_eq!(e.code, 1827);
    }

    #[test]
    fn names_too_long_are_refused_with_1470() {
        let long_user = AccountName::new(&"u".repeat(USER_NAME_CHARS_MAX + 1), "%");
        assert_eq!(check_lengths(&long_user).unwrap_err().code, 1470);
        let wide = AccountName::new(&"é".repeat(USER_NAME_CHARS_MAX), "%");
        assert!(check_lengths(&wide).is_ok());
        let long_host = AccountName::new("u", &"h".repeat(HOST_BYTES_MAX + 1));
        assert_eq!(check_lengths(&long_host).unwrap_err().code, 1470);
    }

    #[test]
    fn grant_lines_read_like_mysql() {
        let mut grants = Grants::default();
        grants.databases.insert("shop".into());
        grants.databases.insert("a`b".into());
        assert_eq!(
            grant_lines(&AccountName::new("app", "%"), &grants),
            vec![
                "GRANT USAGE ON *.* TO `app`@`%`".to_string(),
                "GRANT ALL PRIVILEGES ON `a``b`.* TO `app`@`%`".to_string(),
                "GRANT ALL PRIVILEGES ON `shop`.* TO `app`@`%`".to_string(),
            ]
        );
        let root = Grants {
            all_databases: true,
            ..Grants::default()
        };
        assert_eq!(
            grant_lines(&AccountName::new("root", "localhost"), &root),
            vec!["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION".to_string()]
        );
    }
}
