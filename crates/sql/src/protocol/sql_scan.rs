//! A lexical scan of statement text, only as deep as the protocol needs:
//! where the `?` placeholders are, and whether a query holds more than
//! one statement. Quoted strings (`'…'`, `"…"`, with backslash escapes and
//! doubled quotes), quoted names (`` `…` ``) and comments (`#`, `-- `,
//! `/* */`) are skipped; MySQL's executable comments `/*! … */` are code.
//!
//! Invariant: the scan is a single pass with no recursion, and an
//! unterminated quote or comment simply runs to the end of the text.

/// Calls `visit(offset, byte)` for each byte of code (outside quotes and
/// comments), in order.
fn scan_code(sql: &[u8], mut visit: impl FnMut(usize, u8)) {
    let mut i = 0;
    while let Some(&c) = sql.get(i) {
        let next = sql.get(i + 1).copied();
        i = match (c, next) {
            (b'\'' | b'"' | b'`', _) => skip_quoted(sql, i + 1, c),
            (b'#', _) => skip_line(sql, i),
            (b'-', Some(b'-')) if whitespace_or_end(sql, i + 2) => skip_line(sql, i),
            (b'/', Some(b'*')) if sql.get(i + 2) != Some(&b'!') => skip_block_comment(sql, i + 2),
            _ => {
                visit(i, c);
                i + 1
            }
        };
    }
}

/// Whether the character at `i` is whitespace as sqlparser (which splits
/// statements) judges it — any Unicode whitespace, vertical tab and
/// no-break space included — or the text ends there. Judging otherwise
/// would let `--` start a comment for one and not the other, and a second
/// statement hide from the multi-statements check.
fn whitespace_or_end(sql: &[u8], i: usize) -> bool {
    let rest = sql.get(i..).unwrap_or_default();
    if rest.is_empty() {
        return true;
    }
    (1..=rest.len().min(4))
        .find_map(|n| std::str::from_utf8(&rest[..n]).ok())
        .and_then(|s| s.chars().next())
        .is_some_and(char::is_whitespace)
}

/// The offset just past the quote that closes the one opened before `i`.
fn skip_quoted(sql: &[u8], mut i: usize, quote: u8) -> usize {
    while let Some(&c) = sql.get(i) {
        if c == b'\\' && quote != b'`' {
            i += 2;
        } else if c == quote {
            if sql.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    sql.len()
}

fn skip_line(sql: &[u8], i: usize) -> usize {
    sql.get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'\n'))
        .map_or(sql.len(), |n| i + n + 1)
}

fn skip_block_comment(sql: &[u8], i: usize) -> usize {
    sql.get(i..)
        .and_then(|rest| rest.windows(2).position(|w| w == b"*/"))
        .map_or(sql.len(), |n| i + n + 2)
}

/// The byte offsets of the `?` placeholders.
pub(crate) fn placeholders(sql: &str) -> Vec<usize> {
    let mut found = Vec::new();
    scan_code(sql.as_bytes(), |i, c| {
        if c == b'?' {
            found.push(i);
        }
    });
    found
}

/// Whether `sql` holds a statement after a `;` (a trailing `;`, blanks and
/// comments do not count).
pub(crate) fn has_several_statements(sql: &str) -> bool {
    let mut separated = false;
    let mut several = false;
    scan_code(sql.as_bytes(), |_, c| {
        if c == b';' {
            separated = true;
        } else if separated && !c.is_ascii_whitespace() {
            several = true;
        }
    });
    several
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_outside_quotes_and_comments() {
        assert_eq!(placeholders("SELECT ?, ?"), vec![7, 10]);
        assert_eq!(placeholders("SELECT '?', \"?\", `?`, ?"), vec![22]);
        assert_eq!(placeholders("SELECT 'it''s ?', 'a\\'?', ?"), vec![26]);
        assert_eq!(placeholders("SELECT ? # ?\n, ?"), vec![7, 15]);
        assert_eq!(placeholders("SELECT ? -- ?\n, ?"), vec![7, 16]);
        assert_eq!(placeholders("SELECT 1--?"), vec![10]);
        assert_eq!(placeholders("SELECT /* ? */ ?"), vec![15]);
        assert_eq!(placeholders("SELECT /*! ? */"), vec![11]);
        assert_eq!(placeholders("SELECT 'unterminated ?"), Vec::<usize>::new());
        assert_eq!(
            placeholders("SELECT /* unterminated ?"),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn several_statements() {
        assert!(!has_several_statements("SELECT 1"));
        assert!(!has_several_statements("SELECT 1;"));
        assert!(!has_several_statements("SELECT 1 ;  \n"));
        assert!(!has_several_statements("SELECT 1; -- done"));
        assert!(!has_several_statements("SELECT ';x'"));
        assert!(has_several_statements("SELECT 1; SELECT 2"));
        assert!(has_several_statements("SELECT 1;;x"));
    }

    #[test]
    fn arbitrary_bytes_do_not_panic() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let alphabet = b"'\"`\\#-/*!?; \nab";
        for _ in 0..2000 {
            let len = (state % 40) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize] as char
                })
                .collect();
            for i in placeholders(&text) {
                assert_eq!(text.as_bytes()[i], b'?');
            }
            let _ = has_several_statements(&text);
        }
    }
}
