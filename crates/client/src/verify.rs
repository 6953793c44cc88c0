//! Checking that the replicas of every fragment hold the same rows under
//! the same row ids: each replica is read as stored (committed rows, in
//! row-id order, a page at a time) and compared row by row. Meaningful
//! only while nothing writes: it takes no locks. `shoal verify` and the
//! failure tests run it after the load stops.

use crate::cluster::Cluster;
use crate::conn::{Reply, ReplyWait};
use crate::error::from_wire;
use crate::record::Table;
use shoal_types::{ErrorCode, ShoalError, TableId};
use shoal_wire::FRAGMENT_ROWS_END;

/// A row as stored: row id, and every column as an attribute list.
type StoredRow = (u32, Vec<u8>);

/// Bytes of rows asked for per page.
const PAGE_BYTES: u32 = 1 << 20;

/// What a comparison found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaReport {
    pub tables: usize,
    pub fragments: usize,
    /// Replicas read (fragments times replicas).
    pub replicas: usize,
    /// Rows compared (each fragment's rows counted once).
    pub rows: u64,
    /// One line per fragment whose replicas differ (or could not be read).
    pub differences: Vec<String>,
}

impl ReplicaReport {
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
    }
}

impl std::fmt::Display for ReplicaReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} table(s), {} fragment(s), {} replica(s), {} row(s): ",
            self.tables, self.fragments, self.replicas, self.rows
        )?;
        if self.identical() {
            write!(f, "every replica identical, row by row")
        } else {
            write!(f, "{} difference(s):", self.differences.len())?;
            for d in &self.differences {
                write!(f, "\n  {d}")?;
            }
            Ok(())
        }
    }
}

impl Cluster {
    /// Reads every replica of every fragment of every table and compares
    /// them row by row. Run it while no transaction writes.
    pub async fn compare_replicas(&self) -> Result<ReplicaReport, ShoalError> {
        let mut report = ReplicaReport::default();
        for def in self.table_defs().await? {
            let table = Table::new(def);
            let Some(fragments) = table.fragment_replicas() else {
                continue;
            };
            report.tables += 1;
            for (frag, replicas) in fragments.iter().enumerate() {
                report.fragments += 1;
                let frag = frag as u32;
                let mut first: Option<(u16, Vec<StoredRow>)> = None;
                for &node in replicas {
                    report.replicas += 1;
                    let image = match self.replica_rows(node, table.id(), frag).await {
                        Ok(rows) => rows,
                        Err(e) => {
                            report.differences.push(format!(
                                "table {:?} fragment {frag}: cannot read data node {node}'s replica: {e}",
                                table.name()
                            ));
                            continue;
                        }
                    };
                    match &first {
                        None => {
                            report.rows += image.len() as u64;
                            first = Some((node, image));
                        }
                        Some((first_node, rows)) => {
                            if let Some(d) = describe_difference(rows, &image) {
                                report.differences.push(format!(
                                    "table {:?} fragment {frag}: data node {first_node} and data node {node} differ: {d}",
                                    table.name()
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(report)
    }

    /// Every committed row of data node `node`'s replica of a fragment.
    async fn replica_rows(
        &self,
        node: u16,
        table: TableId,
        frag: u32,
    ) -> Result<Vec<StoredRow>, ShoalError> {
        let conn = self.connection_to(node).ok_or_else(|| {
            ShoalError::with_detail(
                ErrorCode::ClusterFailure,
                format!("no connection to data node {node}"),
            )
        })?;
        let mut rows = Vec::new();
        let mut from = 0;
        loop {
            let slot = conn.request_rows(table, frag, from, PAGE_BYTES)?;
            let page = match ReplyWait::new(&conn, slot).await {
                Ok(Reply::Rows(page)) => page,
                Ok(other) => {
                    return Err(ShoalError::with_detail(
                        ErrorCode::ProtocolViolation,
                        format!("data node {node} answered a page of rows with {other:?}"),
                    ))
                }
                Err(e) => return Err(e),
            };
            if page.code != 0 {
                return Err(from_wire(page.code, "reading a replica"));
            }
            rows.extend(page.rows);
            if page.next_row == FRAGMENT_ROWS_END || page.next_row <= from {
                return Ok(rows);
            }
            from = page.next_row;
        }
    }
}

/// Where two replicas' rows first differ, in words; `None` if they agree.
fn describe_difference(a: &[StoredRow], b: &[StoredRow]) -> Option<String> {
    let at = a.iter().zip(b).position(|(x, y)| x != y);
    match at {
        Some(i) if a[i].0 != b[i].0 => Some(format!(
            "the {}th row has row id {} on one and {} on the other ({} and {} rows in all)",
            i + 1,
            a[i].0,
            b[i].0,
            a.len(),
            b.len()
        )),
        Some(i) => Some(format!("row id {} holds different values", a[i].0)),
        None if a.len() != b.len() => Some(format!(
            "{} rows against {}, equal as far as the shorter goes",
            a.len(),
            b.len()
        )),
        None => None,
    }
}
