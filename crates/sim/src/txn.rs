//! One simulated client transaction: what it sent, what it may expect, and
//! the check of every answer against the model.
//!
//! The transaction tracks a *view* of the keys it holds a lock on or wrote
//! (`known`): those cannot change under it, so answers about them must match
//! exactly. A key it has not locked may change at any moment, so an answer
//! about it must match some image the key held between the request's
//! arrival at the node and the answer (`Model::held_since`) — or, if the
//! operation took a lock, the image the key has now.

use std::collections::{BTreeMap, BTreeSet};

use shoal_types::{AttrSlice, ErrorCode, TableDef, TransId, Value};
use shoal_wire::{ExecType, LockMode, OpResult, TcKeyConf, TcKeyRef, TransState};

use crate::model::{Image, Model, Row};

/// Column ids of the simulated table `(k INT UNSIGNED PK, v BIGINT, s VARCHAR(16) NULL)`.
pub const K_COL: u16 = 0;
pub const V_COL: u16 = 1;
pub const S_COL: u16 = 2;

/// `op_index` of a refusal that concerns no single operation.
pub const NO_OP: u16 = 0xFFFF;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read(LockMode),
    /// A read by unique key (`--unique`): the row whose `s` is the op's
    /// `row.s` (its `key` is unused).
    ReadUnique(LockMode),
    Insert,
    /// `only_v`: sets `v` and leaves `s` as it is.
    Update {
        only_v: bool,
    },
    Write,
    Delete,
}

impl OpKind {
    /// Whether the operation takes a row lock (all but committed reads).
    pub fn locks(self) -> bool {
        !matches!(
            self,
            OpKind::Read(LockMode::CommittedRead) | OpKind::ReadUnique(LockMode::CommittedRead)
        )
    }
}

#[derive(Clone, Debug)]
pub struct PlannedOp {
    pub kind: OpKind,
    pub key: u32,
    /// The values written (insert, update, write).
    pub row: Row,
    /// Sent with the ignore-error flag: "not found" / "already exists"
    /// come back in the op's result instead of aborting.
    pub ignore: bool,
}

#[derive(Debug)]
pub struct Request {
    pub exec: ExecType,
    pub ops: Vec<PlannedOp>,
    /// The model's commit number when the node received the request.
    pub arrived_at_seq: Option<u64>,
    /// The transaction's first request (only it may meet the limit on
    /// concurrent transactions).
    pub first: bool,
    /// Sent after the transaction sat idle past the inactivity timeout:
    /// the node must have aborted it.
    pub after_long_idle: bool,
    /// It waited in a frozen coordinator: from the node's clock, the
    /// transaction may have been idle past the inactivity timeout.
    pub waited_in_frozen_node: bool,
}

/// What an answer meant for the transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still open (after NoCommit).
    Open,
    /// Committed: these are its final images, to apply to the model.
    Committed(Vec<(u32, Image)>),
    RolledBack,
    /// Refused and aborted by the node with this code.
    Failed(u16),
}

pub struct Txn {
    pub trans: TransId,
    /// Order of creation over all clients (progress checks).
    pub serial: u64,
    /// The coordinator: its connection, node and incarnation (chosen at
    /// the first request).
    pub coordinator: Option<(u64, u16, u32)>,
    /// Its coordinator failed with its commit in flight: the client waits
    /// until this time for the node taking over to say what happened.
    pub awaiting_takeover: Option<u64>,
    pub requests_sent: u32,
    pub in_flight: Option<Request>,
    /// The last answer's outcome, until the client receives it.
    pub undelivered: Option<Outcome>,
    /// The client left it idle past the inactivity timeout.
    pub idled_long: bool,
    /// Its commit point was seen, with these results: the confirmation
    /// must carry the same.
    pub commit_point: Option<Vec<OpResult>>,
    /// The committed answer asked for an acknowledgement.
    pub ack_wanted: bool,
    /// Its commit point was seen, but the only replicas that committed it
    /// died before anyone heard: it ends aborted.
    pub taken_back: bool,
    /// Its commit request asked for a durable answer.
    pub durable_commit: bool,
    /// Keys this transaction locked or wrote, with the image it sees.
    known: BTreeMap<u32, Image>,
    /// Per key in `known`, the model's latest commit of it when this
    /// transaction first locked it: the commit it saw or overwrote. (Taken
    /// then, not at its commit: a read lock lives on one replica only, and
    /// if that node fails after the commit decision, a later writer may
    /// commit before this transaction's commit reaches the survivors.)
    seen: BTreeMap<u32, u64>,
    written: BTreeSet<u32>,
}

impl Txn {
    /// The commits this transaction saw or overwrote (see `seen`): it must
    /// not land in an earlier epoch than any of them.
    pub fn dependencies(&self) -> Vec<u64> {
        self.seen.values().copied().collect()
    }

    /// It locked `key` and sees `image` there now.
    fn remember(&mut self, key: u32, image: Image, model: &Model) {
        self.seen
            .entry(key)
            .or_insert_with(|| model.latest_seq(key));
        self.known.insert(key, image);
    }

    pub fn new(trans: TransId, serial: u64) -> Txn {
        Txn {
            trans,
            serial,
            coordinator: None,
            awaiting_takeover: None,
            requests_sent: 0,
            in_flight: None,
            undelivered: None,
            idled_long: false,
            commit_point: None,
            ack_wanted: false,
            taken_back: false,
            durable_commit: false,
            known: BTreeMap::new(),
            seen: BTreeMap::new(),
            written: BTreeSet::new(),
        }
    }

    /// Checks a confirmation of the request in flight.
    pub fn check_conf(
        &mut self,
        conf: &TcKeyConf,
        model: &Model,
        def: &TableDef,
    ) -> Result<Outcome, String> {
        let req = self
            .in_flight
            .take()
            .ok_or("a confirmation with no request in flight")?;
        let since = req.arrived_at_seq.ok_or("answered before it arrived")?;
        let expected_state = match req.exec {
            ExecType::NoCommit => TransState::Open,
            ExecType::Commit => TransState::Committed,
            ExecType::Rollback => TransState::Aborted,
        };
        if conf.state != expected_state {
            return Err(format!(
                "{:?} request answered with state {:?}",
                req.exec, conf.state
            ));
        }
        if conf.results.len() != req.ops.len() {
            return Err(format!(
                "{} results for {} operations",
                conf.results.len(),
                req.ops.len()
            ));
        }
        if req.exec == ExecType::Rollback {
            return Ok(Outcome::RolledBack);
        }
        if req.after_long_idle {
            return Err("a request after a long idle period was served; the inactivity timeout should have aborted the transaction".into());
        }
        // Reads by unique key find their row in a second step, before or
        // after the request's other operations reach it: they are checked
        // against what the transaction saw before the request, and the
        // rows they locked join its view after the others.
        let mut found_by_unique = Vec::new();
        for (i, (op, res)) in req.ops.iter().zip(&conf.results).enumerate() {
            if let OpKind::ReadUnique(lock) = op.kind {
                let found = self
                    .check_read_unique(op, lock, res, model, since, def, &req.ops)
                    .map_err(|e| format!("op {i} ({:?}): {e}", op.kind))?;
                found_by_unique.extend(found);
            }
        }
        for (i, (op, res)) in req.ops.iter().zip(&conf.results).enumerate() {
            if !matches!(op.kind, OpKind::ReadUnique(_)) {
                self.check_op(op, res, model, since, def)
                    .map_err(|e| format!("op {i} ({:?} key {}): {e}", op.kind, op.key))?;
            }
        }
        for (key, image) in found_by_unique {
            if !self.known.contains_key(&key) {
                self.remember(key, image, model);
            }
        }
        Ok(match req.exec {
            ExecType::Commit => Outcome::Committed(
                self.written
                    .iter()
                    .map(|k| (*k, self.known[k].clone()))
                    .collect(),
            ),
            _ => Outcome::Open,
        })
    }

    fn check_op(
        &mut self,
        op: &PlannedOp,
        res: &OpResult,
        model: &Model,
        since: u64,
        def: &TableDef,
    ) -> Result<(), String> {
        let key = op.key;
        let code = res.code;
        let not_found = ErrorCode::TupleNotFound as u16;
        let exists_err = ErrorCode::TupleAlreadyExists as u16;
        if code != 0 && !op.ignore {
            return Err(format!("error {code} in a result without the ignore flag"));
        }
        let allowed = match op.kind {
            OpKind::Read(_) | OpKind::ReadUnique(_) | OpKind::Update { .. } | OpKind::Delete => {
                code == 0 || code == not_found
            }
            OpKind::Insert => code == 0 || code == exists_err,
            OpKind::Write => code == 0,
        };
        if !allowed {
            return Err(format!("unexpected result code {code}"));
        }
        let known = self.known.get(&key).cloned();
        match op.kind {
            OpKind::ReadUnique(_) => return Err("checked apart".into()),
            OpKind::Read(LockMode::CommittedRead) => {
                let got = decode_read(res, key, def)?;
                let ok = match &known {
                    Some(image) => image == &got,
                    None => model.held_since(key, since, &got),
                };
                if !ok {
                    return Err(format!("committed read returned {got:?}, which the key never held (own view {known:?}, model now {:?})", model.current(key)));
                }
            }
            OpKind::Read(_) => {
                let got = decode_read(res, key, def)?;
                match known {
                    Some(image) => expect_eq(&got, &image, "locked read")?,
                    None if got.is_some() => {
                        expect_eq(&got, model.current(key), "locked read of a row now locked")?;
                        self.remember(key, got, model);
                    }
                    None => expect_held(model, key, since, &None)?,
                }
            }
            OpKind::Insert => {
                let new = Some(op.row.clone());
                match (code == 0, known) {
                    (true, Some(Some(_))) => {
                        return Err("insert succeeded over a row this transaction sees".into())
                    }
                    (true, Some(None)) => self.write(key, new, model),
                    (true, None) => {
                        expect_eq(
                            model.current(key),
                            &None,
                            "insert succeeded, so the key was free",
                        )?;
                        self.write(key, new, model);
                    }
                    (false, Some(Some(_))) => {}
                    (false, Some(None)) => {
                        return Err("insert found a row this transaction deleted".into())
                    }
                    (false, None) => {
                        // It found the row and locked it.
                        if model.current(key).is_none() {
                            return Err("insert said 'already exists' but the key has no row and the insert holds its lock".into());
                        }
                        self.remember(key, model.current(key).clone(), model);
                    }
                }
            }
            OpKind::Update { only_v } => {
                let old = match (code == 0, known) {
                    (true, Some(Some(old))) => old,
                    (true, Some(None)) => {
                        return Err("update succeeded on a row this transaction deleted".into())
                    }
                    (true, None) => model.current(key).clone().ok_or(
                        "update succeeded but the key has no row while the update holds its lock",
                    )?,
                    (false, Some(Some(r))) => {
                        return Err(format!(
                            "update said 'not found' but this transaction sees {r:?}"
                        ))
                    }
                    (false, Some(None)) => return Ok(()),
                    (false, None) => return expect_held(model, key, since, &None),
                };
                let s = if only_v { old.s } else { op.row.s.clone() };
                self.write(key, Some(Row { v: op.row.v, s }), model);
            }
            OpKind::Write => self.write(key, Some(op.row.clone()), model),
            OpKind::Delete => match (code == 0, known) {
                (true, Some(Some(_))) => self.write(key, None, model),
                (true, Some(None)) => {
                    return Err("delete succeeded on a row this transaction deleted".into())
                }
                (true, None) => {
                    if model.current(key).is_none() {
                        return Err("delete succeeded but the key has no row while the delete holds its lock".into());
                    }
                    self.write(key, None, model);
                }
                (false, Some(Some(r))) => {
                    return Err(format!(
                        "delete said 'not found' but this transaction sees {r:?}"
                    ))
                }
                (false, Some(None)) => {}
                (false, None) => expect_held(model, key, since, &None)?,
            },
        }
        Ok(())
    }

    /// A read by unique key: a row found had the value while the request
    /// ran (and has it now, under a lock); "not found" needs a moment
    /// when no row had it. Returns the row a locking read locked.
    #[allow(clippy::too_many_arguments)]
    fn check_read_unique(
        &self,
        op: &PlannedOp,
        lock: LockMode,
        res: &OpResult,
        model: &Model,
        since: u64,
        def: &TableDef,
        request: &[PlannedOp],
    ) -> Result<Option<(u32, Image)>, String> {
        let x = op
            .row
            .s
            .as_ref()
            .ok_or("a read by unique key without a value")?;
        match res.code {
            0 => {}
            c if c == ErrorCode::TupleNotFound as u16 && op.ignore => {
                return self
                    .check_unique_absent(x, model, since, request)
                    .map(|()| None);
            }
            c => return Err(format!("unexpected result code {c}")),
        }
        let key = result_key(res)?;
        let got = decode_read(res, key, def)?;
        let Some(row) = &got else {
            return Err("a read by unique key returned no row".into());
        };
        let has_x = |image: &Image| image.as_ref().is_some_and(|r| r.s.as_ref() == Some(x));
        let written_here = request
            .iter()
            .any(|o| o.key == key && !matches!(o.kind, OpKind::Read(_) | OpKind::ReadUnique(_)));
        if written_here {
            // The request also writes the row it found: the look-up, the
            // read and the write meet in any order, so it may see either.
            return Ok(None);
        }
        if let Some(image) = self.known.get(&key) {
            // A row this transaction held before the request: what it sees.
            expect_eq(&got, image, "read by unique key of a row it holds")?;
            return Ok(None);
        }
        if lock == LockMode::CommittedRead {
            // The entry and then the row are read without locks: the row
            // may have moved on from the value in between, but it must
            // have held what came back, and the value at some point.
            expect_held(model, key, since, &got)?;
            if !model
                .history_since(key, since)
                .iter()
                .any(|(_, i)| has_x(i))
            {
                return Err(format!(
                    "read by s={x:?} returned key {key}, which never had that value while the request ran"
                ));
            }
            return Ok(None);
        }
        expect_eq(&got, model.current(key), "locked read by unique key")?;
        if row.s.as_ref() != Some(x) {
            return Err(format!(
                "a locked read by s={x:?} returned key {key} holding {:?}",
                row.s
            ));
        }
        Ok(Some((key, got)))
    }

    /// "No row has s = `x`": wrong if this transaction sees a row with it,
    /// or some key held it from before the request until now — unless
    /// the request itself writes that key (its write and the look-up may
    /// meet in either order).
    fn check_unique_absent(
        &self,
        x: &str,
        model: &Model,
        since: u64,
        request: &[PlannedOp],
    ) -> Result<(), String> {
        let written_here = |k: u32| {
            request
                .iter()
                .any(|o| o.key == k && !matches!(o.kind, OpKind::Read(_) | OpKind::ReadUnique(_)))
        };
        let has_x = |image: &Image| image.as_ref().is_some_and(|r| r.s.as_deref() == Some(x));
        if let Some((k, _)) = self
            .known
            .iter()
            .find(|(&k, i)| has_x(i) && !written_here(k))
        {
            return Err(format!(
                "read by s={x:?} found nothing, but this transaction sees key {k} with it"
            ));
        }
        let held_throughout = (0..model.keys()).find(|&k| {
            !self.known.contains_key(&k)
                && !written_here(k)
                && matches!(model.history_since(k, since), [(_, image)] if has_x(image))
        });
        match held_throughout {
            Some(k) => Err(format!(
                "read by s={x:?} found nothing, but key {k} held it all the while"
            )),
            None => Ok(()),
        }
    }

    fn write(&mut self, key: u32, image: Image, model: &Model) {
        self.remember(key, image, model);
        self.written.insert(key);
    }

    /// Checks a refusal of the request in flight (the node aborted the
    /// transaction).
    pub fn check_ref(&mut self, r: &TcKeyRef, model: &Model) -> Result<Outcome, String> {
        let req = self
            .in_flight
            .take()
            .ok_or("a refusal with no request in flight")?;
        let since = req.arrived_at_seq.ok_or("refused before it arrived")?;
        let code = r.code;
        // Failures and restarts: the transaction was aborted, whatever it
        // did (it used a node that failed, a route changed under it, a
        // replica still restoring after a cluster restart, or its
        // coordinator is not started).
        let replica_restoring = code == ErrorCode::NodeNotReady as u16 && r.op_index != NO_OP;
        if code == ErrorCode::NodeFailed as u16
            || code == ErrorCode::DistributionChanged as u16
            || replica_restoring
        {
            return Ok(Outcome::Failed(code));
        }
        if req.waited_in_frozen_node
            && code == ErrorCode::InactiveTimeout as u16
            && r.op_index == NO_OP
        {
            return Ok(Outcome::Failed(code));
        }
        if req.after_long_idle {
            return if code == ErrorCode::InactiveTimeout as u16 && r.op_index == NO_OP {
                Ok(Outcome::Failed(code))
            } else {
                Err(format!("after a long idle period expected error 237 (inactive timeout), got {code} at op {}: {}", r.op_index, r.detail))
            };
        }
        if code == ErrorCode::TooManyTransactions as u16 || code == ErrorCode::NodeNotReady as u16 {
            return if req.first && r.op_index == NO_OP {
                Ok(Outcome::Failed(code))
            } else {
                Err(format!(
                    "error {code} for a transaction that already existed: {}",
                    r.detail
                ))
            };
        }
        let i = r.op_index as usize;
        let op = req
            .ops
            .get(i)
            .ok_or_else(|| format!("error {code} at op {i} of {}: {}", req.ops.len(), r.detail))?;
        if code == ErrorCode::RedoLogFull as u16 {
            // A replica's redo log ran short of space: writes wait for a
            // checkpoint, reads never do.
            return if matches!(op.kind, OpKind::Read(_)) {
                Err(format!("error 410 (redo log full) on a read: {}", r.detail))
            } else {
                Ok(Outcome::Failed(code))
            };
        }
        if let OpKind::ReadUnique(_) = op.kind {
            if code == ErrorCode::TupleNotFound as u16 && !op.ignore {
                let x = op
                    .row
                    .s
                    .as_deref()
                    .ok_or("a read by unique key without a value")?;
                self.check_unique_absent(x, model, since, &req.ops)?;
                return Ok(Outcome::Failed(code));
            }
        }
        if code == ErrorCode::TupleAlreadyExists as u16 && r.detail.contains("unique index") {
            return self.check_unique_clash(&req, op, since, model, r);
        }
        if code == ErrorCode::DeadlockTimeout as u16 {
            return if op.kind.locks() {
                Ok(Outcome::Failed(code))
            } else {
                Err("deadlock timeout on a committed read, which takes no lock".into())
            };
        }
        let expected_kind = match code {
            c if c == ErrorCode::TupleNotFound as u16 => {
                matches!(
                    op.kind,
                    OpKind::Read(_) | OpKind::Update { .. } | OpKind::Delete
                )
            }
            c if c == ErrorCode::TupleAlreadyExists as u16 => op.kind == OpKind::Insert,
            _ => false,
        };
        if !expected_kind || op.ignore {
            return Err(format!(
                "unexpected error {code} for {:?} (ignore flag {}): {}",
                op.kind, op.ignore, r.detail
            ));
        }
        // Replay the earlier operations of the request, whose results the
        // refusal does not carry: a key whose outcome depended on an
        // unlocked image is ambiguous from then on.
        let mut view = self.known.clone();
        let mut ambiguous = BTreeSet::new();
        for prior in &req.ops[..i] {
            let k = prior.key;
            if ambiguous.contains(&k) {
                continue;
            }
            let current = view.get(&k).cloned();
            match (prior.kind, current) {
                (OpKind::Read(LockMode::CommittedRead), _)
                | (OpKind::Read(_), Some(_))
                | (OpKind::ReadUnique(_), _) => {}
                (OpKind::Write, _) => {
                    view.insert(k, Some(prior.row.clone()));
                }
                (OpKind::Insert, Some(None)) => {
                    view.insert(k, Some(prior.row.clone()));
                }
                (OpKind::Update { only_v }, Some(Some(old))) => {
                    let s = if only_v { old.s } else { prior.row.s.clone() };
                    view.insert(k, Some(Row { v: prior.row.v, s }));
                }
                (OpKind::Delete, Some(Some(_))) => {
                    view.insert(k, None);
                }
                (_, Some(_)) => {} // failed and ignored: no change
                (_, None) => {
                    ambiguous.insert(k);
                }
            }
        }
        if ambiguous.contains(&op.key) {
            return Ok(Outcome::Failed(code));
        }
        let row_exists = match view.get(&op.key) {
            Some(image) => image.is_some(),
            None => {
                // Unlocked: the image seen may be any the key held meanwhile.
                let plausible = if code == ErrorCode::TupleNotFound as u16 {
                    model.held_since(op.key, since, &None)
                } else {
                    model.existed_since(op.key, since)
                };
                if !plausible {
                    return Err(format!(
                        "error {code} on key {}, which never was in that state while the request ran (model now {:?})",
                        op.key,
                        model.current(op.key)
                    ));
                }
                return Ok(Outcome::Failed(code));
            }
        };
        let consistent = (code == ErrorCode::TupleNotFound as u16) != row_exists;
        if consistent {
            Ok(Outcome::Failed(code))
        } else {
            Err(format!(
                "error {code} on key {} but this transaction sees {:?}",
                op.key,
                view.get(&op.key)
            ))
        }
    }
}

impl Txn {
    /// A write refused because another row holds its unique value
    /// (`--unique`, index on `s`): it must have set a value that another
    /// key held while the request ran, or that this transaction gave
    /// another key (its index operations may meet in either order).
    fn check_unique_clash(
        &self,
        req: &Request,
        op: &PlannedOp,
        since: u64,
        model: &Model,
        r: &TcKeyRef,
    ) -> Result<Outcome, String> {
        let sets_s = matches!(
            op.kind,
            OpKind::Insert | OpKind::Write | OpKind::Update { only_v: false }
        );
        let Some(s) = op.row.s.as_ref().filter(|_| sets_s) else {
            return Err(format!(
                "a unique index clash for {:?} of key {} setting no value: {}",
                op.kind, op.key, r.detail
            ));
        };
        let holds = |image: &Image| image.as_ref().is_some_and(|row| row.s.as_ref() == Some(s));
        let other_held = (0..model.keys()).filter(|&k| k != op.key).any(|k| {
            model
                .history_since(k, since)
                .iter()
                .any(|(_, image)| holds(image))
        });
        let own = self
            .known
            .iter()
            .any(|(&k, image)| k != op.key && holds(image))
            || req.ops.iter().any(|o| {
                o.key != op.key
                    && matches!(
                        o.kind,
                        OpKind::Insert | OpKind::Write | OpKind::Update { only_v: false }
                    )
                    && o.row.s.as_ref() == Some(s)
            });
        if other_held || own {
            Ok(Outcome::Failed(r.code))
        } else {
            Err(format!(
                "key {} refused for a unique clash on s={s:?}, which no other key held while the request ran: {}",
                op.key, r.detail
            ))
        }
    }
}

fn expect_eq(got: &Image, want: &Image, what: &str) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

fn expect_held(model: &Model, key: u32, since: u64, image: &Image) -> Result<(), String> {
    if model.held_since(key, since, image) {
        Ok(())
    } else {
        Err(format!(
            "saw {image:?}, which the key never held while the request ran (model now {:?})",
            model.current(key)
        ))
    }
}

/// The key column of a read's result.
fn result_key(res: &OpResult) -> Result<u32, String> {
    let (attrs, _) = AttrSlice::parse(&res.data).map_err(|e| format!("read data: {e}"))?;
    match attrs.iter().find(|(col, _)| *col == K_COL) {
        Some((_, Some(b))) => Ok(u32::from_le_bytes(
            b.try_into()
                .map_err(|_| format!("a key of {} bytes", b.len()))?,
        )),
        _ => Err("a read result without its key column".into()),
    }
}

/// A read's result as an image (`None` for "not found").
pub fn decode_read(res: &OpResult, key: u32, def: &TableDef) -> Result<Image, String> {
    if res.code == ErrorCode::TupleNotFound as u16 {
        return Ok(None);
    }
    if res.code != 0 {
        return Err(format!("read result code {}", res.code));
    }
    let (attrs, rest) = AttrSlice::parse(&res.data).map_err(|e| format!("read data: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the attribute list", rest.len()));
    }
    let (mut v, mut s, mut k) = (None, None, None);
    for (col, bytes) in attrs.iter() {
        let ty = def
            .columns
            .get(col as usize)
            .ok_or_else(|| format!("unknown column {col} in a read result"))?
            .ty;
        let value = bytes.map(|b| shoal_types::value::decode_value(ty, b));
        match col {
            K_COL => k = value,
            V_COL => v = value,
            S_COL => s = value,
            _ => return Err(format!("column {col} in a read result")),
        }
    }
    if let Some(k) = k {
        if k != Value::UInt(u64::from(key)) {
            return Err(format!("read of key {key} returned key column {k:?}"));
        }
    }
    let v = match v {
        Some(Value::Int(v)) => v,
        other => return Err(format!("column v is {other:?}")),
    };
    let s = match s {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) => Some(s),
        Some(other) => return Err(format!("column s is {other:?}")),
    };
    Ok(Some(Row { v, s }))
}
