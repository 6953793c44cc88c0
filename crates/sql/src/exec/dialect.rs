//! The SQL dialect Shoal parses with: sqlparser's MySQL dialect with
//! MySQL's precedence for the `XOR` keyword.
//!
//! sqlparser ranks `XOR` above the comparisons (its `Precedence::Xor`
//! serves the bitwise operators of other dialects), so `a > 0 XOR b > 0`
//! would parse as `a > (0 XOR b) > 0`. MySQL ranks the logical `XOR`
//! between `AND` and `OR`: `a AND b XOR c OR d` is
//! `((a AND b) XOR c) OR d`, and `NOT a XOR b` is `(NOT a) XOR b`.
//!
//! Invariant: every other answer is [`MySqlDialect`]'s. sqlparser asks
//! `dialect_of!(… is MySqlDialect)` in places, which compares
//! [`Dialect::dialect`]'s `TypeId`, so this dialect answers with
//! MySqlDialect's; each of the methods MySqlDialect overrides (sqlparser
//! is pinned, `=0.63.0`) is forwarded, and a test compares the two
//! dialects' parses of a sample of statements.

use sqlparser::ast::{ColumnOption, Expr, Statement};
use sqlparser::dialect::{Dialect, MySqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;
use std::any::TypeId;

/// sqlparser's MySQL dialect with MySQL's precedence for `XOR`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShoalDialect;

/// The MySQL dialect everything but `XOR`'s precedence comes from.
const MYSQL: MySqlDialect = MySqlDialect {};

impl Dialect for ShoalDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match &parser.peek_token_ref().token {
            Token::Word(w) if w.keyword == Keyword::XOR => Some(Ok(self.xor_precedence())),
            _ => MYSQL.get_next_precedence(parser),
        }
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        MYSQL.prec_value(prec)
    }

    fn prec_unknown(&self) -> u8 {
        MYSQL.prec_unknown()
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        MYSQL.is_identifier_part(ch)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        MYSQL.identifier_quote_style(identifier)
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        MYSQL.supports_string_literal_backslash_escape()
    }

    fn supports_string_literal_concatenation(&self) -> bool {
        MYSQL.supports_string_literal_concatenation()
    }

    fn ignores_wildcard_escapes(&self) -> bool {
        MYSQL.ignores_wildcard_escapes()
    }

    fn supports_numeric_prefix(&self) -> bool {
        MYSQL.supports_numeric_prefix()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        MYSQL.supports_bitwise_shift_operators()
    }

    fn supports_multiline_comment_hints(&self) -> bool {
        MYSQL.supports_multiline_comment_hints()
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        MYSQL.parse_infix(parser, expr, precedence)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        MYSQL.parse_statement(parser)
    }

    fn parse_column_option(
        &self,
        parser: &mut Parser,
    ) -> Result<Option<Result<Option<ColumnOption>, ParserError>>, ParserError> {
        MYSQL.parse_column_option(parser)
    }

    fn require_interval_qualifier(&self) -> bool {
        MYSQL.require_interval_qualifier()
    }

    fn supports_limit_comma(&self) -> bool {
        MYSQL.supports_limit_comma()
    }

    fn supports_create_table_select(&self) -> bool {
        MYSQL.supports_create_table_select()
    }

    fn supports_insert_set(&self) -> bool {
        MYSQL.supports_insert_set()
    }

    fn supports_user_host_grantee(&self) -> bool {
        MYSQL.supports_user_host_grantee()
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        MYSQL.is_table_factor_alias(explicit, kw, parser)
    }

    fn supports_table_hints(&self) -> bool {
        MYSQL.supports_table_hints()
    }

    fn requires_single_line_comment_whitespace(&self) -> bool {
        MYSQL.requires_single_line_comment_whitespace()
    }

    fn supports_match_against(&self) -> bool {
        MYSQL.supports_match_against()
    }

    fn supports_select_modifiers(&self) -> bool {
        MYSQL.supports_select_modifiers()
    }

    fn supports_set_names(&self) -> bool {
        MYSQL.supports_set_names()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        MYSQL.supports_comma_separated_set_assignments()
    }

    fn supports_update_order_by(&self) -> bool {
        MYSQL.supports_update_order_by()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        MYSQL.supports_data_type_signed_suffix()
    }

    fn supports_cross_join_constraint(&self) -> bool {
        MYSQL.supports_cross_join_constraint()
    }

    fn supports_double_ampersand_operator(&self) -> bool {
        MYSQL.supports_double_ampersand_operator()
    }

    fn supports_binary_kw_as_cast(&self) -> bool {
        MYSQL.supports_binary_kw_as_cast()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        MYSQL.supports_comment_optimizer_hint()
    }

    fn supports_constraint_keyword_without_name(&self) -> bool {
        MYSQL.supports_constraint_keyword_without_name()
    }

    fn supports_key_column_option(&self) -> bool {
        MYSQL.supports_key_column_option()
    }

    fn supports_group_by_with_modifier(&self) -> bool {
        MYSQL.supports_group_by_with_modifier()
    }

    fn supports_left_associative_joins_without_parens(&self) -> bool {
        MYSQL.supports_left_associative_joins_without_parens()
    }
}

impl ShoalDialect {
    /// `XOR`'s binding power: below `AND` (and so below NOT and the
    /// comparisons), above `OR`, as in MySQL's operator precedence table.
    fn xor_precedence(&self) -> u8 {
        let (and, or) = (
            self.prec_value(Precedence::And),
            self.prec_value(Precedence::Or),
        );
        assert!(and > or + 1, "room between OR and AND");
        (and + or) / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statements that lean on what MySqlDialect does differently from
    /// the generic one: ShoalDialect must parse them to the same trees.
    const SAMPLE: &[&str] = &[
        "SELECT `a b`, c DIV 2, d MOD 3, e && f, 'it\\'s' FROM `t` AS x LIMIT 1, 2",
        "SELECT a FROM t x WHERE b = 1 AND c IS NOT NULL ORDER BY a DESC LIMIT 5",
        "SELECT a FROM t1 JOIN t2 USING (id) STRAIGHT_JOIN t3 ON t3.id = t1.id",
        "SELECT BINARY 'a', CAST(1 AS SIGNED), CAST('1' AS UNSIGNED INTEGER)",
        "SELECT @@version, @@session.autocommit, 1 << 2, 5 >> 1, a REGEXP 'x'",
        "SELECT /*+ NO_INDEX(t) */ HIGH_PRIORITY DISTINCT a FROM t FOR UPDATE",
        "INSERT INTO t SET a = 1, b = 'x'",
        "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a) + 1",
        "UPDATE t SET a = a + 1 WHERE b > 0 ORDER BY a LIMIT 10",
        "CREATE TABLE t (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT KEY, \
         v VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, CONSTRAINT UNIQUE (v)) \
         ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4",
        "CREATE TABLE c SELECT * FROM t",
        "LOCK TABLES t READ",
        "UNLOCK TABLES",
        "SET NAMES utf8mb4",
        "SET a = 1, @b = 2",
        "GRANT ALL ON db.* TO 'u'@'localhost'",
        "SELECT a FROM t GROUP BY a WITH ROLLUP",
        "SELECT 'a' 'b', x'4142', -- c\n 1",
    ];

    #[test]
    fn parses_as_mysql_does_but_for_xor() {
        for sql in SAMPLE {
            let mysql = Parser::parse_sql(&MYSQL, sql).map(|s| format!("{s:?}"));
            let shoal = Parser::parse_sql(&ShoalDialect, sql).map(|s| format!("{s:?}"));
            match (mysql, shoal) {
                (Ok(m), Ok(s)) => assert_eq!(m, s, "{sql}"),
                (Err(m), Err(s)) => assert_eq!(m.to_string(), s.to_string(), "{sql}"),
                (m, s) => panic!("{sql}: MySqlDialect {m:?}, ShoalDialect {s:?}"),
            }
        }
        // sqlparser's own `dialect_of!(… is MySqlDialect)` checks hold.
        let dialect: &dyn Dialect = &ShoalDialect;
        assert!(dialect.is::<MySqlDialect>());
    }
}
