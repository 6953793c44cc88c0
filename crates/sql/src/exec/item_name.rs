//! The name MySQL gives a select item without an alias: its text as
//! written (`COUNT(*)`, `SUM(k)+1`), or a column's name.

use super::split::slice;
use sqlparser::ast::{Expr, Spanned};

/// The name MySQL gives an unaliased select item: its text as written.
pub fn item_name(text: &str, e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) if !parts[0].value.starts_with('@') => {
            parts.last().map(|p| p.value.clone()).unwrap_or_default()
        }
        _ => slice(text, e.span())
            .and_then(|s| {
                let start = s.as_ptr() as usize - text.as_ptr() as usize;
                text.get(start..through_calls(text.as_bytes(), start, start + s.len()))
            })
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    }
}

/// Where the text of an expression spanning `start..end` of `text` really
/// ends: sqlparser's span of a function call stops at its last argument
/// (at its name for `COUNT(*)`), so the call's parentheses are taken in
/// (quotes respected).
fn through_calls(text: &[u8], start: usize, mut end: usize) -> usize {
    // Scans from `from` until the parentheses open before it (`depth`)
    // close; the end of the text if they never do.
    let close = |from: usize, mut depth: i64| -> usize {
        let mut quote: Option<u8> = None;
        let mut i = from;
        while i < text.len() && depth > 0 {
            match (quote, text[i]) {
                (Some(_), b'\\') => i += 1,
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, c @ (b'\'' | b'"' | b'`')) => quote = Some(c),
                (None, b'(') => depth += 1,
                (None, b')') => depth -= 1,
                (None, _) => {}
            }
            i += 1;
        }
        i.min(text.len())
    };
    let mut quote: Option<u8> = None;
    let mut depth = 0i64;
    for &c in &text[start..end] {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c @ (b'\'' | b'"' | b'`')) => quote = Some(c),
            (None, b'(') => depth += 1,
            (None, b')') => depth -= 1,
            (None, _) => {}
        }
    }
    if depth > 0 {
        end = close(end, depth);
    } else if end > start && (text[end - 1].is_ascii_alphanumeric() || text[end - 1] == b'_') {
        // A call's name alone: its arguments follow.
        let mut next = end;
        while next < text.len() && text[next].is_ascii_whitespace() {
            next += 1;
        }
        if text.get(next) == Some(&b'(') {
            end = close(next + 1, 1);
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(sql: &str) -> String {
        let text = format!("SELECT {sql} FROM t");
        let parsed = super::super::split::parse(&text).unwrap();
        let sqlparser::ast::Statement::Query(q) = &parsed.statement else {
            panic!("a query")
        };
        let sqlparser::ast::SetExpr::Select(s) = q.body.as_ref() else {
            panic!("a select")
        };
        let sqlparser::ast::SelectItem::UnnamedExpr(e) = &s.projection[0] else {
            panic!("an expression")
        };
        item_name(&parsed.text, e)
    }

    #[test]
    fn items_are_named_by_their_text() {
        for sql in [
            "COUNT(*)",
            "count( * )",
            "SUM(k)+1",
            "1+COUNT(*)",
            "COUNT(DISTINCT a, b)",
            "CONCAT(a, ')(', b)",
            "k IN (1, 2)",
            "AVG(k)",
            "k",
        ] {
            assert_eq!(name_of(sql), sql);
        }
    }
}
