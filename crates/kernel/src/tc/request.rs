//! TC: a client's `TcKeyReq` — checks, the transaction record, and each
//! operation routed to its fragment's replicas as DIH sees them now.

use super::{conf, reject, AbortReply, Tc, TxnState, NO_OP};
use crate::dih::{Dih, TableDist};
use crate::node::{ConnId, Output};
use crate::signal::{BlockSignal, Chain, ROW_NONE};
use shoal_types::distribution::FragmentId;
use shoal_types::schema::{COLUMNS_MAX, KEY_BYTES_MAX, ROW_BYTES_MAX};
use shoal_types::{ErrorCode, ShoalError, TransId};
use shoal_wire::signals::ALL_COLUMNS;
use shoal_wire::signals::OP_BY_UNIQUE_KEY;
use shoal_wire::{ExecType, KeyOp, LockMode, OpType, TcKeyReq, TransState};
use std::collections::VecDeque;

/// The largest attribute list an insert, update or write can need: every
/// column once, each with a 4-byte header, holding at most a row's bytes.
const ATTRS_BYTES_MAX: usize = 2 + 4 * COLUMNS_MAX + ROW_BYTES_MAX;
/// The largest read column list: every column once.
const READ_LIST_BYTES_MAX: usize = 2 + 2 * COLUMNS_MAX;

/// Checks what can be checked of an operation without its table: sizes
/// (so no operation grows into a node signal larger than a frame) and the
/// shape of a read's column list. The LQH that runs it checks the rest.
fn check_op(op: &KeyOp) -> Result<(), ShoalError> {
    let bad = |code, detail: String| Err(ShoalError::with_detail(code, detail));
    if op.key().len() > KEY_BYTES_MAX {
        return bad(
            ErrorCode::BadPrimaryKey,
            format!(
                "a key of {} bytes; keys are at most {KEY_BYTES_MAX}",
                op.key().len()
            ),
        );
    }
    match op.op {
        OpType::Read => {
            if op.attrs().len() > READ_LIST_BYTES_MAX {
                return bad(
                    ErrorCode::BadRequest,
                    format!(
                        "a read column list of {} bytes; it names each column at most once",
                        op.attrs().len()
                    ),
                );
            }
            read_list_has_no_repeats(op.attrs())
        }
        OpType::Delete if !op.attrs().is_empty() => bad(
            ErrorCode::BadRequest,
            "a delete carries no attributes".into(),
        ),
        OpType::Delete => Ok(()),
        OpType::Insert | OpType::Update | OpType::Write if op.attrs().len() > ATTRS_BYTES_MAX => {
            bad(
                ErrorCode::RequestTooLarge,
                format!(
                    "an attribute list of {} bytes; a row holds at most {ROW_BYTES_MAX}",
                    op.attrs().len()
                ),
            )
        }
        OpType::Insert | OpType::Update | OpType::Write => Ok(()),
    }
}

/// A read may name each column once: a list repeating a column would make
/// the answer as large as the repeats (one small request, a huge answer).
fn read_list_has_no_repeats(list: &[u8]) -> Result<(), ShoalError> {
    if list.len() < 2 {
        return Ok(()); // LQH reports the truncation
    }
    let count = u16::from_le_bytes([list[0], list[1]]);
    if count == ALL_COLUMNS {
        return Ok(());
    }
    let mut seen = [0u64; COLUMNS_MAX.div_ceil(64)];
    for c in list[2..].chunks_exact(2) {
        let id = usize::from(u16::from_le_bytes([c[0], c[1]]));
        if id >= COLUMNS_MAX {
            continue; // LQH reports the unknown column
        }
        let (w, b) = (id / 64, 1u64 << (id % 64));
        if seen[w] & b != 0 {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!("the read names column {id} twice"),
            ));
        }
        seen[w] |= b;
    }
    Ok(())
}

/// Where an operation goes, as DIH sees it now.
pub(super) struct Routed {
    pub frag: FragmentId,
    pub version: u32,
    pub chain: Chain,
    /// A replica of the fragment is being copied to.
    pub copying: bool,
    /// For a write of a table with unique indexes: the indexes TC keeps
    /// (see [`super::unique::expected_uniques`]); empty otherwise.
    pub expected_uniques: Vec<u8>,
}

/// Routes `op` of transaction `t` by DIH's state now, and records the
/// nodes and fragments it will lock or write. `None`: no replica of its
/// fragment is alive. An unknown table goes to this node's LQH, which
/// answers "no such table".
pub(super) fn route_op(
    t: &mut super::Txn,
    op: &KeyOp,
    route: Option<&TableDist>,
    own: u16,
) -> Option<Routed> {
    let read = op.op == OpType::Read;
    let locks = !(read && op.lock == LockMode::CommittedRead);
    let Some(route) = route else {
        if locks {
            // Its LQH may keep a record of the transaction until told the
            // outcome (it answers "no such table" here).
            super::add_frag(&mut t.part_mut(own).primary, (op.table, 0));
        }
        return Some(Routed {
            frag: 0,
            version: 0,
            chain: Chain::new(&[own]),
            copying: false,
            expected_uniques: Vec::new(),
        });
    };
    let frag = route.fragment_of(op.key());
    let f = &route.frags[frag as usize];
    if !read && route.read_backup {
        // Readers may use any replica: answer the commit only once every
        // replica released its locks.
        t.ack_after_complete = true;
    }
    let primary_chain = if read { f.read } else { f.write }?;
    // A transaction reads its own writes: once it locked or wrote the
    // fragment, its reads go to the primary (a backup may not have seen
    // the write yet).
    let touched = t
        .parts
        .iter()
        .any(|p| p.node == primary_chain[0] && p.primary.contains(&(op.table, frag)));
    let chain = if locks || touched {
        primary_chain
    } else {
        route
            .committed_read_chain(frag, own)
            .unwrap_or(primary_chain)
    };
    if locks {
        for (hop, &node) in chain.iter().enumerate() {
            let part = t.part_mut(node);
            if hop == 0 {
                super::add_frag(&mut part.primary, (op.table, frag));
            } else {
                super::add_frag(&mut part.backup, (op.table, frag));
            }
        }
    }
    let expected_uniques = if read {
        Vec::new()
    } else {
        super::unique::expected_uniques(&route.layout.table)
    };
    Some(Routed {
        frag,
        version: f.version,
        chain,
        copying: f.copying.is_some(),
        expected_uniques,
    })
}

pub(super) fn no_replica() -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NodeFailed,
        "no replica of the operation's fragment is alive; retry once the cluster has recovered",
    )
}

pub(super) fn overloaded_error(node: u16) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::SendBufferOverloaded,
        format!("too much waits unsent towards data node {node}, which holds the operation's fragment; retry after a moment"),
    )
}

impl Tc {
    #[allow(clippy::too_many_arguments)]
    pub fn client_req(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        req: TcKeyReq,
        dih: &Dih,
        started: bool,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let (trans, request) = (req.trans, req.request);
        let send = |out: &mut Vec<Output>, signal| out.push(Output::Send { conn, signal });
        let timeout = self.cfg.transaction_inactive_timeout_ms;
        let txn_ref = match self.by_client.get(&(conn, trans)).map(|n| n.txn) {
            Some(r) => {
                let Some(t) = self.txns.get_mut(&r) else {
                    // Committed, its answer not acknowledged yet: a repeat
                    // of one of its requests, or a request after its end.
                    let e = if request == 0 {
                        ShoalError::with_detail(
                            ErrorCode::BadRequest,
                            format!(
                                "{trans:?} was begun already on this connection; ids must grow"
                            ),
                        )
                    } else {
                        ShoalError::with_detail(
                            ErrorCode::TransactionNotFound,
                            format!("{trans:?} has committed; start a new transaction"),
                        )
                    };
                    return send(out, reject(trans, request, &e, NO_OP));
                };
                if request <= t.request {
                    // A repeat of a request already taken: its answer is
                    // sent (or will be) once.
                    return;
                }
                if request != t.request + 1 {
                    let e = ShoalError::with_detail(
                        ErrorCode::BadRequest,
                        format!(
                            "request number {request} of {trans:?}; the next is {}",
                            t.request + 1
                        ),
                    );
                    return send(out, reject(trans, request, &e, NO_OP));
                }
                match &t.state {
                    TxnState::Open if super::idle_too_long(t, now_ms, timeout) => {
                        t.request = request;
                        let reply = AbortReply::Failed {
                            error: super::inactive_error(timeout),
                            op_index: NO_OP,
                        };
                        return self.abort(r, reply, q, out);
                    }
                    TxnState::Open => {
                        t.request = request;
                        r
                    }
                    TxnState::Ended(error) => {
                        let error = error.clone();
                        self.remove(r, q, out);
                        return send(out, reject(trans, request, &error, NO_OP));
                    }
                    TxnState::Aborting(AbortReply::Later(error)) => {
                        // Aborted while the client was away (a node it used
                        // failed, or it idled too long); the abort is still
                        // finishing. Tell the client now; the record goes
                        // quietly when the abort is done.
                        let error = error.clone();
                        t.request = request;
                        t.state = TxnState::Aborting(AbortReply::Silent);
                        return send(out, reject(trans, request, &error, NO_OP));
                    }
                    _ => {
                        let e = ShoalError::with_detail(
                            ErrorCode::BadRequest,
                            "the transaction already has a request in progress",
                        );
                        return send(out, reject(trans, request, &e, NO_OP));
                    }
                }
            }
            None => match self.begin(now_ms, conn, &req, started, out) {
                Some(r) => r,
                None => return,
            },
        };
        self.run_request(now_ms, txn_ref, req, dih, q, out);
    }

    /// A transaction's first request: checks it may begin, then makes its
    /// record. `None`: answered already (refused, or nothing to do).
    fn begin(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        req: &TcKeyReq,
        started: bool,
        out: &mut Vec<Output>,
    ) -> Option<u64> {
        let (trans, request) = (req.trans, req.request);
        let refuse = |out: &mut Vec<Output>, e: ShoalError| {
            out.push(Output::Send {
                conn,
                signal: reject(trans, request, &e, NO_OP),
            });
            None
        };
        let client = self.clients.entry(conn).or_default();
        let api_node = client.api_node;
        if request == 0 {
            // Ids must grow per connection, so a repeat of the first
            // request of a finished transaction is refused.
            if let Some(newest) = client.newest.filter(|n| trans.0 <= n.0) {
                let e = ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!(
                        "{trans:?} is not above {newest:?}, the newest transaction begun on this connection; ids must grow"
                    ),
                );
                return refuse(out, e);
            }
            client.newest = Some(trans);
        }
        if req.exec == ExecType::Rollback && req.ops.is_empty() {
            out.push(Output::Send {
                conn,
                signal: conf(trans, request, TransState::Aborted, false, Vec::new()),
            });
            return None;
        }
        if request != 0 {
            let e = ShoalError::with_detail(
                ErrorCode::TransactionNotFound,
                format!("{trans:?} has ended (request {request} came after its end)"),
            );
            return refuse(out, e);
        }
        if !started {
            let e = ShoalError::with_detail(
                ErrorCode::NodeNotReady,
                "this data node is not started (joining the cluster or copying its data); retry on another node",
            );
            return refuse(out, e);
        }
        if self.txns.len() >= self.cfg.max_concurrent_transactions {
            let e = ShoalError::with_detail(
                ErrorCode::TooManyTransactions,
                format!(
                    "max_concurrent_transactions={} reached",
                    self.cfg.max_concurrent_transactions
                ),
            );
            return refuse(out, e);
        }
        let r = self.next_ref;
        self.next_ref += 1;
        self.compact_started();
        self.started.push_back(super::Started {
            txn: r,
            conn,
            trans,
        });
        let t = self.txns.get_or_insert(r);
        t.conn = conn;
        t.trans = trans;
        t.api_node = api_node;
        t.last_active_ms = now_ms;
        self.by_client.insert(
            (conn, trans),
            super::Named {
                txn: r,
                unacked: false,
            },
        );
        Some(r)
    }

    /// Sends a taken request's operations.
    fn run_request(
        &mut self,
        now_ms: u64,
        txn_ref: u64,
        req: TcKeyReq,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let low_water = self.low_water();
        let own = self.cfg.node_id;
        let t = self.txns.get_mut(&txn_ref).expect("present");
        t.last_active_ms = now_ms;
        if req.exec == ExecType::Rollback {
            return self.abort(txn_ref, AbortReply::RolledBack, q, out);
        }
        // Every operation is checked before any is sent.
        if let Some((i, e)) = req
            .ops
            .iter()
            .enumerate()
            .find_map(|(i, op)| check_op(op).err().map(|e| (i, e)))
        {
            let reply = AbortReply::Failed {
                error: e,
                op_index: i as u16,
            };
            return self.abort(txn_ref, reply, q, out);
        }
        t.op_base = t.ops_total as u32;
        t.ops_total += req.ops.len();
        if t.ops_total > self.cfg.max_operations_per_transaction {
            let e = ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "{} operations in one transaction; max_operations_per_transaction={}",
                    t.ops_total, self.cfg.max_operations_per_transaction
                ),
            );
            let reply = AbortReply::Failed {
                error: e,
                op_index: NO_OP,
            };
            return self.abort(txn_ref, reply, q, out);
        }
        if req.durable && self.cfg.epoch_interval_ms == 0 {
            let e = ShoalError::with_detail(
                ErrorCode::BadRequest,
                "a durable commit was asked of a diskless cluster (diskless = true): no commit is ever durable; commit without the durable option",
            );
            let reply = AbortReply::Failed {
                error: e,
                op_index: NO_OP,
            };
            return self.abort(txn_ref, reply, q, out);
        }
        t.state = TxnState::Executing;
        t.exec = req.exec;
        t.durable_answer = req.durable && req.exec == ExecType::Commit;
        t.results.clear();
        t.results.resize(req.ops.len(), None);
        t.answer_bytes = super::CONF_FIXED_BYTES;
        t.answered.clear();
        t.answered.resize(req.ops.len(), false);
        t.op_flags.clear();
        t.op_chains.clear();
        t.outstanding = req.ops.len();
        t.outstanding_chained = 0;
        t.commit_at_last_op = None;
        t.derived.clear();
        t.derived_routes.clear();
        t.derived_versions.clear();
        t.has_checked_delete = false;
        let (api_node, trans) = (t.api_node, t.trans);
        // One operation that is the whole transaction, committed by this
        // request: its last replica may commit as soon as it has prepared.
        let whole_txn = t.op_base == 0 && req.ops.len() == 1 && req.exec == ExecType::Commit;
        let mut refused: Option<(usize, ShoalError)> = None;
        // Operations by unique key start with a look-up of the index,
        // sent once every operation of the request has its slot.
        let mut lookups = Vec::new();
        for (i, op) in req.ops.into_iter().enumerate() {
            let route = dih.table(op.table);
            if let Err(e) = super::unique::check_table_use(&op, route, dih) {
                refused = Some((i, e));
                break;
            }
            if op.flags & OP_BY_UNIQUE_KEY != 0 {
                // Its slot is answered by the operations it starts.
                t.op_flags.push(op.flags);
                t.op_chains.push(Chain::new(&[own]));
                t.answered[i] = true;
                t.outstanding -= 1;
                lookups.push((i as u16, op));
                continue;
            }
            let Some(routed) = route_op(t, &op, route, own) else {
                refused = Some((i, no_replica()));
                break;
            };
            let chain = routed.chain;
            if self.overloaded.contains(&chain[0]) {
                refused = Some((i, overloaded_error(chain[0])));
                break;
            }
            let chained = chain.len() > 1;
            // Two replicas only: with more, the middle ones still need the
            // backups' round. Not for read-from-backup tables, whose
            // answer waits for complete anyway, nor while a replica is
            // being copied (the decision must rest with a full replica),
            // nor for a write that may add index operations.
            let commit_at_last = whole_txn
                && chain.len() == 2
                && !t.ack_after_complete
                && !routed.copying
                && routed.expected_uniques.is_empty();
            let op_no = t.op_base + i as u32;
            if commit_at_last {
                t.commit_at_last_op = Some(op_no);
            }
            t.op_flags.push(op.flags);
            t.op_chains.push(chain);
            t.outstanding_chained += usize::from(chained);
            q.push_back(BlockSignal::LqhKeyReq {
                txn: txn_ref,
                op_no,
                low_water,
                frag: routed.frag,
                frag_version: routed.version,
                row: ROW_NONE,
                row_new: false,
                copied: false,
                api_node,
                trans: TransId(trans.0),
                op,
                chain,
                hop: 0,
                commit_at_last,
                fired: routed.expected_uniques.into(),
            });
        }
        if let Some((i, e)) = refused {
            // Nothing after operation i was sent; the ones before may be
            // out: the abort waits for them as for any failure.
            let sent = t.op_chains.len();
            for j in sent..t.answered.len() {
                t.answered[j] = true;
            }
            t.outstanding = t.outstanding.saturating_sub(t.answered.len() - sent);
            let reply = AbortReply::Failed {
                error: e,
                op_index: i as u16,
            };
            return self.abort(txn_ref, reply, q, out);
        }
        for (of, op) in lookups {
            if let Err(e) = self.start_unique_op(txn_ref, of, op, dih, q) {
                return self.fail_derived(txn_ref, of, e, q, out);
            }
        }
        let t = self.txns.get_mut(&txn_ref).expect("present");
        if t.commit_at_last_op.is_some() {
            // Its last replica may decide, in this epoch or a later one:
            // the epoch cannot complete here until the answer says which.
            self.count_in_epoch(txn_ref, self.epoch_now.current);
        }
        let t = self.txns.get_mut(&txn_ref).expect("present");
        if t.outstanding == 0 {
            self.execute_done(now_ms, txn_ref, q, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(list: &[u16]) -> KeyOp {
        let mut attrs = (list.len() as u16).to_le_bytes().to_vec();
        for c in list {
            attrs.extend_from_slice(&c.to_le_bytes());
        }
        KeyOp::new(
            OpType::Read,
            LockMode::CommittedRead,
            0,
            shoal_types::TableId(1),
            shoal_types::SchemaVersion(1),
            &[1, 0, 0, 0],
            &attrs,
        )
    }

    #[test]
    fn operations_are_checked_for_size_and_repeats() {
        assert!(check_op(&read(&[0, 1, 2])).is_ok());
        let e = check_op(&read(&[1, 0, 1])).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.detail.contains("twice"));
        let many: Vec<u16> = (0..COLUMNS_MAX as u16 + 1).collect();
        assert!(check_op(&read(&many)).is_err());
        let mut long_key = read(&[0]);
        long_key.set_key(&vec![0; KEY_BYTES_MAX + 1]);
        assert_eq!(
            check_op(&long_key).unwrap_err().code,
            ErrorCode::BadPrimaryKey
        );
        let mut big = read(&[]);
        big.op = OpType::Update;
        big.set_attrs(&vec![0; ATTRS_BYTES_MAX + 1]);
        assert_eq!(check_op(&big).unwrap_err().code, ErrorCode::RequestTooLarge);
        let mut del = read(&[]);
        del.op = OpType::Delete;
        assert_eq!(check_op(&del).unwrap_err().code, ErrorCode::BadRequest);
        del.set_attrs(&[]);
        assert!(check_op(&del).is_ok());
    }
}
