//! From a query string to statements: split at top-level `;` (quotes and
//! comments respected, by sqlparser's own tokenizer), then, per
//! statement, a small pre-router for the MySQL and NDB syntax sqlparser
//! does not take, then sqlparser (MySQL's dialect with MySQL's `XOR`
//! precedence, [`ShoalDialect`]).
//!
//! The pre-router works on tokens, never on raw text, so a keyword inside
//! a string or a comment is never touched:
//! - `... LOCK IN SHARE MODE` at the end of a SELECT becomes `FOR SHARE`;
//! - `ALTER TABLE t ... DROP KEY k` becomes `DROP INDEX k`;
//! - `ALTER TABLE ... REORGANIZE PARTITION` / `ADD PARTITION` / `PARTITION
//!   BY` / `COALESCE PARTITION` answer "not supported yet" (online
//!   reorganization comes later);
//! - `CREATE TABLE ... PARTITION BY KEY (cols) [PARTITIONS n]` is taken
//!   off the statement and returned beside it ([`Partitioning`]).
//!
//! Statements are split and parsed one at a time, so a syntax error in
//! the third statement of a string is reported after the first two ran,
//! as MySQL does.

use super::dialect::ShoalDialect;
use crate::outcome::SqlError;
use sqlparser::ast::Statement;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// `PARTITION BY KEY (columns) [PARTITIONS n]` of a CREATE TABLE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partitioning {
    /// The columns; empty: `KEY ()`, the primary key.
    pub key: Vec<String>,
    pub partitions: Option<u32>,
}

/// One statement, parsed, with its text (result column names are taken
/// from it).
#[derive(Debug)]
pub struct Parsed {
    pub statement: Statement,
    pub text: String,
    pub partitioning: Option<Partitioning>,
}

fn syntax(e: impl std::fmt::Display) -> SqlError {
    SqlError::syntax(format!("You have an error in your SQL syntax; {e}"))
}

/// A token with its byte range in the text.
struct Tok {
    token: Token,
    start: usize,
    end: usize,
}

/// Turns (line, column) locations, in characters, into byte offsets;
/// locations must be asked for in increasing order.
struct Offsets<'a> {
    text: &'a str,
    line: u64,
    col: u64,
    byte: usize,
}

impl<'a> Offsets<'a> {
    fn new(text: &'a str) -> Self {
        Offsets {
            text,
            line: 1,
            col: 1,
            byte: 0,
        }
    }

    fn at(&mut self, loc: Location) -> usize {
        while (self.line, self.col) < (loc.line, loc.column) && self.byte < self.text.len() {
            let ch = self.text[self.byte..]
                .chars()
                .next()
                .expect("not at the end");
            self.byte += ch.len_utf8();
            if ch == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
        }
        self.byte
    }
}

/// The text an AST node came from (by its span), if the span is known.
pub fn slice(text: &str, span: sqlparser::tokenizer::Span) -> Option<&str> {
    if span.start.line == 0 || span.end.line == 0 {
        return None;
    }
    let mut offsets = Offsets::new(text);
    let start = offsets.at(span.start);
    let end = offsets.at(span.end);
    text.get(start..end).filter(|s| !s.is_empty())
}

fn tokens(text: &str) -> Result<Vec<Tok>, SqlError> {
    let dialect = ShoalDialect;
    let raw: Vec<TokenWithSpan> = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(syntax)?;
    let mut offsets = Offsets::new(text);
    let mut out = Vec::with_capacity(raw.len());
    for t in raw {
        let start = offsets.at(t.span.start);
        let end = offsets.at(t.span.end);
        out.push(Tok {
            token: t.token,
            start,
            end,
        });
    }
    Ok(out)
}

fn is_blank(t: &Token) -> bool {
    matches!(t, Token::Whitespace(_) | Token::EOF)
}

/// Splits `sql` at top-level semicolons into statement texts (blank ones
/// dropped). An empty query answers MySQL's 1065.
pub fn split(sql: &str) -> Result<Vec<String>, SqlError> {
    let toks = if sql.contains(';') {
        tokens(sql)?
    } else {
        Vec::new()
    };
    let mut pieces = Vec::new();
    let mut start = 0;
    for t in toks.iter().filter(|t| t.token == Token::SemiColon) {
        pieces.push(&sql[start..t.start]);
        start = t.end;
    }
    pieces.push(&sql[start..]);
    let pieces: Vec<String> = pieces
        .into_iter()
        .filter(|p| !is_blank_text(p))
        .map(str::to_string)
        .collect();
    if pieces.is_empty() {
        return Err(SqlError::new(1065, "42000", "Query was empty"));
    }
    Ok(pieces)
}

/// True for text that holds no token but whitespace and comments.
fn is_blank_text(text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() {
        return true;
    }
    // Without a comment's first character, something else is there (most
    // statements end here, untokenized).
    if !text.starts_with(['-', '#', '/']) {
        return false;
    }
    // A comment alone is blank; a tokenizer error is not (parse reports it).
    match tokens(text) {
        Ok(t) => t.iter().all(|t| is_blank(&t.token)),
        Err(_) => false,
    }
}

fn keyword(t: &Token) -> Option<Keyword> {
    match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

fn word_is(t: &Token, text: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text))
}

/// Most operators in one statement. sqlparser builds a chain like
/// `1+1+1+...` in a loop but walks (and drops) the tree recursively, so a
/// long enough chain would overflow the stack and take the whole node
/// down; past this the statement is refused before it is parsed.
pub const OPERATORS_MAX: usize = 2000;

/// Refuses a statement with more than [`OPERATORS_MAX`] operators.
fn check_operators(toks: &[TokenWithSpan]) -> Result<(), SqlError> {
    let operators = toks
        .iter()
        .filter(|t| match &t.token {
            Token::Word(w) => matches!(
                w.keyword,
                Keyword::AND
                    | Keyword::OR
                    | Keyword::XOR
                    | Keyword::NOT
                    | Keyword::IS
                    | Keyword::LIKE
                    | Keyword::BETWEEN
                    | Keyword::IN
                    | Keyword::DIV
                    | Keyword::MOD
                    | Keyword::REGEXP
                    | Keyword::RLIKE
            ),
            Token::Whitespace(_)
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::Comma
            | Token::LParen
            | Token::RParen
            | Token::Period
            | Token::SemiColon
            | Token::EOF => false,
            _ => true,
        })
        .count();
    if operators > OPERATORS_MAX {
        return Err(SqlError::new(
            1064,
            "42000",
            format!("the statement has {operators} operators; at most {OPERATORS_MAX} are allowed in one statement (split it)"),
        ));
    }
    Ok(())
}

/// Pre-routes and parses one statement's text. The text is tokenized
/// once: the operator count and the parser share the tokens (unless the
/// pre-router rewrote the text).
pub fn parse(text: &str) -> Result<Parsed, SqlError> {
    let dialect = ShoalDialect;
    let toks = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| syntax(sqlparser::parser::ParserError::from(e)))?;
    check_operators(&toks)?;
    let (rewritten, partitioning) = preroute(text, &toks)?;
    let mut parser = match &rewritten {
        Some(t) => Parser::new(&dialect).try_with_sql(t).map_err(syntax)?,
        None => Parser::new(&dialect).with_tokens_with_locations(toks),
    };
    let mut statements = parser.parse_statements().map_err(syntax)?;
    let text = rewritten.unwrap_or_else(|| text.to_string());
    match statements.pop() {
        Some(statement) if statements.is_empty() => Ok(Parsed {
            statement,
            text,
            partitioning,
        }),
        None => Err(SqlError::new(1065, "42000", "Query was empty")),
        Some(_) => Err(syntax("one statement expected")),
    }
}

/// `SET …, NAMES x [COLLATE y], …` (Connector/J sends `SET
/// sql_mode=…,NAMES utf8mb4` at connect): each `NAMES` item of a list of
/// several becomes the assignments it stands for in MySQL
/// (`character_set_client`, `_connection`, `_results`, and
/// `collation_connection`). `None` when there is nothing to rewrite (a
/// lone `SET NAMES` sqlparser takes as it is).
fn names_in_set_list(text: &str, toks: &[&Tok]) -> Option<String> {
    // Items: runs of tokens between top-level commas, after SET.
    let mut items: Vec<&[&Tok]> = Vec::new();
    let (mut depth, mut start) = (0i32, 1usize);
    for (i, t) in toks.iter().enumerate().skip(1) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                items.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&toks[start.min(toks.len())..]);
    if items.len() < 2 {
        return None;
    }
    let value = |t: &Tok| match &t.token {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        _ => None,
    };
    let mut out = String::new();
    let mut at = 0;
    let mut changed = false;
    for item in items {
        let Some(head) = item.first() else { continue };
        if !word_is(&head.token, "NAMES") {
            continue;
        }
        let charset = item.get(1).and_then(|t| value(t))?;
        let collation = match item.get(2) {
            None => None,
            Some(t) if word_is(&t.token, "COLLATE") => Some(item.get(3).and_then(|t| value(t))?),
            Some(_) => return None, // the parser reports it
        };
        let last = item.last()?;
        let quoted = |v: &str| format!("'{}'", v.replace('\'', "''"));
        let mut assign = [
            "character_set_client",
            "character_set_connection",
            "character_set_results",
        ]
        .iter()
        .map(|var| format!("{var} = {}", quoted(&charset)))
        .collect::<Vec<_>>();
        if let Some(c) = collation {
            assign.push(format!("collation_connection = {}", quoted(&c)));
        }
        out.push_str(&text[at..head.start]);
        out.push_str(&assign.join(", "));
        at = last.end;
        changed = true;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[at..]);
    Some(out)
}

fn not_yet(what: &str) -> SqlError {
    SqlError::new(
        1235,
        "42000",
        format!(
            "This version of Shoal doesn't yet support '{what}': tables cannot be reorganized or repartitioned online yet"
        ),
    )
}

/// Rewrites what sqlparser does not take (see the module's list).
/// `None` for text to parse as it is.
fn preroute(
    text: &str,
    raw: &[TokenWithSpan],
) -> Result<(Option<String>, Option<Partitioning>), SqlError> {
    let has = |word: &str| raw.iter().any(|t| word_is(&t.token, word));
    let suspicious = has("LOCK")
        || has("PARTITION")
        || has("REORGANIZE")
        || (has("DROP") && has("KEY"))
        || has("NAMES");
    if !suspicious {
        return Ok((None, None));
    }
    let all = tokens(text)?;
    let toks: Vec<&Tok> = all.iter().filter(|t| !is_blank(&t.token)).collect();
    let kw = |i: usize| toks.get(i).and_then(|t| keyword(&t.token));
    let first = kw(0);
    // SET a = 1, NAMES x [COLLATE y]: sqlparser takes NAMES only alone.
    if first == Some(Keyword::SET) {
        return Ok((names_in_set_list(text, &toks), None));
    }
    // ALTER TABLE: partition operations are refused, DROP KEY renamed.
    if first == Some(Keyword::ALTER) && kw(1) == Some(Keyword::TABLE) {
        for (i, t) in toks.iter().enumerate() {
            if word_is(&t.token, "REORGANIZE") {
                return Err(not_yet("ALTER TABLE ... REORGANIZE PARTITION"));
            }
            if word_is(&t.token, "COALESCE")
                && toks
                    .get(i + 1)
                    .is_some_and(|n| word_is(&n.token, "PARTITION"))
            {
                return Err(not_yet("ALTER TABLE ... COALESCE PARTITION"));
            }
            if kw(i) == Some(Keyword::ADD)
                && toks
                    .get(i + 1)
                    .is_some_and(|n| word_is(&n.token, "PARTITION"))
            {
                return Err(not_yet("ALTER TABLE ... ADD PARTITION"));
            }
            if kw(i) == Some(Keyword::PARTITION)
                && toks
                    .get(i + 1)
                    .is_some_and(|n| keyword(&n.token) == Some(Keyword::BY))
            {
                return Err(not_yet("ALTER TABLE ... PARTITION BY"));
            }
        }
        let mut out = String::new();
        let mut at = 0;
        for i in 0..toks.len() {
            if kw(i) == Some(Keyword::DROP) && kw(i + 1) == Some(Keyword::KEY) {
                let key = toks[i + 1];
                out.push_str(&text[at..key.start]);
                out.push_str("INDEX");
                at = key.end;
            }
        }
        out.push_str(&text[at..]);
        return Ok((Some(out), None));
    }
    // SELECT ... LOCK IN SHARE MODE (at the end).
    let n = toks.len();
    if n >= 4
        && word_is(&toks[n - 4].token, "LOCK")
        && keyword(&toks[n - 3].token) == Some(Keyword::IN)
        && word_is(&toks[n - 2].token, "SHARE")
        && word_is(&toks[n - 1].token, "MODE")
    {
        let mut out = text[..toks[n - 4].start].to_string();
        out.push_str("FOR SHARE");
        out.push_str(&text[toks[n - 1].end..]);
        return Ok((Some(out), None));
    }
    // CREATE TABLE ... PARTITION BY KEY (cols) [PARTITIONS n]
    if first == Some(Keyword::CREATE) {
        let at = toks.iter().enumerate().position(|(i, t)| {
            keyword(&t.token) == Some(Keyword::PARTITION)
                && toks
                    .get(i + 1)
                    .is_some_and(|n| keyword(&n.token) == Some(Keyword::BY))
        });
        if let Some(p) = at {
            let bad =
                || SqlError::not_supported("PARTITION BY other than KEY (columns) [PARTITIONS n]");
            let mut i = p + 2;
            if word_is(&toks.get(i).ok_or_else(bad)?.token, "LINEAR") {
                i += 1;
            }
            if keyword(&toks.get(i).ok_or_else(bad)?.token) != Some(Keyword::KEY) {
                return Err(bad());
            }
            i += 1;
            if toks.get(i).map(|t| &t.token) != Some(&Token::LParen) {
                return Err(bad());
            }
            i += 1;
            let mut key = Vec::new();
            loop {
                match toks.get(i).map(|t| &t.token) {
                    Some(Token::RParen) => break,
                    Some(Token::Comma) => {}
                    Some(Token::Word(w)) => key.push(w.value.clone()),
                    _ => return Err(bad()),
                }
                i += 1;
            }
            i += 1;
            let mut partitions = None;
            if toks.get(i).is_some_and(|t| word_is(&t.token, "PARTITIONS")) {
                match toks.get(i + 1).map(|t| &t.token) {
                    Some(Token::Number(n, _)) => {
                        partitions = Some(n.parse::<u32>().map_err(|_| bad())?);
                    }
                    _ => return Err(bad()),
                }
                i += 2;
            }
            if i != toks.len() {
                return Err(bad());
            }
            let end = toks.last().expect("tokens").end;
            let mut out = text[..toks[p].start].to_string();
            out.push_str(&text[end..]);
            return Ok((Some(out), Some(Partitioning { key, partitions })));
        }
    }
    Ok((None, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An expression with every operator's operands in parentheses.
    fn shape(e: &sqlparser::ast::Expr) -> String {
        use sqlparser::ast::Expr;
        match e {
            Expr::BinaryOp { left, op, right } => {
                format!("({} {op} {})", shape(left), shape(right))
            }
            Expr::UnaryOp { op, expr } => format!("({op} {})", shape(expr)),
            Expr::Nested(e) => shape(e),
            other => other.to_string(),
        }
    }

    /// The shape of `SELECT x FROM t WHERE <condition>`'s condition.
    fn condition(condition: &str) -> String {
        use sqlparser::ast::SetExpr;
        let p = parse(&format!("SELECT x FROM t WHERE {condition}")).unwrap();
        let Statement::Query(q) = p.statement else {
            panic!("a query")
        };
        let SetExpr::Select(s) = *q.body else {
            panic!("a SELECT")
        };
        shape(s.selection.as_ref().expect("a WHERE"))
    }

    #[test]
    fn xor_binds_below_and_and_above_or_as_in_mysql() {
        assert_eq!(condition("ti > 0 XOR tu > 0"), "((ti > 0) XOR (tu > 0))");
        assert_eq!(condition("a AND b XOR c OR d"), "(((a AND b) XOR c) OR d)");
        assert_eq!(condition("a OR b XOR c AND d"), "(a OR (b XOR (c AND d)))");
        assert_eq!(condition("NOT a XOR b"), "((NOT a) XOR b)");
        assert_eq!(condition("a XOR b XOR c"), "((a XOR b) XOR c)");
        assert_eq!(
            condition("a = 1 XOR b BETWEEN 1 AND 2"),
            "((a = 1) XOR b BETWEEN 1 AND 2)"
        );
        assert_eq!(condition("a XOR b IS NULL"), "(a XOR b IS NULL)");
        // The other operators keep their ranks.
        assert_eq!(
            condition("a + 1 > 2 AND b OR c"),
            "((((a + 1) > 2) AND b) OR c)"
        );
        assert_eq!(condition("a DIV 2 = 1"), "((a DIV 2) = 1)");
    }

    #[test]
    fn a_statement_with_too_many_operators_is_refused_before_parsing() {
        let long = format!("SELECT 1{}", "+1".repeat(100_000));
        let e = parse(&long).unwrap_err();
        assert_eq!(e.code, 1064);
        assert!(e.message.contains("operators"), "{}", e.message);
        assert!(parse(&format!("SELECT 1{}", "+1".repeat(100))).is_ok());
    }

    #[test]
    fn splits_at_top_level_semicolons_only() {
        let p = split("SELECT 1; SELECT ';' ; -- c;\n SELECT `a;b`;;  ").unwrap();
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[1].trim(), "SELECT ';'");
        assert_eq!(split("  ").unwrap_err().code, 1065);
        assert_eq!(split("/* x */").unwrap_err().code, 1065);
        assert_eq!(
            split("SELECT 'héllo'; SELECT 2").unwrap()[0],
            "SELECT 'héllo'"
        );
    }

    #[test]
    fn names_in_a_set_list_become_their_assignments() {
        let p =
            parse("set sql_mode=CONCAT(@@sql_mode,',STRICT_TRANS_TABLES'),NAMES utf8mb4").unwrap();
        assert_eq!(
            p.text,
            "set sql_mode=CONCAT(@@sql_mode,',STRICT_TRANS_TABLES'),character_set_client = 'utf8mb4', character_set_connection = 'utf8mb4', character_set_results = 'utf8mb4'"
        );
        let p = parse("SET NAMES 'latin1' COLLATE latin1_bin, autocommit = 1").unwrap();
        assert!(
            p.text.starts_with("SET character_set_client = 'latin1'"),
            "{}",
            p.text
        );
        assert!(
            p.text
                .contains("collation_connection = 'latin1_bin', autocommit = 1"),
            "{}",
            p.text
        );
        // Alone, and inside strings, nothing changes.
        assert_eq!(
            parse("SET NAMES utf8mb4").unwrap().text,
            "SET NAMES utf8mb4"
        );
        assert_eq!(
            parse("SET @a = 'NAMES x', @b = 1").unwrap().text,
            "SET @a = 'NAMES x', @b = 1"
        );
    }

    #[test]
    fn preroutes_what_sqlparser_lacks() {
        let p = parse("SELECT * FROM t WHERE a = 'LOCK IN SHARE MODE' LOCK IN SHARE MODE").unwrap();
        assert!(
            p.statement.to_string().ends_with("FOR SHARE"),
            "{}",
            p.statement
        );
        assert!(p.statement.to_string().contains("'LOCK IN SHARE MODE'"));
        let e = parse("ALTER TABLE t1 ALGORITHM=INPLACE, REORGANIZE PARTITION").unwrap_err();
        assert_eq!(e.code, 1235);
        assert!(e.message.contains("REORGANIZE PARTITION"), "{}", e.message);
        let p = parse("ALTER TABLE t DROP KEY k").unwrap();
        assert_eq!(p.statement.to_string(), "ALTER TABLE t DROP INDEX k");
        let p = parse(
            "CREATE TABLE t (a INT PRIMARY KEY) ENGINE=ndb PARTITION BY KEY (a) PARTITIONS 4",
        )
        .unwrap();
        assert_eq!(
            p.partitioning,
            Some(Partitioning {
                key: vec!["a".into()],
                partitions: Some(4)
            })
        );
        assert_eq!(parse("SELEC 1").unwrap_err().code, 1064);
    }
}
