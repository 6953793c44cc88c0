//! The account statements, parsed here because sqlparser takes few of
//! them in MySQL's form (`'u'@'h'` names, `IDENTIFIED BY`, `SET PASSWORD
//! FOR`): CREATE / ALTER / DROP USER, SET PASSWORD, GRANT and REVOKE of
//! ALL, SHOW GRANTS. The session asks [`recognize`] before it hands a
//! statement to sqlparser.
//!
//! It works on sqlparser's tokens (MySQL dialect), so quoting, escapes
//! and comments are MySQL's. Invariant: no error message quotes a string
//! of the statement, since those strings are passwords.

use crate::outcome::SqlError;
use shoal_client::AccountName;
use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// Where a GRANT or REVOKE applies, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// `*.*`
    All,
    /// `*`: the current database (`*.*` if none is selected, as MySQL).
    Current,
    /// `db.*`
    Database(String),
}

/// An account as a statement names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountRef {
    Named(AccountName),
    /// `CURRENT_USER`, `CURRENT_USER()`, `USER()`: the session's own.
    Current,
}

/// How an account is identified.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// No `IDENTIFIED` clause.
    Unchanged,
    /// `IDENTIFIED BY 'password'` (empty: no password).
    Password(String),
    /// `IDENTIFIED WITH mysql_native_password AS '*HEX'` or
    /// `IDENTIFIED BY PASSWORD '*HEX'`: the native hash as MySQL shows it.
    NativeHash(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A password stays out of logs and test output.
        f.write_str(match self {
            Auth::Unchanged => "Unchanged",
            Auth::Password(_) => "Password(..)",
            Auth::NativeHash(_) => "NativeHash(..)",
        })
    }
}

/// One account statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountStatement {
    CreateUser {
        if_not_exists: bool,
        accounts: Vec<(AccountName, Auth)>,
    },
    AlterUser {
        if_exists: bool,
        accounts: Vec<(AccountRef, Auth)>,
    },
    DropUser {
        if_exists: bool,
        accounts: Vec<AccountName>,
    },
    /// `SET PASSWORD [FOR account] = 'pw'`; never `Auth::Unchanged`.
    SetPassword {
        account: AccountRef,
        auth: Auth,
    },
    /// `GRANT ALL [PRIVILEGES] ON level TO ...` (`usage_only`: `GRANT
    /// USAGE`, which grants nothing but checks the accounts exist).
    Grant {
        level: Level,
        accounts: Vec<AccountName>,
        usage_only: bool,
    },
    Revoke {
        level: Level,
        accounts: Vec<AccountName>,
    },
    ShowGrants {
        account: AccountRef,
    },
}

impl AccountStatement {
    /// Whether it changes accounts (and so commits an open transaction
    /// first, as MySQL's account statements do).
    pub fn changes_accounts(&self) -> bool {
        !matches!(self, AccountStatement::ShowGrants { .. })
    }
}

/// The first two words of `text`, which decide whether it is an account
/// statement, without tokenizing it or allocating: most statements are
/// not, and this is asked of every one.
fn leading_words(text: &str) -> [&str; 2] {
    let bytes = text.as_bytes();
    let mut words = [""; 2];
    let mut found = 0;
    let mut i = 0;
    while i < bytes.len() && found < 2 {
        let rest = &bytes[i..];
        if rest[0].is_ascii_whitespace() {
            i += 1;
        } else if rest.starts_with(b"/*") && !rest.starts_with(b"/*!") {
            match text[i + 2..].find("*/") {
                Some(end) => i += 2 + end + 2,
                None => break,
            }
        } else if rest.starts_with(b"#") || rest.starts_with(b"-- ") {
            match text[i..].find('\n') {
                Some(end) => i += end + 1,
                None => break,
            }
        } else if rest[0].is_ascii_alphabetic() {
            let len = rest
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            words[found] = &text[i..i + len];
            found += 1;
            i += len;
        } else {
            break;
        }
    }
    words
}

/// Whether `text` is an account statement: `None` if it is not (sqlparser
/// takes it), else the statement or its syntax error.
pub fn recognize(text: &str) -> Option<Result<AccountStatement, SqlError>> {
    let [first, second] = leading_words(text);
    let is = |word: &str, any: &[&str]| any.iter().any(|a| word.eq_ignore_ascii_case(a));
    let ours = (is(first, &["CREATE", "ALTER", "DROP", "RENAME"]) && is(second, &["USER"]))
        || is(first, &["GRANT", "REVOKE"])
        || (is(first, &["SET"]) && is(second, &["PASSWORD"]))
        || (is(first, &["SHOW"]) && is(second, &["GRANTS"]));
    ours.then(|| parse(text))
}

fn syntax(near: &str) -> SqlError {
    SqlError::syntax(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near {near}"
    ))
}

fn not_supported(what: &str) -> SqlError {
    SqlError::not_supported(what)
}

/// The statement's tokens without whitespace and comments, and where the
/// parser is.
struct Cursor {
    tokens: Vec<Token>,
    at: usize,
}

/// How a token is named in an error: its text, but never a string's.
fn describe(t: Option<&Token>) -> String {
    match t {
        None | Some(Token::EOF) => "the end of the statement".to_string(),
        Some(Token::SingleQuotedString(_) | Token::DoubleQuotedString(_)) => "a string".to_string(),
        Some(Token::Word(w)) if w.quote_style.is_some() => "a quoted name".to_string(),
        Some(
            t @ (Token::Word(_)
            | Token::Number(..)
            | Token::Comma
            | Token::Period
            | Token::Mul
            | Token::LParen
            | Token::RParen
            | Token::AtSign
            | Token::Eq
            | Token::SemiColon),
        ) => {
            let short: String = t.to_string().chars().take(40).collect();
            format!("'{short}'")
        }
        // Other literals (N'..', X'..') may hold a password too.
        Some(_) => "a literal".to_string(),
    }
}

impl Cursor {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn error(&self) -> SqlError {
        syntax(&describe(self.peek()))
    }

    /// The next token is the unquoted word `word` (any case): taken.
    fn word(&mut self, word: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Word(w))
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
        if hit {
            self.at += 1;
        }
        hit
    }

    fn words(&mut self, words: &[&str]) -> bool {
        let start = self.at;
        if words.iter().all(|w| self.word(w)) {
            return true;
        }
        self.at = start;
        false
    }

    fn expect_word(&mut self, word: &str) -> Result<(), SqlError> {
        if self.word(word) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn token(&mut self, token: &Token) -> bool {
        let hit = self.peek() == Some(token);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn at_end(&self) -> bool {
        matches!(self.peek(), None | Some(Token::EOF))
    }

    fn end(&self) -> Result<(), SqlError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// A string literal (a password or a hash).
    fn string(&mut self) -> Result<String, SqlError> {
        match self.peek() {
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.error()),
        }
    }

    /// A user or host part: a string, or a (back-quoted) name.
    fn name_part(&mut self) -> Result<String, SqlError> {
        match self.peek() {
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            Some(Token::Word(w)) => {
                let s = w.value.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.error()),
        }
    }

    /// `user[@host]` (host `%` if left out), in any of MySQL's quotings.
    fn account(&mut self) -> Result<AccountName, SqlError> {
        // An unquoted `u@h` is one word to the tokenizer.
        if let Some(Token::Word(w)) = self.peek() {
            if w.quote_style.is_none() {
                if let Some((user, host)) = w.value.split_once('@') {
                    let name = AccountName::new(user, host);
                    self.at += 1;
                    return Ok(name);
                }
            }
        }
        let user = self.name_part()?;
        let host = if self.token(&Token::AtSign) {
            self.name_part()?
        } else {
            match self.peek() {
                // `'u'@localhost`: the tokenizer reads `@localhost` as
                // one word (a user variable's form).
                Some(Token::Word(w)) if w.quote_style.is_none() && w.value.starts_with('@') => {
                    let host = w.value[1..].to_string();
                    self.at += 1;
                    host
                }
                _ => "%".to_string(),
            }
        };
        Ok(AccountName::new(&user, &host))
    }

    /// An account, or `CURRENT_USER[()]` / `USER()` where allowed.
    fn account_ref(&mut self) -> Result<AccountRef, SqlError> {
        // `USER` alone is an account named user; `USER()` is the function.
        let user_function = matches!(self.peek(), Some(Token::Word(w))
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("USER"))
            && self.tokens.get(self.at + 1) == Some(&Token::LParen);
        if self.words(&["CURRENT_USER"]) || (user_function && self.word("USER")) {
            if self.token(&Token::LParen) && !self.token(&Token::RParen) {
                return Err(self.error());
            }
            return Ok(AccountRef::Current);
        }
        self.account().map(AccountRef::Named)
    }

    fn account_list(&mut self) -> Result<Vec<AccountName>, SqlError> {
        let mut accounts = vec![self.account()?];
        while self.token(&Token::Comma) {
            accounts.push(self.account()?);
        }
        Ok(accounts)
    }

    /// `IDENTIFIED ...`, or nothing.
    fn auth(&mut self) -> Result<Auth, SqlError> {
        if !self.word("IDENTIFIED") {
            return Ok(Auth::Unchanged);
        }
        if self.word("BY") {
            if self.word("PASSWORD") {
                return Ok(Auth::NativeHash(self.string()?));
            }
            return Ok(Auth::Password(self.string()?));
        }
        self.expect_word("WITH")?;
        let plugin = match self.next() {
            Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => {
                s.to_ascii_lowercase()
            }
            _ => return Err(syntax("IDENTIFIED WITH")),
        };
        if plugin != "mysql_native_password" && plugin != "caching_sha2_password" {
            return Err(not_supported(&format!(
                "IDENTIFIED WITH {plugin} (Shoal checks passwords with mysql_native_password and caching_sha2_password)"
            )));
        }
        if self.word("BY") {
            return Ok(Auth::Password(self.string()?));
        }
        if self.word("AS") {
            if plugin != "mysql_native_password" {
                return Err(not_supported(
                    "IDENTIFIED WITH caching_sha2_password AS (give the password with BY, or a mysql_native_password hash with AS)",
                ));
            }
            return Ok(Auth::NativeHash(self.string()?));
        }
        // A plugin and no password: the account has none.
        Ok(Auth::Password(String::new()))
    }

    /// `ON level`
    fn level(&mut self) -> Result<Level, SqlError> {
        self.expect_word("ON")?;
        // `ON TABLE db.*` is MySQL's too.
        self.word("TABLE");
        if self.token(&Token::Mul) {
            if self.token(&Token::Period) {
                if self.token(&Token::Mul) {
                    return Ok(Level::All);
                }
                return Err(self.error());
            }
            return Ok(Level::Current);
        }
        let database = match self.peek() {
            Some(Token::Word(w)) => w.value.clone(),
            _ => return Err(self.error()),
        };
        self.at += 1;
        if !self.token(&Token::Period) {
            return Err(self.error());
        }
        if !self.token(&Token::Mul) {
            return Err(not_supported(
                "privileges on a table (Shoal grants ALL on db.* or *.*)",
            ));
        }
        Ok(Level::Database(database))
    }

    /// `ALL [PRIVILEGES]`, or (when `usage` may be) `USAGE`: whether it
    /// was USAGE.
    fn privileges(&mut self, what: &str, usage: bool) -> Result<bool, SqlError> {
        if self.word("ALL") {
            self.word("PRIVILEGES");
            return Ok(false);
        }
        if usage && self.word("USAGE") {
            return Ok(true);
        }
        if self.at_end() {
            return Err(self.error());
        }
        Err(not_supported(&format!(
            "{what} of privileges other than ALL (Shoal grants ALL PRIVILEGES on db.* or *.*)"
        )))
    }
}

/// Parses an account statement (see [`recognize`]).
pub fn parse(text: &str) -> Result<AccountStatement, SqlError> {
    let dialect = MySqlDialect {};
    // The tokenizer's message would quote the text (a password).
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize()
        .map_err(|_| syntax("an unterminated string or quoted name"))?;
    let tokens = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
    let mut c = Cursor { tokens, at: 0 };
    let statement = if c.words(&["CREATE", "USER"]) {
        let if_not_exists = c.words(&["IF", "NOT", "EXISTS"]);
        let mut accounts = Vec::new();
        loop {
            let account = c.account()?;
            accounts.push((account, c.auth()?));
            if !c.token(&Token::Comma) {
                break;
            }
        }
        options_end(&c, "CREATE USER")?;
        AccountStatement::CreateUser {
            if_not_exists,
            accounts,
        }
    } else if c.words(&["ALTER", "USER"]) {
        let if_exists = c.words(&["IF", "EXISTS"]);
        let mut accounts = Vec::new();
        loop {
            let account = c.account_ref()?;
            accounts.push((account, c.auth()?));
            if !c.token(&Token::Comma) {
                break;
            }
        }
        options_end(&c, "ALTER USER")?;
        if accounts.iter().any(|(_, auth)| *auth == Auth::Unchanged) {
            return Err(not_supported(
                "ALTER USER without IDENTIFIED (Shoal's accounts have a password and grants only)",
            ));
        }
        AccountStatement::AlterUser {
            if_exists,
            accounts,
        }
    } else if c.words(&["DROP", "USER"]) {
        let if_exists = c.words(&["IF", "EXISTS"]);
        let accounts = c.account_list()?;
        c.end()?;
        AccountStatement::DropUser {
            if_exists,
            accounts,
        }
    } else if c.words(&["RENAME", "USER"]) {
        return Err(not_supported(
            "RENAME USER (create the new account, grant, then drop the old one)",
        ));
    } else if c.words(&["SET", "PASSWORD"]) {
        let account = if c.word("FOR") {
            c.account_ref()?
        } else {
            AccountRef::Current
        };
        if !c.token(&Token::Eq) {
            return Err(c.error());
        }
        let auth = if c.word("PASSWORD") {
            // MariaDB's and MySQL 5's `= PASSWORD('pw')`.
            if !c.token(&Token::LParen) {
                return Err(c.error());
            }
            let pw = c.string()?;
            if !c.token(&Token::RParen) {
                return Err(c.error());
            }
            Auth::Password(pw)
        } else {
            Auth::Password(c.string()?)
        };
        c.end()?;
        AccountStatement::SetPassword { account, auth }
    } else if c.word("GRANT") {
        let usage_only = c.privileges("GRANT", true)?;
        let level = c.level()?;
        c.expect_word("TO")?;
        let accounts = c.account_list()?;
        if c.at_end() {
        } else if c.words(&["WITH", "GRANT", "OPTION"]) {
            // ALL on *.* manages accounts already; on a database Shoal
            // has no grant option to give.
            if level != Level::All {
                return Err(not_supported(
                    "WITH GRANT OPTION on a database (only ALL on *.* may grant, and it always may)",
                ));
            }
        } else if c.word("IDENTIFIED") {
            return Err(not_supported(
                "GRANT ... IDENTIFIED BY (create the account with CREATE USER first)",
            ));
        } else {
            return Err(c.error());
        }
        c.end()?;
        AccountStatement::Grant {
            level,
            accounts,
            usage_only,
        }
    } else if c.word("REVOKE") {
        c.privileges("REVOKE", false)?;
        if c.token(&Token::Comma) {
            return Err(not_supported(
                "REVOKE ALL PRIVILEGES, GRANT OPTION (revoke ALL ON *.* and each database)",
            ));
        }
        let level = c.level()?;
        c.expect_word("FROM")?;
        let accounts = c.account_list()?;
        c.end()?;
        AccountStatement::Revoke { level, accounts }
    } else if c.words(&["SHOW", "GRANTS"]) {
        let account = if c.word("FOR") {
            c.account_ref()?
        } else {
            AccountRef::Current
        };
        if c.word("USING") {
            return Err(not_supported("SHOW GRANTS ... USING (Shoal has no roles)"));
        }
        c.end()?;
        AccountStatement::ShowGrants { account }
    } else {
        return Err(c.error());
    };
    Ok(statement)
}

/// The end of CREATE / ALTER USER: options Shoal does not keep (TLS,
/// resource limits, password expiry, locking, comments) are refused by
/// name rather than ignored.
fn options_end(c: &Cursor, what: &str) -> Result<(), SqlError> {
    match c.peek() {
        None | Some(Token::EOF) => Ok(()),
        Some(Token::Word(w)) if w.quote_style.is_none() => {
            let option = w.value.to_ascii_uppercase();
            let known = [
                "REQUIRE",
                "WITH",
                "PASSWORD",
                "ACCOUNT",
                "COMMENT",
                "ATTRIBUTE",
                "FAILED_LOGIN_ATTEMPTS",
                "PASSWORD_LOCK_TIME",
                "DEFAULT",
            ];
            if known.contains(&option.as_str()) {
                Err(not_supported(&format!(
                    "{what} ... {option} (Shoal's accounts have a password and grants only)"
                )))
            } else {
                Err(c.error())
            }
        }
        Some(_) => Err(c.error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(user: &str, host: &str) -> AccountName {
        AccountName::new(user, host)
    }

    fn ok(text: &str) -> AccountStatement {
        match recognize(text) {
            Some(Ok(s)) => s,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn code(text: &str) -> u16 {
        match recognize(text) {
            Some(Err(e)) => e.code,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn other_statements_are_left_to_sqlparser() {
        for text in [
            "SELECT 1",
            "CREATE TABLE user (id INT)",
            "CREATE DATABASE users",
            "DROP TABLE user",
            "SET autocommit = 1",
            "SET @password = 'x'",
            "SHOW DATABASES",
            "select 'GRANT ALL'",
            "/* GRANT */ SELECT 1",
            "-- GRANT\nSELECT 1",
            "",
            "   ",
        ] {
            assert!(recognize(text).is_none(), "{text}");
        }
        assert!(recognize("/* hi */ GRANT ALL ON *.* TO u").is_some());
        assert!(recognize("# note\n  create   user u").is_some());
    }

    #[test]
    fn account_names_in_every_quoting() {
        let s = ok(
            "CREATE USER 'a'@'10.0.%', \"b\"@\"h\", `c`@`%`, d@localhost, 'e'@localhost, f, 'g'",
        );
        let AccountStatement::CreateUser {
            if_not_exists,
            accounts,
        } = s
        else {
            panic!("{s:?}")
        };
        assert!(!if_not_exists);
        let names: Vec<AccountName> = accounts.into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            vec![
                named("a", "10.0.%"),
                named("b", "h"),
                named("c", "%"),
                named("d", "localhost"),
                named("e", "localhost"),
                named("f", "%"),
                named("g", "%"),
            ]
        );
    }

    #[test]
    fn passwords_and_hashes() {
        let s = ok("create user if not exists 'u'@'%' identified by 'p''w;\\'x', v IDENTIFIED WITH mysql_native_password AS '*ABC', w identified with caching_sha2_password by 'q', z identified by password '*DEF'");
        let AccountStatement::CreateUser {
            if_not_exists,
            accounts,
        } = s
        else {
            panic!("{s:?}")
        };
        assert!(if_not_exists);
        let auths: Vec<Auth> = accounts.into_iter().map(|(_, a)| a).collect();
        assert_eq!(
            auths,
            vec![
                Auth::Password("p'w;'x".into()),
                Auth::NativeHash("*ABC".into()),
                Auth::Password("q".into()),
                Auth::NativeHash("*DEF".into()),
            ]
        );
        assert_eq!(
            ok("ALTER USER IF EXISTS CURRENT_USER() IDENTIFIED BY 'n', 'u' IDENTIFIED BY ''"),
            AccountStatement::AlterUser {
                if_exists: true,
                accounts: vec![
                    (AccountRef::Current, Auth::Password("n".into())),
                    (
                        AccountRef::Named(named("u", "%")),
                        Auth::Password(String::new())
                    ),
                ],
            }
        );
        assert_eq!(
            ok("SET PASSWORD = 'x'"),
            AccountStatement::SetPassword {
                account: AccountRef::Current,
                auth: Auth::Password("x".into()),
            }
        );
        assert_eq!(
            ok("SET PASSWORD FOR 'u'@'h' = PASSWORD('y')"),
            AccountStatement::SetPassword {
                account: AccountRef::Named(named("u", "h")),
                auth: Auth::Password("y".into()),
            }
        );
    }

    #[test]
    fn grants_revokes_drops_and_shows() {
        assert_eq!(
            ok("GRANT ALL PRIVILEGES ON shop.* TO 'u'@'%', v"),
            AccountStatement::Grant {
                level: Level::Database("shop".into()),
                accounts: vec![named("u", "%"), named("v", "%")],
                usage_only: false,
            }
        );
        assert_eq!(
            ok("grant all on *.* to root@localhost with grant option"),
            AccountStatement::Grant {
                level: Level::All,
                accounts: vec![named("root", "localhost")],
                usage_only: false,
            }
        );
        assert_eq!(
            ok("GRANT USAGE ON * TO u"),
            AccountStatement::Grant {
                level: Level::Current,
                accounts: vec![named("u", "%")],
                usage_only: true,
            }
        );
        assert_eq!(
            ok("REVOKE ALL ON `my db`.* FROM 'u'@'h'"),
            AccountStatement::Revoke {
                level: Level::Database("my db".into()),
                accounts: vec![named("u", "h")],
            }
        );
        assert_eq!(
            ok("DROP USER IF EXISTS a, 'b'@'localhost'"),
            AccountStatement::DropUser {
                if_exists: true,
                accounts: vec![named("a", "%"), named("b", "localhost")],
            }
        );
        for (text, account) in [
            ("SHOW GRANTS", AccountRef::Current),
            ("SHOW GRANTS FOR CURRENT_USER", AccountRef::Current),
            ("show grants for current_user()", AccountRef::Current),
            ("SHOW GRANTS FOR USER()", AccountRef::Current),
            (
                "SHOW GRANTS FOR 'x'@'y'",
                AccountRef::Named(named("x", "y")),
            ),
        ] {
            assert_eq!(ok(text), AccountStatement::ShowGrants { account }, "{text}");
        }
    }

    #[test]
    fn what_shoal_lacks_is_refused_by_name() {
        for text in [
            "GRANT SELECT ON db.* TO u",
            "GRANT ALL ON db.t TO u",
            "GRANT ALL ON db.* TO u WITH GRANT OPTION",
            "GRANT ALL ON db.* TO u IDENTIFIED BY 'x'",
            "REVOKE INSERT ON db.* FROM u",
            "REVOKE ALL PRIVILEGES, GRANT OPTION FROM u",
            "CREATE USER u IDENTIFIED BY 'x' ACCOUNT LOCK",
            "CREATE USER u REQUIRE SSL",
            "CREATE USER u IDENTIFIED WITH ed25519 BY 'x'",
            "CREATE USER u IDENTIFIED WITH caching_sha2_password AS '$A$005$x'",
            "ALTER USER u ACCOUNT LOCK",
            "ALTER USER u PASSWORD EXPIRE",
            "RENAME USER a TO b",
            "SHOW GRANTS FOR u USING r",
        ] {
            assert_eq!(code(text), 1235, "{text}");
        }
    }

    #[test]
    fn syntax_errors_never_quote_a_string() {
        for text in [
            "CREATE USER",
            "CREATE USER 'u'@",
            "CREATE USER u IDENTIFIED BY",
            "CREATE USER u IDENTIFIED BY 'secret' 'more'",
            "CREATE USER u IDENTIFIED BY 'secret",
            "SET PASSWORD 'secret'",
            "SET PASSWORD = PASSWORD('secret'",
            "GRANT ALL ON TO u",
            "GRANT ALL ON *.x TO u",
            "GRANT ALL ON *.* u",
            "GRANT",
            "DROP USER u v",
            "SHOW GRANTS FOR CURRENT_USER('secret')",
            "GRANT ALL ON *.* TO 'secret' 'secret'",
        ] {
            match recognize(text) {
                Some(Err(e)) => {
                    assert_eq!(e.code, 1064, "{text}: {e}");
                    assert!(!e.message.contains("secret"), "{text}: {e}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_prefix_parses_or_fails_cleanly() {
        let text = "CREATE USER IF NOT EXISTS 'a'@'%' IDENTIFIED WITH mysql_native_password AS '*00', b@h IDENTIFIED BY 'x'; GRANT ALL PRIVILEGES ON `d`.* TO a, b WITH GRANT OPTION";
        for end in 0..=text.len() {
            if let Some(prefix) = text.get(..end) {
                let _ = recognize(prefix);
            }
        }
    }
}
