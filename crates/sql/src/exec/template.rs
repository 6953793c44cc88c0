//! Prepared statements kept parsed: a connection parses a prepared
//! statement's text once, `?` placeholders and all, and each execution
//! puts its parameters into a copy of that tree instead of splicing them
//! into the text and parsing it again (tokenizing and parsing were the
//! largest share of the SQL node's own work on short statements).
//!
//! The result must be exactly what parsing the spliced text gives: a
//! parameter arrives as the SQL literal that reads back as its value
//! ([`protocol::binary`](crate::protocol)), and here each literal form the
//! protocol produces becomes the node the parser would have built for it.
//! Anything else — a literal of another form, a placeholder the tree does
//! not hold as an expression, a statement other than a query or a row
//! change — answers `None`, and the caller splices and parses as before.
//! Substituted values carry their placeholder's span, so a result column
//! named after its expression is named by the prepared text (`?`), as
//! MySQL names it.
//!
//! Invariants: only texts of at most [`TEMPLATE_TEXT_MAX`] bytes are kept
//! parsed (a parsed tree is many times its text; a longer one is spliced
//! and parsed at each execution, and not remembered); at most
//! [`TEMPLATES_MAX`] statements and [`TEMPLATE_TEXT_BYTES_MAX`] bytes of
//! their text are kept per connection (past either, the cache starts
//! over); an execution fills every placeholder of the tree exactly once,
//! or it is not used.

use super::split::{parse, Parsed};
use sqlparser::ast::{visit_expressions_mut, Expr, Statement, UnaryOperator, Value, ValueWithSpan};
use sqlparser::tokenizer::Span;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// Prepared statements kept per connection.
pub const TEMPLATES_MAX: usize = 256;
/// The longest prepared text kept parsed: its tree is many times its
/// text, so long texts (bulk inserts) are spliced each time instead.
pub const TEMPLATE_TEXT_MAX: usize = 16 << 10;
/// Bytes of prepared text kept per connection (the trees are a multiple
/// of it, so this keeps a connection's cache to a few MiB at most).
pub const TEMPLATE_TEXT_BYTES_MAX: usize = 256 << 10;

/// A parsed prepared statement.
struct Template {
    parsed: Parsed,
    /// Each placeholder's location in the text → its parameter's index.
    slots: HashMap<(u64, u64), usize>,
}

/// One connection's parsed prepared statements, by their text.
#[derive(Default)]
pub struct Templates {
    /// `None`: the text cannot be kept parsed (it is spliced every time).
    by_text: HashMap<String, Option<Template>>,
    text_bytes: usize,
}

impl Templates {
    /// The statement `template` with `literals` in place of its `?`
    /// placeholders, or `None` if it must be spliced and parsed instead.
    pub fn bind(&mut self, template: &str, literals: &[String]) -> Option<Parsed> {
        if template.len() > TEMPLATE_TEXT_MAX {
            return None;
        }
        if !self.by_text.contains_key(template) {
            if self.by_text.len() >= TEMPLATES_MAX
                || self.text_bytes + template.len() > TEMPLATE_TEXT_BYTES_MAX
            {
                self.by_text.clear();
                self.text_bytes = 0;
            }
            self.text_bytes += template.len();
            self.by_text
                .insert(template.to_string(), Template::parse(template));
        }
        self.by_text.get(template)?.as_ref()?.bind(literals)
    }
}

impl Template {
    fn parse(text: &str) -> Option<Template> {
        let parsed = parse(text).ok()?;
        let kept = matches!(
            parsed.statement,
            Statement::Query(_)
                | Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
        );
        if !kept || parsed.partitioning.is_some() {
            return None;
        }
        // Located in the text the tree was parsed from (the pre-router
        // may have rewritten its tail, never a placeholder).
        let parsed_text = parsed.text.as_str();
        let slots = crate::protocol::sql_scan::placeholders(parsed_text)
            .into_iter()
            .enumerate()
            .map(|(index, offset)| (location_of(parsed_text, offset), index))
            .collect();
        Some(Template { parsed, slots })
    }

    fn bind(&self, literals: &[String]) -> Option<Parsed> {
        if literals.len() != self.slots.len() {
            return None;
        }
        let mut statement = self.parsed.statement.clone();
        let mut filled = vec![false; literals.len()];
        let flow = visit_expressions_mut(&mut statement, |e| {
            let Expr::Value(ValueWithSpan {
                value: Value::Placeholder(p),
                span,
            }) = e
            else {
                return ControlFlow::Continue(());
            };
            let at = (span.start.line, span.start.column);
            let Some(&index) = self.slots.get(&at).filter(|_| p == "?") else {
                return ControlFlow::Break(());
            };
            let (Some(literal), Some(done)) = (literals.get(index), filled.get_mut(index)) else {
                return ControlFlow::Break(());
            };
            match literal_expr(literal, *span) {
                Some(value) if !*done => {
                    *done = true;
                    *e = value;
                    ControlFlow::Continue(())
                }
                _ => ControlFlow::Break(()),
            }
        });
        if flow.is_break() || filled.contains(&false) {
            return None;
        }
        Some(Parsed {
            statement,
            text: self.parsed.text.clone(),
            partitioning: None,
        })
    }
}

/// The 1-based (line, column), in characters, of byte `offset` of `text`:
/// where sqlparser's spans put the token starting there.
fn location_of(text: &str, offset: usize) -> (u64, u64) {
    let before = text.get(..offset).unwrap_or(text);
    let line = 1 + before.matches('\n').count() as u64;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = 1 + before.get(line_start..).unwrap_or("").chars().count() as u64;
    (line, column)
}

/// The tree the parser builds for `literal`, one of the literal forms a
/// bound parameter takes: `NULL`, a number with an optional sign (`-7`,
/// `1.5`, `2.5e0`), a quoted string without backslashes, `X'…'`.
fn literal_expr(literal: &str, span: Span) -> Option<Expr> {
    let value = |value: Value| Expr::Value(ValueWithSpan { value, span });
    if literal == "NULL" {
        return Some(value(Value::Null));
    }
    if let Some(hex) = literal
        .strip_prefix("X'")
        .and_then(|h| h.strip_suffix('\''))
    {
        return hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| value(Value::HexStringLiteral(hex.to_string())));
    }
    if let Some(quoted) = literal
        .strip_prefix('\'')
        .and_then(|q| q.strip_suffix('\''))
    {
        // Quotes inside are doubled; a backslash would need the sql_mode's
        // escape rules (the protocol sends such values as X'…').
        if quoted.contains('\\') || quoted.replace("''", "").contains('\'') {
            return None;
        }
        return Some(value(Value::SingleQuotedString(quoted.replace("''", "'"))));
    }
    let (sign, digits) = match literal.as_bytes().first() {
        Some(b'-') => (Some(UnaryOperator::Minus), &literal[1..]),
        Some(b'+') => (Some(UnaryOperator::Plus), &literal[1..]),
        _ => (None, literal),
    };
    if !is_unsigned_number(digits) {
        return None;
    }
    let number = value(Value::Number(digits.to_string(), false));
    Some(match sign {
        None => number,
        Some(op) => Expr::UnaryOp {
            op,
            expr: Box::new(number),
        },
    })
}

/// `123`, `1.5`, `.5`, `2.5e0`, `1e-7`: what the tokenizer reads as one
/// number token.
fn is_unsigned_number(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()))
        && digits(whole)
        && fraction.is_none_or(digits);
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(template: &str, literals: &[&str]) -> String {
        let mut out = String::new();
        let mut start = 0;
        for (offset, literal) in crate::protocol::sql_scan::placeholders(template)
            .into_iter()
            .zip(literals)
        {
            out.push_str(&template[start..offset]);
            out.push_str(literal);
            start = offset + 1;
        }
        out.push_str(&template[start..]);
        out
    }

    /// Binding gives the tree parsing the spliced text gives.
    #[track_caller]
    fn same(template: &str, literals: &[&str]) {
        let owned: Vec<String> = literals.iter().map(|l| l.to_string()).collect();
        let bound = Templates::default()
            .bind(template, &owned)
            .unwrap_or_else(|| panic!("{template} with {literals:?} was not bound"));
        let text = spliced(template, literals);
        let parsed = parse(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(bound.statement, parsed.statement, "{text}");
        assert_eq!(bound.text, parse(template).expect("parses").text);
    }

    #[test]
    fn every_literal_form_binds_as_the_parser_reads_it() {
        let q = "SELECT c, ? FROM t WHERE id = ? AND k BETWEEN ? AND ?";
        for literal in [
            "NULL",
            "7",
            "-7",
            "+7",
            "18446744073709551615",
            "-9223372036854775808",
            "1.5",
            "-0.25",
            ".5",
            "2.5e0",
            "-1e-7",
            "1E+300",
            "'x'",
            "''",
            "'it''s'",
            "'? -- /*'",
            "X'00FF'",
            "X''",
        ] {
            same(q, &[literal, literal, "1", literal]);
        }
        same(
            "INSERT INTO t (id, k, c) VALUES (?, ?, ?), (?, 2, 'a?')",
            &["1", "-2", "'c'", "4"],
        );
        same("UPDATE t SET k = k + ? WHERE id = ?", &["1", "5"]);
        same("DELETE FROM t WHERE id IN (?, ?) LIMIT ?", &["1", "2", "3"]);
        same(
            "SELECT ?\n  + ?, '?'\nFROM t\nWHERE a = ? -- ?\n",
            &["1", "2", "3"],
        );
        same("SELECT * FROM t WHERE id = ? FOR UPDATE", &["9"]);
        same("SELECT c FROM t WHERE id = ? LOCK IN SHARE MODE", &["-9"]);
    }

    #[test]
    fn what_it_cannot_bind_exactly_is_spliced_instead() {
        let mut t = Templates::default();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // Literal forms the protocol never sends.
        for odd in [
            "'a\\'",
            "'a'b'",
            "X'GG'",
            "1.2.3",
            "e5",
            "DATE '2020-01-01'",
            "",
            "-",
        ] {
            assert!(t.bind("SELECT ?", &s(&[odd])).is_none(), "{odd}");
        }
        // The wrong number of parameters.
        assert!(t.bind("SELECT ?, ?", &s(&["1"])).is_none());
        // Statements kept as text.
        assert!(t.bind("SET @a = ?", &s(&["1"])).is_none());
        assert!(t.bind("SELEC ?", &s(&["1"])).is_none());
        // A quoted `?` is no placeholder.
        assert!(t.bind("SELECT '?'", &s(&[])).is_some());
    }

    #[test]
    fn the_cache_stays_within_its_bounds() {
        let mut t = Templates::default();
        for i in 0..TEMPLATES_MAX * 2 {
            let sql = format!("SELECT {i} + ?");
            assert!(t.bind(&sql, &["1".to_string()]).is_some());
            assert!(t.by_text.len() <= TEMPLATES_MAX);
        }
        // Up to the per-text limit a text is kept parsed; one byte more
        // and it is spliced, without pushing the kept ones out.
        let text = |len: usize| {
            let head = "SELECT ?, '";
            format!("{head}{}'", "x".repeat(len - head.len() - 1))
        };
        let at_limit = text(TEMPLATE_TEXT_MAX);
        assert_eq!(at_limit.len(), TEMPLATE_TEXT_MAX);
        assert!(t.bind(&at_limit, &["1".to_string()]).is_some());
        let kept = t.by_text.len();
        let over = text(TEMPLATE_TEXT_MAX + 1);
        assert!(t.bind(&over, &["1".to_string()]).is_none());
        assert!(!t.by_text.contains_key(&over));
        assert_eq!(t.by_text.len(), kept);
        // The total stays within its bound, texts at the limit and all.
        for i in 0..2 * TEMPLATE_TEXT_BYTES_MAX / TEMPLATE_TEXT_MAX {
            let sql = format!("{} /* {i} */", text(TEMPLATE_TEXT_MAX - 16));
            assert!(t.bind(&sql, &["1".to_string()]).is_some());
            assert!(t.text_bytes <= TEMPLATE_TEXT_BYTES_MAX);
        }
    }
}
