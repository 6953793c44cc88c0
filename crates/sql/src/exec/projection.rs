//! The columns a SELECT reads: only those its text names (plus the
//! primary key and the columns of the index it scans), so that a query
//! like sysbench's `SELECT c FROM t WHERE id BETWEEN …` does not carry
//! every other column of each row from the data nodes and decode it.
//!
//! The set is found on the statement's tree, by name, before anything is
//! compiled: every identifier of the query that names a column of the
//! table counts (an alias or a variable that happens to share a column's
//! name only adds a column, never loses one); `*` and `t.*` read every
//! column. Columns left out read as NULL in the row vectors the executor
//! evaluates, so a column the compiled statement used but this set missed
//! would be a wrong answer: the set errs on the side of more.

use super::plan::{Access, Plan};
use shoal_types::TableDef;
use sqlparser::ast::{visit_expressions, Expr, Query, SelectItem, SetExpr};
use std::collections::BTreeSet;
use std::ops::ControlFlow;

/// The column ids `query` needs of `def` read, in id order; `None` for
/// every column.
pub fn needed_columns(query: &Query, def: &TableDef, plan: &Plan) -> Option<Vec<u16>> {
    if let SetExpr::Select(select) = query.body.as_ref() {
        let everything = select.projection.iter().any(|item| {
            matches!(
                item,
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
            )
        });
        if everything {
            return None;
        }
    } else {
        return None;
    }
    let mut named: BTreeSet<u16> = BTreeSet::new();
    let mut note = |name: &str| {
        if let Some(id) = def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
        {
            named.insert(id as u16);
        }
    };
    let _ = visit_expressions(query, |e| {
        match e {
            Expr::Identifier(ident) => note(&ident.value),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last() {
                    note(&last.value);
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    named.extend(def.primary_key.iter().copied());
    if let Access::IndexScan { index, .. } = &plan.access {
        if let Some(ix) = def.indexes.iter().find(|i| &i.name == index) {
            named.extend(ix.columns.iter().copied());
        }
    }
    (named.len() < def.columns.len()).then(|| named.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::split::parse;
    use shoal_types::{ColumnDef, ColumnType, IndexDef};
    use sqlparser::ast::Statement;

    fn table() -> TableDef {
        let mut def = TableDef::new(
            "t",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }),
                ColumnDef::new("k", ColumnType::Int { unsigned: false }),
                ColumnDef::new("c", ColumnType::VarChar(120)),
                ColumnDef::new("pad", ColumnType::VarChar(60)),
            ],
            &["id"],
        )
        .expect("a valid table");
        def.indexes.push(IndexDef {
            name: "k_1".into(),
            columns: vec![1],
            dropped: false,
        });
        def
    }

    fn needed(sql: &str, access: Access) -> Option<Vec<u16>> {
        let parsed = parse(sql).expect("parses");
        let Statement::Query(q) = &parsed.statement else {
            panic!("a query")
        };
        let plan = Plan {
            access,
            filter: None,
            ordered: None,
            exact: false,
        };
        needed_columns(q, &table(), &plan)
    }

    #[test]
    fn only_named_columns_the_key_and_the_scanned_index() {
        let full = Access::FullScan;
        assert_eq!(
            needed("SELECT c FROM t WHERE id = 1", full.clone()),
            Some(vec![0, 2])
        );
        assert_eq!(
            needed(
                "SELECT SUM(K) FROM t WHERE id BETWEEN 1 AND 9",
                full.clone()
            ),
            Some(vec![0, 1])
        );
        assert_eq!(
            needed("SELECT DISTINCT t.c FROM t ORDER BY c", full.clone()),
            Some(vec![0, 2])
        );
        assert_eq!(
            needed("SELECT COUNT(*) FROM t WHERE pad LIKE 'x%'", full.clone()),
            Some(vec![0, 3])
        );
        let by_k = Access::IndexScan {
            index: "k_1".into(),
            low: std::ops::Bound::Unbounded,
            high: std::ops::Bound::Unbounded,
        };
        assert_eq!(
            needed("SELECT c FROM t WHERE k > 3", by_k),
            Some(vec![0, 1, 2])
        );
        // An alias or a variable named like a column only adds it.
        assert_eq!(
            needed("SELECT id AS pad FROM t ORDER BY pad", full.clone()),
            Some(vec![0, 3])
        );
        // Everything.
        assert_eq!(needed("SELECT * FROM t", full.clone()), None);
        assert_eq!(needed("SELECT t.* FROM t", full.clone()), None);
        assert_eq!(needed("SELECT id, k, c, pad FROM t", full), None);
    }
}
