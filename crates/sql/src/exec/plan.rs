//! Access planning for one table: which rows to ask the data nodes for,
//! and which filter they run.
//!
//! From the WHERE's top-level conjuncts, in order of preference:
//! 1. every primary-key column fixed by `=` or `IN` → key reads (batched;
//!    the product of the `IN` lists at most `key_lookups_max`);
//! 2. every column of a unique index fixed → reads by unique key;
//! 3. an ordered index whose leading columns are fixed by `=` and/or whose
//!    next column has a range (`<`, `<=`, `>`, `>=`, `BETWEEN`) → an index
//!    scan with those bounds (most fixed columns first, then a range);
//! 4. otherwise a full scan (or an ordered index scan when the ORDER BY is
//!    an index's order).
//!
//! Every scan carries the WHERE's translatable part as a [`FilterExpr`]
//! the data nodes run. The SQL node evaluates the whole WHERE again on
//! every row it gets, so a filter only has to keep every row the WHERE
//! keeps: each translated leaf agrees with SQL whenever SQL's answer is
//! TRUE or FALSE (constants are converted to the column's type only when
//! exact, [`exact_for_column`]), and Kleene logic preserves that through
//! AND, OR and NOT; a conjunct that cannot be translated is left out of a
//! top-level AND (which only keeps more rows).
//!
//! Pushed filters compare VARCHAR values with string constants ignoring
//! trailing spaces, as the SQL node compares two strings (`utf8mb4_bin`
//! pads); a byte-string constant, which SQL compares byte by byte, is not
//! pushed against a VARCHAR ([`filter_constant`]). Known gap: keys and index bounds still match
//! them byte by byte, so a stored value with trailing spaces is not found
//! by `= 'value'` through a primary key, a unique key or an index range
//! (NDB normalizes keys; Shoal does not yet).

use super::expr::{truth, Cmp, Scalar};
use crate::sqltypes::{exact_for_column, is_text};
use shoal_types::filter::{CmpOp, FilterExpr, LIKE_PATTERN_MAX};
use shoal_types::{ColumnType, TableDef, Value};
use std::ops::Bound;

/// How a statement reaches its table's rows.
#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// Reads by primary key: each entry the key's values in key order.
    PrimaryKeys(Vec<Vec<Value>>),
    /// Reads through unique index `index`: each entry its columns' values.
    UniqueKeys {
        index: String,
        keys: Vec<Vec<Value>>,
    },
    /// A scan of ordered index `index` between two bounds (values of its
    /// leading columns).
    IndexScan {
        index: String,
        low: Bound<Vec<Value>>,
        high: Bound<Vec<Value>>,
    },
    FullScan,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub access: Access,
    /// The filter pushed to the data nodes (scans).
    pub filter: Option<FilterExpr>,
    /// `Some(descending)`: the scan returns rows in the ORDER BY's order
    /// (an ordered index scan, merged across fragments).
    pub ordered: Option<bool>,
    /// The WHERE is exactly the key equalities the key reads use: a row
    /// they find needs no further check (nor a read, for a blind write).
    pub exact: bool,
}

/// What the conjuncts say of one column.
#[derive(Clone, Debug, Default)]
struct Facts {
    /// Values it must equal one of (`Some(empty)`: none can match).
    eq: Option<Vec<Value>>,
    low: Option<(Value, bool)>,
    high: Option<(Value, bool)>,
}

fn flatten<'a>(s: &'a Scalar, out: &mut Vec<&'a Scalar>) {
    match s {
        Scalar::And(items) => items.iter().for_each(|i| flatten(i, out)),
        other => out.push(other),
    }
}

/// `(column, op, constant)` of a comparison of a column with a constant.
fn column_cmp(s: &Scalar) -> Option<(u16, Cmp, &Value)> {
    match s {
        Scalar::Cmp(op, a, b) => match (a.as_ref(), b.as_ref()) {
            (Scalar::Column(c), Scalar::Const(v)) => Some((*c, *op, v)),
            (Scalar::Const(v), Scalar::Column(c)) => Some((*c, op.flipped(), v)),
            _ => None,
        },
        _ => None,
    }
}

/// The longest IN list planned as key reads.
const IN_LIST_KEYS_MAX: usize = 4096;

fn intersect(a: Vec<Value>, b: Vec<Value>) -> Vec<Value> {
    a.into_iter().filter(|v| b.contains(v)).collect()
}

/// Reads what each conjunct says of its column; returns the facts per
/// column and, per conjunct, whether it is an equality the facts hold
/// exactly (so a key read by those facts needs no re-check of it).
fn facts(def: &TableDef, conj: &[&Scalar]) -> (Vec<Facts>, Vec<bool>) {
    let mut facts = vec![Facts::default(); def.columns.len()];
    let mut equality = vec![false; conj.len()];
    for (i, s) in conj.iter().enumerate() {
        if let Some((c, op, v)) = column_cmp(s) {
            let ty = def.columns[usize::from(c)].ty;
            let f = &mut facts[usize::from(c)];
            match op {
                Cmp::Eq => {
                    let vals = if v.is_null() {
                        Some(Vec::new())
                    } else {
                        exact_for_column(v, ty).map(|x| vec![x])
                    };
                    if let Some(vals) = vals {
                        f.eq = Some(match f.eq.take() {
                            Some(old) => intersect(old, vals),
                            None => vals,
                        });
                        equality[i] = true;
                    }
                }
                Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge if !v.is_null() => {
                    if let Some(x) = exact_for_column(v, ty) {
                        let inclusive = matches!(op, Cmp::Le | Cmp::Ge);
                        if matches!(op, Cmp::Gt | Cmp::Ge) {
                            f.low.get_or_insert((x, inclusive));
                        } else {
                            f.high.get_or_insert((x, inclusive));
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        match s {
            Scalar::InList {
                expr,
                list,
                negated: false,
                ..
            } => {
                let Scalar::Column(c) = expr.as_ref() else {
                    continue;
                };
                if list.len() > IN_LIST_KEYS_MAX {
                    // Too many to read by key (and to de-duplicate
                    // pairwise): the list stays a filter of a scan.
                    continue;
                }
                let ty = def.columns[usize::from(*c)].ty;
                let mut vals = Vec::with_capacity(list.len());
                let mut usable = true;
                for item in list {
                    match item {
                        Scalar::Const(Value::Null) => {}
                        Scalar::Const(v) => match exact_for_column(v, ty) {
                            Some(x) if !vals.contains(&x) => vals.push(x),
                            Some(_) => {}
                            None => usable = false,
                        },
                        _ => usable = false,
                    }
                }
                if usable {
                    let f = &mut facts[usize::from(*c)];
                    f.eq = Some(match f.eq.take() {
                        Some(old) => intersect(old, vals),
                        None => vals,
                    });
                    equality[i] = true;
                }
            }
            Scalar::Between {
                expr,
                low,
                high,
                negated: false,
            } => {
                let (Scalar::Column(c), Scalar::Const(lo), Scalar::Const(hi)) =
                    (expr.as_ref(), low.as_ref(), high.as_ref())
                else {
                    continue;
                };
                let ty = def.columns[usize::from(*c)].ty;
                let f = &mut facts[usize::from(*c)];
                if let Some(x) = exact_for_column(lo, ty) {
                    f.low.get_or_insert((x, true));
                }
                if let Some(x) = exact_for_column(hi, ty) {
                    f.high.get_or_insert((x, true));
                }
            }
            _ => {}
        }
    }
    (facts, equality)
}

/// Every combination of the columns' value sets, in column order, if
/// there are at most `max`.
fn product(columns: &[u16], facts: &[Facts], max: usize) -> Option<Vec<Vec<Value>>> {
    let mut keys: Vec<Vec<Value>> = vec![Vec::new()];
    for &c in columns {
        let vals = facts[usize::from(c)].eq.as_ref()?;
        if keys.len().saturating_mul(vals.len()) > max {
            return None;
        }
        keys = keys
            .into_iter()
            .flat_map(|k| {
                vals.iter().map(move |v| {
                    let mut k = k.clone();
                    k.push(v.clone());
                    k
                })
            })
            .collect();
    }
    Some(keys)
}

/// Whether every conjunct is a key equality on `columns`.
fn only_on(conj: &[&Scalar], equality: &[bool], columns: &[u16]) -> bool {
    conj.iter().zip(equality).all(|(s, &eq)| {
        eq && match s {
            Scalar::InList { expr, .. } => {
                matches!(expr.as_ref(), Scalar::Column(c) if columns.contains(c))
            }
            other => column_cmp(other).is_some_and(|(c, _, _)| columns.contains(&c)),
        }
    })
}

/// Whether an index on `columns` whose first `fixed` columns are held
/// equal returns rows in `order`'s order (plain columns, one direction).
fn serves(columns: &[u16], fixed: usize, order: &[(u16, bool)]) -> Option<bool> {
    let desc = order.first()?.1;
    if order.iter().any(|&(_, d)| d != desc) {
        return None;
    }
    let rest: Vec<u16> = order
        .iter()
        .map(|&(c, _)| c)
        .filter(|c| !columns[..fixed].contains(c))
        .collect();
    (rest.len() <= columns.len() - fixed && rest[..] == columns[fixed..fixed + rest.len()])
        .then_some(desc)
}

/// Plans the access to `def`'s rows for `where_` (compiled against it)
/// and `order` (the ORDER BY when it is all plain columns: id and
/// descending). Unique indexes still building are not read through.
pub fn plan(
    def: &TableDef,
    where_: Option<&Scalar>,
    order: &[(u16, bool)],
    key_lookups_max: usize,
) -> Plan {
    let mut conj = Vec::new();
    if let Some(w) = where_ {
        flatten(w, &mut conj);
    }
    let (facts, equality) = facts(def, &conj);
    let filter = where_.and_then(|w| pushdown(def, w));
    if let Some(keys) = product(&def.primary_key, &facts, key_lookups_max) {
        return Plan {
            access: Access::PrimaryKeys(keys),
            filter: None,
            ordered: None,
            exact: only_on(&conj, &equality, &def.primary_key),
        };
    }
    for u in def.unique_indexes.iter().filter(|u| !u.building) {
        if let Some(keys) = product(&u.columns, &facts, key_lookups_max) {
            return Plan {
                access: Access::UniqueKeys {
                    index: u.name.clone(),
                    keys,
                },
                filter: None,
                ordered: None,
                exact: only_on(&conj, &equality, &u.columns),
            };
        }
    }
    // The best ordered index: most leading columns fixed, then a range.
    let mut best: Option<(usize, bool, Option<bool>, usize)> = None;
    for (n, index) in def.indexes.iter().enumerate().filter(|(_, i)| !i.dropped) {
        let fixed = index
            .columns
            .iter()
            .take_while(|&&c| {
                facts[usize::from(c)]
                    .eq
                    .as_ref()
                    .is_some_and(|v| v.len() == 1)
            })
            .count();
        let ranged = index.columns.get(fixed).is_some_and(|&c| {
            let f = &facts[usize::from(c)];
            f.low.is_some() || f.high.is_some()
        });
        if fixed == 0 && !ranged {
            continue;
        }
        let served = serves(&index.columns, fixed, order);
        let better = match best {
            None => true,
            Some((bf, br, bs, _)) => (fixed, ranged, served.is_some()) > (bf, br, bs.is_some()),
        };
        if better {
            best = Some((fixed, ranged, served, n));
        }
    }
    // No WHERE to use: an index whose order is the ORDER BY's.
    if best.is_none() && !order.is_empty() {
        best = def
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, i)| !i.dropped)
            .find_map(|(n, i)| serves(&i.columns, 0, order).map(|d| (0, false, Some(d), n)));
    }
    let Some((fixed, ranged, served, n)) = best else {
        return Plan {
            access: Access::FullScan,
            filter,
            ordered: None,
            exact: false,
        };
    };
    let index = &def.indexes[n];
    let prefix: Vec<Value> = index.columns[..fixed]
        .iter()
        .map(|&c| facts[usize::from(c)].eq.as_ref().expect("fixed")[0].clone())
        .collect();
    let (mut low, mut high) = if prefix.is_empty() {
        (Bound::Unbounded, Bound::Unbounded)
    } else {
        (
            Bound::Included(prefix.clone()),
            Bound::Included(prefix.clone()),
        )
    };
    if ranged {
        let f = &facts[usize::from(index.columns[fixed])];
        let with = |(v, inclusive): &(Value, bool)| {
            let mut k = prefix.clone();
            k.push(v.clone());
            if *inclusive {
                Bound::Included(k)
            } else {
                Bound::Excluded(k)
            }
        };
        if let Some(l) = &f.low {
            low = with(l);
        }
        if let Some(h) = &f.high {
            high = with(h);
        }
    }
    Plan {
        access: Access::IndexScan {
            index: index.name.clone(),
            low,
            high,
        },
        filter,
        ordered: served,
        exact: false,
    }
}

// ---------------------------------------------------------------------------
// Filters pushed to the data nodes

fn cmp_op(c: Cmp) -> Option<CmpOp> {
    Some(match c {
        Cmp::Eq => CmpOp::Eq,
        Cmp::Ne => CmpOp::Ne,
        Cmp::Lt => CmpOp::Lt,
        Cmp::Le => CmpOp::Le,
        Cmp::Gt => CmpOp::Gt,
        Cmp::Ge => CmpOp::Ge,
        Cmp::NullSafeEq => return None,
    })
}

/// Column families two columns may be compared in at the data nodes with
/// SQL's result (text pairs are left to the SQL node; both ignore
/// trailing spaces now, so they could be pushed too).
fn family(ty: ColumnType) -> Option<u8> {
    match ty {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => Some(0),
        ColumnType::Float | ColumnType::Double => Some(1),
        ColumnType::Binary(_) | ColumnType::VarBinary(_) => Some(2),
        ColumnType::Timestamp | ColumnType::DateTime => Some(3),
        ColumnType::Date => Some(4),
        ColumnType::Time => Some(5),
        ColumnType::Decimal { .. } => Some(6),
        ColumnType::Char(_) | ColumnType::VarChar(_) => None,
    }
}

/// The WHERE as a filter the data nodes can run (see the module's note),
/// or `None` if nothing of it translates. Checked by compiling it.
pub fn pushdown(def: &TableDef, w: &Scalar) -> Option<FilterExpr> {
    let f = relaxed(def, w)?;
    if matches!(f, FilterExpr::True) {
        return None;
    }
    f.compile(def).ok().map(|_| f)
}

/// A top-level AND may drop conjuncts that do not translate.
fn relaxed(def: &TableDef, s: &Scalar) -> Option<FilterExpr> {
    match s {
        Scalar::And(items) => {
            let kept: Vec<FilterExpr> = items.iter().filter_map(|i| relaxed(def, i)).collect();
            match kept.len() {
                0 => None,
                1 => kept.into_iter().next(),
                _ => Some(FilterExpr::And(kept)),
            }
        }
        other => exact(def, other),
    }
}

/// A translation that agrees with SQL on every TRUE and FALSE.
/// A constant a pushed comparison with a column of type `ty` may use:
/// [`exact_for_column`]'s, except a byte string against a VARCHAR. The SQL
/// node compares a byte string with a string byte by byte, every trailing
/// space counting, while the filter compares VARCHAR values without their
/// trailing spaces (as SQL compares two strings): pushed, `v <> X'78'`
/// would drop a stored `'x '` that SQL keeps.
fn filter_constant(v: &Value, ty: ColumnType) -> Option<Value> {
    if let (ColumnType::VarChar(_), Value::Bytes(_)) = (ty, v) {
        return None;
    }
    exact_for_column(v, ty)
}

fn exact(def: &TableDef, s: &Scalar) -> Option<FilterExpr> {
    let ty = |c: u16| def.columns.get(usize::from(c)).map(|c| c.ty);
    match s {
        Scalar::Const(v) => truth(v).map(|t| {
            if t {
                FilterExpr::True
            } else {
                FilterExpr::False
            }
        }),
        Scalar::Cmp(op, a, b) => {
            let op = cmp_op(*op)?;
            match (a.as_ref(), b.as_ref()) {
                (Scalar::Column(x), Scalar::Column(y)) => {
                    let (fx, fy) = (family(ty(*x)?)?, family(ty(*y)?)?);
                    (fx == fy).then_some(FilterExpr::CmpCols { a: *x, op, b: *y })
                }
                _ => {
                    let (c, cmp, v) = column_cmp(s)?;
                    Some(FilterExpr::Cmp {
                        col: c,
                        op: cmp_op(cmp)?,
                        value: filter_constant(v, ty(c)?)?,
                    })
                }
            }
        }
        Scalar::IsNull(e, negated) => match e.as_ref() {
            Scalar::Column(c) => Some(if *negated {
                FilterExpr::IsNotNull(*c)
            } else {
                FilterExpr::IsNull(*c)
            }),
            _ => None,
        },
        Scalar::Like {
            expr,
            pattern,
            escape: Some('\\'),
            negated,
        } => {
            let (Scalar::Column(c), Scalar::Const(p)) = (expr.as_ref(), pattern.as_ref()) else {
                return None;
            };
            let t = ty(*c)?;
            let binary = matches!(t, ColumnType::Binary(_) | ColumnType::VarBinary(_));
            if !is_text(t) && !binary {
                return None;
            }
            // A byte-string pattern on a text column is matched byte by
            // byte in the SQL node, by characters in the filter: left to
            // the SQL node.
            let pattern = match p {
                Value::Str(s) => s.as_bytes().to_vec(),
                Value::Bytes(b) if binary => b.clone(),
                _ => return None,
            };
            if pattern.len() > LIKE_PATTERN_MAX {
                return None;
            }
            Some(if *negated {
                FilterExpr::NotLike { col: *c, pattern }
            } else {
                FilterExpr::Like { col: *c, pattern }
            })
        }
        Scalar::InList {
            expr,
            list,
            negated,
            ..
        } => {
            let Scalar::Column(c) = expr.as_ref() else {
                return None;
            };
            let t = ty(*c)?;
            let mut items = Vec::with_capacity(list.len());
            for item in list {
                match item {
                    // SQL's answer with a NULL in the list is never TRUE
                    // for that item: leaving it out agrees on TRUE/FALSE.
                    Scalar::Const(Value::Null) => {}
                    Scalar::Const(v) => {
                        let value = filter_constant(v, t)?;
                        items.push(FilterExpr::Cmp {
                            col: *c,
                            op: if *negated { CmpOp::Ne } else { CmpOp::Eq },
                            value,
                        });
                    }
                    _ => return None,
                }
            }
            Some(if *negated {
                FilterExpr::And(items)
            } else {
                FilterExpr::Or(items)
            })
        }
        Scalar::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let (Scalar::Column(c), Scalar::Const(lo), Scalar::Const(hi)) =
                (expr.as_ref(), low.as_ref(), high.as_ref())
            else {
                return None;
            };
            let t = ty(*c)?;
            let (lo, hi) = (filter_constant(lo, t)?, filter_constant(hi, t)?);
            Some(if *negated {
                FilterExpr::Or(vec![
                    FilterExpr::Cmp {
                        col: *c,
                        op: CmpOp::Lt,
                        value: lo,
                    },
                    FilterExpr::Cmp {
                        col: *c,
                        op: CmpOp::Gt,
                        value: hi,
                    },
                ])
            } else {
                FilterExpr::And(vec![
                    FilterExpr::Cmp {
                        col: *c,
                        op: CmpOp::Ge,
                        value: lo,
                    },
                    FilterExpr::Cmp {
                        col: *c,
                        op: CmpOp::Le,
                        value: hi,
                    },
                ])
            })
        }
        Scalar::Not(inner) => exact(def, inner).map(|f| FilterExpr::Not(Box::new(f))),
        Scalar::And(items) => Some(FilterExpr::And(
            items.iter().map(|i| exact(def, i)).collect::<Option<_>>()?,
        )),
        Scalar::Or(items) => Some(FilterExpr::Or(
            items.iter().map(|i| exact(def, i)).collect::<Option<_>>()?,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::ColumnDef;

    fn def() -> TableDef {
        let mut d = TableDef::new(
            "t",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }),
                ColumnDef::new("k", ColumnType::Int { unsigned: false }),
                ColumnDef::new("c", ColumnType::VarChar(40)).nullable(),
                ColumnDef::new("u", ColumnType::VarChar(40)).nullable(),
            ],
            &["id"],
        )
        .unwrap()
        .with_index("k", &["k"])
        .unwrap()
        .with_unique_index("u", &["u"])
        .unwrap();
        d.add_primary_index();
        d
    }

    fn col(c: u16) -> Box<Scalar> {
        Box::new(Scalar::Column(c))
    }

    fn konst(v: impl Into<Value>) -> Box<Scalar> {
        Box::new(Scalar::Const(v.into()))
    }

    #[test]
    fn picks_keys_then_unique_then_index_then_scan() {
        let d = def();
        let eq = |c, v: i64| Scalar::Cmp(Cmp::Eq, col(c), konst(v));
        let p = plan(&d, Some(&eq(0, 5)), &[], 16);
        assert_eq!(p.access, Access::PrimaryKeys(vec![vec![Value::Int(5)]]));
        assert!(p.exact);
        let both = Scalar::And(vec![eq(0, 5), eq(1, 2)]);
        let p = plan(&d, Some(&both), &[], 16);
        assert!(matches!(p.access, Access::PrimaryKeys(_)) && !p.exact);
        let in_list = Scalar::in_list(
            col(0),
            vec![
                Scalar::Const(Value::Int(1)),
                Scalar::Const("2".into()),
                Scalar::Const(Value::Null),
            ],
            false,
        );
        let p = plan(&d, Some(&in_list), &[], 16);
        assert_eq!(
            p.access,
            Access::PrimaryKeys(vec![vec![Value::Int(1)], vec![Value::Int(2)]])
        );
        assert_eq!(plan(&d, Some(&in_list), &[], 1).access, Access::FullScan);
        let by_u = Scalar::Cmp(Cmp::Eq, col(3), konst("x"));
        assert!(matches!(
            plan(&d, Some(&by_u), &[], 16).access,
            Access::UniqueKeys { .. }
        ));
        let range = Scalar::Cmp(Cmp::Gt, konst(7i64), col(1));
        let p = plan(&d, Some(&range), &[], 16);
        assert_eq!(
            p.access,
            Access::IndexScan {
                index: "k".into(),
                low: Bound::Unbounded,
                high: Bound::Excluded(vec![Value::Int(7)]),
            }
        );
        assert!(p.filter.is_some());
        let fraction = Scalar::Cmp(Cmp::Eq, col(0), konst(1.5));
        let p = plan(&d, Some(&fraction), &[], 16);
        assert_eq!(p.access, Access::FullScan, "no exact key for 1.5");
        assert_eq!(p.filter, None, "nor a filter");
        let p = plan(&d, None, &[(1, true)], 16);
        assert_eq!(p.ordered, Some(true), "ORDER BY k DESC uses index k");
    }

    #[test]
    fn pushdown_keeps_what_translates() {
        let d = def();
        let like = Scalar::Like {
            expr: col(2),
            pattern: konst("a%"),
            escape: Some('\\'),
            negated: false,
        };
        let odd = Scalar::Cmp(
            Cmp::Eq,
            Box::new(Scalar::Arith(
                super::super::expr::Arith::Mod,
                col(1),
                konst(2i64),
            )),
            konst(1i64),
        );
        let w = Scalar::And(vec![like.clone(), odd.clone()]);
        assert_eq!(
            pushdown(&d, &w),
            Some(FilterExpr::Like {
                col: 2,
                pattern: b"a%".to_vec()
            })
        );
        // Under NOT or OR nothing may be dropped.
        assert_eq!(pushdown(&d, &Scalar::Not(Box::new(w.clone()))), None);
        assert_eq!(pushdown(&d, &Scalar::Or(vec![like, odd])), None);
        assert_eq!(
            pushdown(&d, &Scalar::Cmp(Cmp::Eq, col(2), col(3))),
            None,
            "text columns are compared in the SQL node"
        );
    }

    /// A VARCHAR against a string is pushed (both sides compared without
    /// trailing spaces); against a byte string, which SQL compares byte by
    /// byte, it is not, nor is a LIKE with a byte-string pattern.
    #[test]
    fn byte_strings_against_varchar_stay_in_the_sql_node() {
        let d = def();
        let bytes = || konst(Value::Bytes(b"x".to_vec()));
        assert_eq!(
            pushdown(&d, &Scalar::Cmp(Cmp::Ne, col(2), konst("x"))),
            Some(FilterExpr::Cmp {
                col: 2,
                op: CmpOp::Ne,
                value: Value::Str("x".into())
            })
        );
        assert_eq!(pushdown(&d, &Scalar::Cmp(Cmp::Ne, col(2), bytes())), None);
        let between = Scalar::Between {
            expr: col(2),
            low: bytes(),
            high: bytes(),
            negated: true,
        };
        assert_eq!(pushdown(&d, &between), None);
        let like = Scalar::Like {
            expr: col(2),
            pattern: konst(Value::Bytes(b"x%".to_vec())),
            escape: Some('\\'),
            negated: true,
        };
        assert_eq!(pushdown(&d, &like), None);
    }
}
