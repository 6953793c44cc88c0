//! TC: unique hash indexes. Two jobs, both done with operations TC adds
//! to a client's request ("derived" operations, numbered after the
//! client's and answered to nobody):
//!
//! - **Upkeep.** The primary of every write to a table with unique
//!   indexes reports which keys it changed (`LqhKeyConf::fired`); TC then
//!   deletes each old entry and inserts each new one in the same
//!   transaction. An insert that finds the key taken fails the
//!   transaction with 630, naming the index. While an index is being
//!   built an old entry is deleted only if it names this row (another
//!   row may hold the key until the build finds the clash).
//! - **Access by unique key** (`OP_BY_UNIQUE_KEY`): a look-up of the
//!   entry, then the client's operation on the base row it names, whose
//!   answer is the client's. One request from the client.
//!
//! A write names the unique indexes its TC keeps (`expected_uniques`, in
//! `LqhKeyReq::fired` on its way to the primary): a primary that does not
//! know one of them yet refuses the write with a temporary error rather
//! than leave the index without the write's entry.

use super::answer::Answer;
use super::request::{no_replica, overloaded_error, route_op};
use super::{AbortReply, Tc, TxnState};
use crate::dih::{Dih, TableDist};
use crate::node::Output;
use crate::signal::{BlockSignal, TxnRef, ROW_NONE};
use shoal_types::layout::{push_attr, AttrSlice};
use shoal_types::{ErrorCode, ShoalError, TableDef, TableId, TransId};
use shoal_wire::node::fired::decode_fired;
use shoal_wire::signals::{OP_BY_UNIQUE_KEY, OP_IGNORE_ERROR};
use shoal_wire::{KeyOp, LockMode, OpResult, OpType};
use std::collections::VecDeque;

/// An operation TC added to a request, by what it is for. `of` is the
/// client's operation (its index in the request) it serves.
#[derive(Debug)]
pub(super) enum Derived {
    /// Inserts (`insert`) or deletes an entry of the unique index whose
    /// table is `index_table`.
    Upkeep {
        of: u16,
        index_table: TableId,
        insert: bool,
    },
    /// Looks up an entry for an operation by unique key; `then` is that
    /// operation on the base row (its key still the unique key's: the
    /// operation sent has the entry's base key and `then`'s attributes;
    /// taken when it is sent).
    Lookup { of: u16, then: Option<KeyOp> },
    /// Looks up an entry of an index being built before deleting it: it
    /// goes only if it names `base_key`. Later changes of the same entry
    /// by the same request (a row deleted and inserted again, a value
    /// moved to another row and away again) wait in `then` and follow the
    /// delete in the order they were fired: sent before the look-up is
    /// answered, an insert could land before the delete, and a second
    /// look-up could miss the insert it must undo.
    CheckedDelete {
        of: u16,
        index_table: TableId,
        key: Vec<u8>,
        base_key: Vec<u8>,
        then: Vec<Queued>,
    },
    /// The client's operation by unique key, on its base row.
    Base { of: u16 },
}

/// A change of an index entry waiting behind a checked delete of the same
/// entry (see [`Derived::CheckedDelete`]); each is for client operation
/// `of`.
#[derive(Debug)]
pub(super) enum Queued {
    /// An insert or a delete of the entry.
    Upkeep { of: u16, op: KeyOp },
    /// Another checked delete, for the row `base_key`.
    CheckedDelete { of: u16, base_key: Vec<u8> },
}

/// The unique indexes a TC keeps for table `def`, as `u32` table ids: sent
/// with each write to its primary (empty for a table without any).
pub(super) fn expected_uniques(def: &TableDef) -> Vec<u8> {
    def.unique_indexes
        .iter()
        .flat_map(|u| u.table.0.to_le_bytes())
        .collect()
}

fn bad(code: ErrorCode, detail: String) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

/// The schema version DIH has of `table` (0 if unknown: its LQH answers
/// "no such table").
fn table_version(dih: &Dih, table: TableId) -> shoal_types::SchemaVersion {
    dih.table(table)
        .map(|t| t.layout.table.version)
        .unwrap_or_default()
}

/// The base table of hidden table `index_table` and its index's
/// definition, as DIH has them.
fn index_of(dih: &Dih, index_table: TableId) -> Option<(&TableDef, &shoal_types::UniqueIndexDef)> {
    let base = dih.table(index_table)?.layout.table.options.index_of?;
    let base = &dih.table(base)?.layout.table;
    Some((base, base.unique_index_by_table(index_table)?))
}

/// Checks a client's use of unique indexes: an operation by unique key
/// names an index that is ready, and a write to an index's own table
/// comes only from a build (while the index is building).
pub(super) fn check_table_use(
    op: &KeyOp,
    route: Option<&TableDist>,
    dih: &Dih,
) -> Result<(), ShoalError> {
    let by_unique = op.flags & OP_BY_UNIQUE_KEY != 0;
    if !by_unique && op.op == OpType::Read {
        return Ok(());
    }
    let hidden = route.and_then(|t| t.layout.table.options.index_of);
    if !by_unique {
        if hidden.is_none() {
            return Ok(());
        }
        return match index_of(dih, op.table) {
            Some((_, u)) if u.building => Ok(()),
            _ => Err(bad(
                ErrorCode::BadRequest,
                format!(
                    "table id {} is a unique index's own table: write its base table, the index follows",
                    op.table
                ),
            )),
        };
    }
    if !matches!(op.op, OpType::Read | OpType::Update | OpType::Delete) {
        return Err(bad(
            ErrorCode::BadRequest,
            format!(
                "a {:?} by unique key; only reads, updates and deletes go through a unique index",
                op.op
            ),
        ));
    }
    match index_of(dih, op.table) {
        _ if hidden.is_none() => Err(bad(
            ErrorCode::NoSuchTable,
            format!("table id {} is not a unique index", op.table),
        )),
        None => Err(bad(
            ErrorCode::NoSuchTable,
            format!(
                "the unique index with table id {} was dropped; re-read the table definition",
                op.table
            ),
        )),
        Some((base, u)) if u.building => Err(bad(
            ErrorCode::NodeNotReady,
            format!(
                "unique index `{}` of table `{}` is still being built; retry once its create returned",
                u.name, base.name
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// A read of an entry's `$pk` column.
fn entry_read(
    index_table: TableId,
    version: shoal_types::SchemaVersion,
    key: &[u8],
    lock: LockMode,
    pk_col: u16,
) -> KeyOp {
    // An attribute list of one column: its count, then its id.
    let mut attrs = [0u8; 4];
    attrs[..2].copy_from_slice(&1u16.to_le_bytes());
    attrs[2..].copy_from_slice(&pk_col.to_le_bytes());
    KeyOp::new(OpType::Read, lock, 0, index_table, version, key, &attrs)
}

/// An insert (with `attrs`) or a delete of entry `key` of an index.
fn upkeep_op(
    index_table: TableId,
    version: shoal_types::SchemaVersion,
    key: Vec<u8>,
    attrs: Option<Vec<u8>>,
) -> KeyOp {
    KeyOp::new(
        if attrs.is_some() {
            OpType::Insert
        } else {
            OpType::Delete
        },
        LockMode::Exclusive,
        0,
        index_table,
        version,
        &key,
        &attrs.unwrap_or_default(),
    )
}

/// The base row's key an entry read by [`entry_read`] holds.
fn entry_base_key(result: &OpResult) -> Result<&[u8], ShoalError> {
    let (attrs, rest) = AttrSlice::parse(&result.data)?;
    match attrs.iter().next() {
        Some((_, Some(key))) if attrs.len() == 1 && rest.is_empty() => Ok(key),
        _ => Err(bad(
            ErrorCode::Internal,
            "a unique index entry's answer holds no primary key".into(),
        )),
    }
}

/// The error an index operation's failure fails the transaction with.
fn upkeep_error(error: ShoalError, dih: &Dih, index_table: TableId, insert: bool) -> ShoalError {
    let named = index_of(dih, index_table)
        .map(|(base, u)| format!("unique index `{}` of table `{}`", u.name, base.name))
        .unwrap_or_else(|| format!("the unique index with table id {index_table}"));
    match error.code {
        ErrorCode::TupleAlreadyExists if insert => bad(
            ErrorCode::TupleAlreadyExists,
            format!("duplicate entry: another row holds this value of {named}"),
        ),
        ErrorCode::TupleNotFound => bad(
            ErrorCode::Internal,
            format!("{named} lacks the entry of a row this transaction changed"),
        ),
        ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion => bad(
            ErrorCode::DistributionChanged,
            format!("{named} was dropped while this transaction wrote it; retry"),
        ),
        _ => error,
    }
}

impl Tc {
    /// Sends an operation TC adds to transaction `txn`'s request.
    pub(super) fn send_derived(
        &mut self,
        txn: TxnRef,
        kind: Derived,
        op: KeyOp,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), ShoalError> {
        let low_water = self.low_water();
        let own = self.cfg.node_id;
        let max_ops = self.cfg.max_operations_per_transaction;
        let t = self.txns.get_mut(&txn).expect("present");
        if t.ops_total >= max_ops {
            return Err(bad(
                ErrorCode::RequestTooLarge,
                format!(
                    "the transaction's operations and the unique index operations they need exceed max_operations_per_transaction={max_ops}"
                ),
            ));
        }
        let routed = route_op(t, &op, dih.table(op.table), own).ok_or_else(no_replica)?;
        if self.overloaded.contains(&routed.chain[0]) {
            return Err(overloaded_error(routed.chain[0]));
        }
        // An earlier one on the same fragment, unanswered, went by another
        // distribution version (a failure may have moved the primary):
        // this one could run first on a new route (a delete before the
        // insert of the same entry), and the earlier one is refused anyway
        // (1204).
        let frag_key = (op.table, routed.frag);
        if !route_unmoved(
            &mut t.derived_versions,
            &t.derived_routes,
            &t.answered,
            frag_key,
            routed.version,
        ) {
            return Err(bad(
                ErrorCode::DistributionChanged,
                format!(
                    "the distribution of fragment {} of table {} changed while this transaction wrote it (a data node failed, restarted or joined); retry",
                    routed.frag, op.table
                ),
            ));
        }
        let op_no = t.ops_total as u32;
        t.ops_total += 1;
        debug_assert_eq!(
            (op_no - t.op_base) as usize,
            t.answered.len(),
            "derived operations follow the request's"
        );
        t.derived_routes
            .push((t.answered.len(), frag_key, routed.version));
        t.answered.push(false);
        t.op_flags.push(op.flags);
        t.op_chains.push(routed.chain);
        t.outstanding += 1;
        t.outstanding_chained += usize::from(routed.chain.len() > 1);
        t.has_checked_delete |= matches!(kind, Derived::CheckedDelete { .. });
        t.derived.push(kind);
        q.push_back(BlockSignal::LqhKeyReq {
            txn,
            op_no,
            low_water,
            frag: routed.frag,
            frag_version: routed.version,
            row: ROW_NONE,
            row_new: false,
            copied: false,
            api_node: t.api_node,
            trans: TransId(t.trans.0),
            op,
            chain: routed.chain,
            hop: 0,
            commit_at_last: false,
            fired: routed.expected_uniques.into(),
        });
        Ok(())
    }

    /// Starts the client's operation `of` by unique key: the look-up.
    pub(super) fn start_unique_op(
        &mut self,
        txn: TxnRef,
        of: u16,
        op: KeyOp,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), ShoalError> {
        let Some((base, u)) = index_of(dih, op.table) else {
            return Err(bad(
                ErrorCode::NoSuchTable,
                format!("table id {} is not a unique index", op.table),
            ));
        };
        let hidden_version = table_version(dih, op.table);
        // A write locks the entry so the row it names stays the one with
        // this key; a read locks it as the client asked.
        let lock = match op.op {
            OpType::Read => op.lock,
            _ => LockMode::Exclusive,
        };
        let lookup = entry_read(
            op.table,
            hidden_version,
            op.key(),
            lock,
            u.columns.len() as u16,
        );
        // The client's operation waits for the entry's answer, retargeted
        // at the base table (its key is replaced then).
        let mut then = op;
        then.flags &= !OP_BY_UNIQUE_KEY;
        then.table = base.id;
        self.send_derived(
            txn,
            Derived::Lookup {
                of,
                then: Some(then),
            },
            lookup,
            dih,
            q,
        )
    }

    /// Fails the request with `error`, reported as operation `of`'s.
    pub(super) fn fail_derived(
        &mut self,
        txn: TxnRef,
        of: u16,
        error: ShoalError,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        self.abort(
            txn,
            AbortReply::Failed {
                error,
                op_index: of,
            },
            q,
            out,
        )
    }

    /// The primary of operation `of`'s write reported unique-key changes:
    /// the index operations that follow them.
    pub(super) fn fire(
        &mut self,
        txn: TxnRef,
        of: u16,
        fired: &[u8],
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), ShoalError> {
        let (base_key, changes) = decode_fired(fired).map_err(|e| {
            bad(
                ErrorCode::Internal,
                format!("a replica reported malformed unique index changes: {e}"),
            )
        })?;
        for c in changes {
            // An index dropped since the write began needs nothing.
            let Some((_, u)) = index_of(dih, c.index_table) else {
                continue;
            };
            let (building, pk_col) = (u.building, u.columns.len() as u16);
            let version = table_version(dih, c.index_table);
            if let Some(old) = c.old {
                let queued = if building {
                    Queued::CheckedDelete {
                        of,
                        base_key: base_key.to_vec(),
                    }
                } else {
                    Queued::Upkeep {
                        of,
                        op: upkeep_op(c.index_table, version, old.to_vec(), None),
                    }
                };
                self.queue_or_send(txn, c.index_table, old, queued, dih, q)?;
            }
            if let Some(new) = c.new {
                let mut attrs = Vec::with_capacity(8 + base_key.len());
                attrs.extend_from_slice(&1u16.to_le_bytes());
                push_attr(&mut attrs, pk_col, Some(base_key));
                let op = upkeep_op(c.index_table, version, new.to_vec(), Some(attrs));
                self.queue_or_send(txn, c.index_table, new, Queued::Upkeep { of, op }, dih, q)?;
            }
        }
        Ok(())
    }

    /// Sends a change of entry `key` of index `index_table`, or queues it
    /// behind an unanswered checked delete of that entry.
    fn queue_or_send(
        &mut self,
        txn: TxnRef,
        index_table: TableId,
        key: &[u8],
        change: Queued,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), ShoalError> {
        match self.checked_delete_of(txn, index_table, key) {
            Some(waiting) => {
                waiting.push(change);
                Ok(())
            }
            // Every change here is the firing operation's.
            None => self
                .send_queued(txn, index_table, key, std::iter::once(change), dih, q)
                .map_err(|(_, e)| e),
        }
    }

    /// Sends the changes `queue` of entry `key`, in order, up to and
    /// including the first checked delete; the rest wait behind it. An
    /// error names the client operation whose change could not be sent.
    fn send_queued(
        &mut self,
        txn: TxnRef,
        index_table: TableId,
        key: &[u8],
        queue: impl IntoIterator<Item = Queued>,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), (u16, ShoalError)> {
        // An index dropped since the changes were fired needs none of
        // them (as `fire` skips it).
        let Some((_, u)) = index_of(dih, index_table) else {
            return Ok(());
        };
        let pk_col = u.columns.len() as u16;
        let mut queue = queue.into_iter();
        while let Some(change) = queue.next() {
            match change {
                Queued::Upkeep { of, op } => self
                    .send_upkeep_op(txn, of, op, dih, q)
                    .map_err(|e| (of, e))?,
                Queued::CheckedDelete { of, base_key } => {
                    let version = table_version(dih, index_table);
                    let lookup = entry_read(index_table, version, key, LockMode::Exclusive, pk_col);
                    let kind = Derived::CheckedDelete {
                        of,
                        index_table,
                        key: key.to_vec(),
                        base_key,
                        then: queue.collect(),
                    };
                    return self
                        .send_derived(txn, kind, lookup, dih, q)
                        .map_err(|e| (of, e));
                }
            }
        }
        Ok(())
    }

    /// Sends an insert or a delete of an index entry.
    fn send_upkeep_op(
        &mut self,
        txn: TxnRef,
        of: u16,
        op: KeyOp,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
    ) -> Result<(), ShoalError> {
        let kind = Derived::Upkeep {
            of,
            index_table: op.table,
            insert: op.op == OpType::Insert,
        };
        self.send_derived(txn, kind, op, dih, q)
    }

    /// The changes waiting behind an unanswered checked delete of entry
    /// `key` of index `index_table` in the request, if there is one.
    fn checked_delete_of(
        &mut self,
        txn: TxnRef,
        index_table: TableId,
        key: &[u8],
    ) -> Option<&mut Vec<Queued>> {
        let t = self.txns.get_mut(&txn).expect("present");
        if !t.has_checked_delete {
            return None;
        }
        let first = t.results.len();
        let answered = &t.answered;
        t.derived.iter_mut().enumerate().find_map(|(k, d)| match d {
            Derived::CheckedDelete {
                index_table: i,
                key: entry,
                then,
                ..
            } if *i == index_table && entry == key && !answered[first + k] => Some(then),
            _ => None,
        })
    }

    /// The answer to derived operation `k` (its index past the client's).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn derived_answered(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        k: usize,
        answer: Answer,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        let Some(kind) = t.derived.get_mut(k) else {
            debug_assert!(false, "an answer for derived operation {k} never sent");
            return;
        };
        let step = match kind {
            Derived::Upkeep {
                of,
                index_table,
                insert,
            } => match answer {
                Answer::Failed(error) => {
                    Err((*of, upkeep_error(error, dih, *index_table, *insert)))
                }
                // An entry's own write changes no unique index.
                Answer::Done(..) | Answer::CommittedAtLast(..) => Ok(()),
            },
            Derived::CheckedDelete {
                of,
                index_table,
                key,
                base_key,
                then,
            } => {
                let (of, index_table) = (*of, *index_table);
                let (key, base_key) = (std::mem::take(key), std::mem::take(base_key));
                let then = std::mem::take(then);
                let delete = match answer {
                    Answer::Failed(e) if e.code == ErrorCode::TupleNotFound => Ok(false),
                    Answer::Failed(e) => Err((of, upkeep_error(e, dih, index_table, false))),
                    // Another row holds the key: its entry stays.
                    Answer::Done(result, ..) | Answer::CommittedAtLast(result, ..) => {
                        entry_base_key(&result)
                            .map(|named| named == base_key)
                            .map_err(|e| (of, e))
                    }
                };
                delete.and_then(|delete| {
                    let mut queue = Vec::with_capacity(then.len() + 1);
                    if delete {
                        let version = table_version(dih, index_table);
                        let op = upkeep_op(index_table, version, key.clone(), None);
                        queue.push(Queued::Upkeep { of, op });
                    }
                    // Behind the delete, on the same link: it runs first.
                    queue.extend(then);
                    self.send_queued(txn, index_table, &key, queue, dih, q)
                })
            }
            Derived::Lookup { of, then } => {
                let of = *of;
                match answer {
                    Answer::Failed(e) => self.client_op_failed(txn, of, e),
                    Answer::Done(result, ..) | Answer::CommittedAtLast(result, ..) => {
                        match (entry_base_key(&result), then.take()) {
                            (Ok(key), Some(then)) => {
                                // Built anew rather than given the key in
                                // place: one allocation of the right size,
                                // not a reallocation (~8 % of a unique
                                // read's instructions).
                                let op = KeyOp::new(
                                    then.op,
                                    then.lock,
                                    then.flags,
                                    then.table,
                                    then.version,
                                    key,
                                    then.attrs(),
                                );
                                self.send_derived(txn, Derived::Base { of }, op, dih, q)
                                    .map_err(|e| (of, e))
                            }
                            (Err(e), _) => Err((of, e)),
                            (Ok(_), None) => Err((
                                of,
                                bad(
                                    ErrorCode::Internal,
                                    "a unique key look-up answered twice".into(),
                                ),
                            )),
                        }
                    }
                }
            }
            Derived::Base { of } => {
                let of = *of;
                match answer {
                    Answer::Failed(e) => self.client_op_failed(txn, of, e),
                    Answer::Done(result, fired) => {
                        let fire = if fired.is_empty() {
                            Ok(())
                        } else {
                            self.fire(txn, of, &fired, dih, q).map_err(|e| (of, e))
                        };
                        fire.and_then(|()| self.client_result(txn, of, result))
                    }
                    Answer::CommittedAtLast(..) => Err((
                        of,
                        bad(
                            ErrorCode::Internal,
                            "a derived operation committed at its last replica".into(),
                        ),
                    )),
                }
            }
        };
        match step {
            Err((of, error)) => self.fail_derived(txn, of, error, q, out),
            Ok(()) => {
                let t = self.txns.get_mut(&txn).expect("present");
                if t.outstanding == 0 && matches!(t.state, TxnState::Executing) {
                    self.execute_done(now_ms, txn, q, out);
                }
            }
        }
    }

    /// The client's operation `of` failed: with `OP_IGNORE_ERROR` a "not
    /// found" or "exists" is its result; anything else fails the request.
    fn client_op_failed(
        &mut self,
        txn: TxnRef,
        of: u16,
        e: ShoalError,
    ) -> Result<(), (u16, ShoalError)> {
        let t = self.txns.get_mut(&txn).expect("present");
        let ignorable = matches!(
            e.code,
            ErrorCode::TupleNotFound | ErrorCode::TupleAlreadyExists
        );
        if ignorable && t.op_flags[usize::from(of)] & OP_IGNORE_ERROR != 0 {
            return self.client_result(
                txn,
                of,
                OpResult {
                    code: e.code as u16,
                    data: Vec::new(),
                },
            );
        }
        Err((of, e))
    }

    /// Operation `of`'s result, bounded with the rest of the answer.
    fn client_result(
        &mut self,
        txn: TxnRef,
        of: u16,
        result: OpResult,
    ) -> Result<(), (u16, ShoalError)> {
        let max = self.cfg.max_answer_bytes;
        let t = self.txns.get_mut(&txn).expect("present");
        t.answer_bytes += super::RESULT_FIXED_BYTES + result.data.len();
        if t.answer_bytes > max {
            return Err((of, super::answer::answer_too_large(max)));
        }
        t.results[usize::from(of)] = Some(result);
        Ok(())
    }
}

/// Whether a derived operation on fragment `frag`, routed by distribution
/// `version`, may go: no earlier one on the fragment that is unanswered
/// (`answered[i]` false) went by another version. `versions` holds, per
/// fragment, the version every unanswered earlier one went by, so the
/// operations `routes` lists are searched only when the version changed;
/// it is updated for the operation about to go.
fn route_unmoved(
    versions: &mut Vec<(crate::signal::FragKey, u32)>,
    routes: &[(usize, crate::signal::FragKey, u32)],
    answered: &[bool],
    frag: crate::signal::FragKey,
    version: u32,
) -> bool {
    match versions.iter().position(|&(f, _)| f == frag) {
        None => versions.push((frag, version)),
        Some(j) if versions[j].1 == version => {}
        Some(j) => {
            let moved = routes
                .iter()
                .any(|&(i, f, v)| f == frag && v != version && answered.get(i) == Some(&false));
            if moved {
                return false;
            }
            // Every operation of the old version is answered.
            versions[j].1 = version;
        }
    }
    true
}

#[cfg(test)]
mod route_tests {
    use super::route_unmoved;
    use shoal_types::TableId;

    proptest::proptest! {
        /// Against the search of every earlier operation it replaces, over
        /// random mixes of operations on three fragments routed by three
        /// versions and answers to them.
        #[test]
        fn a_moved_route_is_found_as_a_search_of_every_operation_finds_it(
            steps in proptest::collection::vec(
                (0u8..3, 0u32..3, 0u8..3, proptest::arbitrary::any::<proptest::sample::Index>()),
                1..80,
            ),
        ) {
            let mut versions = Vec::new();
            let mut routes = Vec::new();
            let mut answered = Vec::new();
            for (frag, version, what, pick) in steps {
                if what == 0 && !answered.is_empty() {
                    // An answer to any operation sent so far.
                    let i = pick.index(answered.len());
                    answered[i] = true;
                    continue;
                }
                let key = (TableId(5), u32::from(frag));
                let model = !routes.iter().any(|&(i, f, v): &(usize, _, u32)| {
                    f == key && v != version && !answered[i]
                });
                let got = route_unmoved(&mut versions, &routes, &answered, key, version);
                proptest::prop_assert_eq!(got, model);
                if got {
                    routes.push((answered.len(), key, version));
                    answered.push(false);
                }
            }
        }
    }
}
