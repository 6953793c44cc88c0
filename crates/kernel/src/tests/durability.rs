//! A node's files: its redo log and local checkpoints, written as its
//! outputs say (each sync done at once), and a new start of it restoring
//! exactly the rows it held from them.

use super::*;
use crate::lqh::{check_lcp_file, RestoreStats};
use crate::LocalFiles;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shoal_storage::redo::{read_log, RedoEntry, RedoKind, REDO_BLOCK_BYTES};
use shoal_storage::sysfile::LcpChain;
use std::collections::{BTreeMap, VecDeque};

fn lay(file: &mut Vec<u8>, at: u64, bytes: &[u8]) {
    let at = at as usize;
    if file.len() < at + bytes.len() {
        file.resize(at + bytes.len(), 0);
    }
    file[at..at + bytes.len()].copy_from_slice(bytes);
}

/// A node's files as the driver keeps them (synced at once).
#[derive(Default)]
struct Files {
    log: Vec<u8>,
    lcp: BTreeMap<u64, Vec<u8>>,
    chain: LcpChain,
    redo_start: u64,
    durable: u64,
    /// Checkpoints recorded: (full, partial).
    recorded: (u32, u32),
}

impl Files {
    /// Carries out the node's file outputs, answering syncs at once.
    fn drive(&mut self, node: &mut DataNode, now: u64, out: Vec<Output>) {
        let mut work: VecDeque<Output> = out.into();
        while let Some(o) = work.pop_front() {
            let mut more = Vec::new();
            match o {
                Output::RedoWrite { lsn, bytes } => lay(&mut self.log, lsn, &bytes),
                Output::RedoSync { lsn } => node.redo_synced(now, lsn, &mut more),
                Output::SysfileWrite { durable_epoch, .. } => {
                    self.durable = self.durable.max(durable_epoch)
                }
                Output::LcpWrite { id, offset, bytes } => {
                    lay(self.lcp.entry(id).or_default(), offset, &bytes)
                }
                Output::LcpSync { id } => node.lcp_synced(now, id, &mut more),
                Output::LcpRecord { chain, redo_start } => {
                    assert!(chain.max_epoch <= self.durable, "recorded before durable");
                    let full = chain.first == chain.last;
                    if full {
                        self.recorded.0 += 1;
                    } else {
                        self.recorded.1 += 1;
                    }
                    self.chain = chain;
                    self.lcp.retain(|&id, _| id >= chain.first);
                    // The log before the start is gone: nothing may need it.
                    let cut = (redo_start as usize).min(self.log.len());
                    self.log[..cut].fill(0);
                    self.redo_start = redo_start;
                }
                _ => {}
            }
            work.extend(more);
        }
    }

    /// A new start of the node reads the files back, as a driver does.
    fn restore_into(&self, node: &mut DataNode) -> RestoreStats {
        let lcp_files: Vec<Vec<RedoEntry>> = self
            .chain
            .ids()
            .map(|id| {
                let read = read_log(&self.lcp[&id], 0);
                check_lcp_file(id, &read.entries).unwrap();
                read.entries
            })
            .collect();
        let start = self.redo_start as usize;
        let read = read_log(&self.log[start.min(self.log.len())..], self.redo_start);
        let block = REDO_BLOCK_BYTES as u64;
        let end = read.valid_end.div_ceil(block) * block;
        let mut pieces = crate::lqh::whole_lcp_files(&lcp_files);
        let stats = node.restore_local(
            &mut LocalFiles {
                lcp: self.chain,
                lcp_pieces: &mut pieces,
                lcp_bytes: 0,
                log_bytes: 0,
                redo_start: self.redo_start,
                entries: &read.entries,
                log_end: end,
                durable: self.durable,
                history: 0,
            },
            &mut |_, _| {},
        );
        stats.unwrap()
    }
}

fn started_harness(cfg: &KernelConfig, files: &mut Files) -> Harness {
    let def = table();
    let mut node = DataNode::new(cfg.clone(), 0);
    node.create_table(&def);
    let mut out = Vec::new();
    node.tick(1_000, &mut out);
    files.drive(&mut node, 1_000, out);
    assert_eq!(node.role(), crate::NodeRole::Started);
    Harness {
        node,
        layout: RowLayout::new(&def),
        def,
        now: 1_000,
        wire: std::collections::HashMap::new(),
        next_wire_id: 0,
    }
}

/// A new start of the node from `files`: its rows once it restored.
fn restart(cfg: &KernelConfig, def: &TableDef, files: &Files) -> Vec<(u32, Vec<u8>)> {
    let mut again = DataNode::new(
        KernelConfig {
            incarnation: 2,
            ..cfg.clone()
        },
        0,
    );
    again.create_table(def);
    let stats = files.restore_into(&mut again);
    assert!(stats.restorable > 0, "{stats:?}");
    let mut out = Vec::new();
    again.tick(1_000, &mut out);
    assert_eq!(again.role(), crate::NodeRole::Started, "{out:?}");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Restored { epoch } if *epoch == stats.restorable)),
        "{out:?}"
    );
    again.fragment_image(T, 0).expect("held here")
}

/// With epochs, what a node committed comes back from its own redo log in
/// a new start of it: every row, as committed (inserts, updates with a
/// longer and a shorter var part, deletes, a row id reused).
#[test]
fn a_nodes_redo_log_restores_exactly_its_rows() {
    let cfg = KernelConfig {
        epoch_interval_ms: 20,
        ..KernelConfig::default()
    };
    let mut files = Files::default();
    let mut h = started_harness(&cfg, &mut files);
    let mut trans = 0;
    let mut run = |h: &mut Harness, files: &mut Files, op: KeyOp| {
        trans += 1;
        let out = h.send(1, trans, ExecType::Commit, vec![op]);
        files.drive(&mut h.node, h.now, out);
        let out = h.tick(10);
        files.drive(&mut h.node, h.now, out);
    };
    for k in 0..40 {
        let op = h.op(OpType::Insert, k, i64::from(k), "first");
        run(&mut h, &mut files, op);
    }
    for k in (0..40).step_by(3) {
        let op = h.op(OpType::Update, k, -1, "a longer value than before");
        run(&mut h, &mut files, op);
    }
    for k in (0..40).step_by(4) {
        let op = h.op(OpType::Delete, k, 0, "");
        run(&mut h, &mut files, op);
    }
    for k in 100..105 {
        let op = h.op(OpType::Write, k, 7, "");
        run(&mut h, &mut files, op);
    }
    // Every epoch of those changes ends and is saved (written out).
    let out = h.tick(200);
    files.drive(&mut h.node, h.now, out);
    let before = h.node.fragment_image(T, 0).expect("held here");
    assert_eq!(files.recorded, (0, 0), "no checkpoint in a small log");
    assert_eq!(restart(&cfg, &h.def, &files), before);
    assert_eq!(before.len(), 40 - 10 + 5);
}

/// Random writes while checkpoints run fuzzy scans, full and partial,
/// slowly (so rows change under the scan): a new start from the
/// checkpoints and what is left of the log holds exactly the rows.
/// Returns the seeds whose restart differed, and the checkpoints recorded
/// over all seeds (full, partial).
fn checkpoints_through_random_writes(
    faults: crate::Faults,
    recovery_work_pct: u32,
    seeds: u64,
) -> (Vec<u64>, (u32, u32)) {
    let cfg = KernelConfig {
        epoch_interval_ms: 20,
        // A checkpoint every 16 KiB of log (four epochs' saves), scanning
        // about 2 KiB per 10 ms tick.
        redo_log_bytes: 128 << 10,
        lcp_bytes_per_sec: 200 << 10,
        lcp_recovery_work_pct: recovery_work_pct,
        faults,
        ..KernelConfig::default()
    };
    let mut failed = Vec::new();
    let mut recorded = (0, 0);
    for seed in 0..seeds {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut files = Files::default();
        let mut h = started_harness(&cfg, &mut files);
        let mut live = std::collections::BTreeSet::new();
        for trans in 0..rng.random_range(600..900u64) {
            let k = rng.random_range(0..300u32);
            let text = "x".repeat(rng.random_range(0..120));
            let op = match (live.contains(&k), rng.random_range(0..4)) {
                (false, _) => OpType::Insert,
                (true, 0) => OpType::Delete,
                (true, _) => OpType::Update,
            };
            if op == OpType::Delete {
                live.remove(&k);
            } else {
                live.insert(k);
            }
            let op = h.op(op, k, trans as i64, &text);
            let out = h.send(1, trans + 1, ExecType::Commit, vec![op]);
            assert_eq!(conf_of(&out).results[0].code, 0, "seed {seed}");
            files.drive(&mut h.node, h.now, out);
            if rng.random_bool(0.3) {
                let out = h.tick(10);
                files.drive(&mut h.node, h.now, out);
            }
        }
        let out = h.tick(300);
        files.drive(&mut h.node, h.now, out);
        let before = h.node.fragment_image(T, 0).expect("held here");
        assert_eq!(before.len(), live.len());
        let (full, partial) = files.recorded;
        if faults_off(&cfg) {
            assert!(
                full >= 1 && partial >= 1,
                "seed {seed}: {full} full and {partial} partial checkpoints: {}",
                h.node.describe_checkpoints()
            );
        }
        recorded = (recorded.0 + full, recorded.1 + partial);
        if restart(&cfg, &h.def, &files) != before {
            failed.push(seed);
        }
    }
    (failed, recorded)
}

fn faults_off(cfg: &KernelConfig) -> bool {
    cfg.faults == crate::Faults::default()
}

/// The one TcKeyConf among `out` (file outputs may come with it).
fn conf_of(out: &[Output]) -> TcKeyConf {
    let confs: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send {
                signal: Signal::TcKeyConf(c),
                ..
            } => Some(c.clone()),
            _ => None,
        })
        .collect();
    match confs.as_slice() {
        [c] => c.clone(),
        _ => panic!("expected one TcKeyConf, got {out:?}"),
    }
}

#[test]
fn checkpoints_and_the_rest_of_the_log_restore_exactly_the_rows() {
    let (failed, _) = checkpoints_through_random_writes(crate::Faults::default(), 50, 12);
    assert!(failed.is_empty(), "seeds {failed:?} restored other rows");
}

/// `lcp_recovery_work_pct` bounds the chain: the lower it is, the more of
/// the checkpoints are full; restarts are exact at either end.
#[test]
fn the_recovery_work_setting_trades_full_checkpoints_for_shorter_chains() {
    let mut full_share = Vec::new();
    for pct in [10, 100] {
        let (failed, (full, partial)) =
            checkpoints_through_random_writes(crate::Faults::default(), pct, 6);
        assert!(
            failed.is_empty(),
            "at {pct} %: seeds {failed:?} restored other rows"
        );
        full_share.push(f64::from(full) / f64::from(full + partial));
    }
    assert!(
        full_share[0] > full_share[1],
        "full checkpoints at 10 % and 100 %: {full_share:?}"
    );
}

/// The check above catches a checkpoint whose log start is taken when its
/// scan ends: changes made during the scan to rows it had passed are lost.
#[test]
fn the_check_catches_a_checkpoint_that_reads_the_log_from_its_end() {
    let faults = crate::Faults {
        lcp_redo_start_after_scan: true,
        ..crate::Faults::default()
    };
    let (failed, _) = checkpoints_through_random_writes(faults, 50, 40);
    assert!(!failed.is_empty(), "no seed lost a change");
}

/// Only the record kinds a checkpoint file holds are in one.
#[test]
fn a_checkpoint_file_begins_and_ends_with_its_markers() {
    let cfg = KernelConfig {
        epoch_interval_ms: 20,
        redo_log_bytes: 64 << 10,
        lcp_bytes_per_sec: 0,
        ..KernelConfig::default()
    };
    let mut files = Files::default();
    let mut h = started_harness(&cfg, &mut files);
    for k in 0..200 {
        let op = h.op(OpType::Insert, k, 1, "some text");
        let out = h.send(1, u64::from(k) + 1, ExecType::Commit, vec![op]);
        files.drive(&mut h.node, h.now, out);
        let out = h.tick(10);
        files.drive(&mut h.node, h.now, out);
    }
    assert!(files.recorded.0 >= 1, "{}", h.node.describe_checkpoints());
    for (&id, bytes) in &files.lcp {
        let read = read_log(bytes, 0);
        if check_lcp_file(id, &read.entries).is_err() {
            continue; // the one being written
        }
        for e in &read.entries[1..read.entries.len() - 1] {
            let kind = e.record().kind;
            assert!(
                matches!(kind, RedoKind::Write | RedoKind::Delete),
                "{kind:?}"
            );
        }
    }
    // Cut short, a file is not a checkpoint.
    let (&id, bytes) = files.lcp.iter().next().unwrap();
    let read = read_log(bytes, 0);
    let n = read.entries.len();
    assert!(check_lcp_file(id, &read.entries[..n - 1]).is_err());
    assert!(check_lcp_file(id + 1, &read.entries).is_err());
}

/// Writes wait for no disk forever: with more than the bound handed to
/// the driver and not written, writes to logged tables are refused with
/// 410 (reads go on), and taken again once the disk caught up.
#[test]
fn a_slow_disk_refuses_writes_until_it_catches_up() {
    let cfg = KernelConfig {
        epoch_interval_ms: 20,
        ..KernelConfig::default()
    };
    let mut files = Files::default();
    let mut h = started_harness(&cfg, &mut files);
    let op = h.op(OpType::Insert, 1, 1, "a");
    let out = h.send(1, 1, ExecType::Commit, vec![op]);
    assert_eq!(conf_of(&out).results[0].code, 0);
    files.drive(&mut h.node, h.now, out);

    h.node.set_write_backlog(300 << 20);
    let out = h.tick(10);
    files.drive(&mut h.node, h.now, out);
    let op = h.op(OpType::Insert, 2, 2, "b");
    let out = h.send(1, 2, ExecType::Commit, vec![op]);
    let refused = out.iter().find_map(|o| match o {
        Output::Send {
            signal: Signal::TcKeyRef(r),
            ..
        } => Some(r.clone()),
        _ => None,
    });
    let r = refused.expect("the write is refused");
    assert_eq!(r.code, ErrorCode::RedoLogFull as u16, "{r:?}");
    assert!(r.detail.contains("slower than the writes"), "{r:?}");
    let read = h.read(1, LockMode::CommittedRead);
    let out = h.send(1, 4, ExecType::Commit, vec![read]);
    assert_eq!(conf_of(&out).results[0].code, 0, "reads go on");

    h.node.set_write_backlog(0);
    let out = h.tick(10);
    files.drive(&mut h.node, h.now, out);
    let op = h.op(OpType::Insert, 2, 2, "b");
    let out = h.send(1, 5, ExecType::Commit, vec![op]);
    assert_eq!(conf_of(&out).results[0].code, 0);
}

/// One checkpoint file built by hand: `rows` are (row id, Some((key,
/// v)) for a row, None for a delete).
fn lcp_file_of(
    def: &TableDef,
    id: u64,
    full: bool,
    rows: &[(u32, Option<(u32, i64)>)],
) -> Vec<RedoEntry> {
    use shoal_storage::redo::{RedoRecord, RedoWriter};
    let layout = RowLayout::new(def);
    let mut w = RedoWriter::new(0);
    let marker = |kind| RedoRecord {
        kind,
        epoch: id,
        table: 0,
        frag: u32::from(full),
        row: 0,
        key: &[],
        attrs: &[],
    };
    w.append(&marker(RedoKind::LcpBegin));
    for &(row, image) in rows {
        let (fixed, var) = match image {
            Some((k, v)) => row_image(def, &layout, k, v),
            None => (Vec::new(), Vec::new()),
        };
        w.append(&RedoRecord {
            kind: if image.is_some() {
                RedoKind::Write
            } else {
                RedoKind::Delete
            },
            epoch: 0,
            table: T.0,
            frag: 0,
            row,
            key: &fixed,
            attrs: &var,
        });
    }
    w.append(&marker(RedoKind::LcpEnd));
    let (_, bytes) = w.take().expect("records");
    let entries = read_log(&bytes, 0).entries;
    check_lcp_file(id, &entries).expect("a whole file");
    entries
}

/// The stored row (fixed part, var part) of key `k` with `v`.
fn row_image(def: &TableDef, layout: &RowLayout, k: u32, v: i64) -> (Vec<u8>, Vec<u8>) {
    let mut key = Vec::new();
    layout
        .encode_key(&[Value::UInt(u64::from(k))], &mut key)
        .unwrap();
    let mut attrs = Vec::new();
    let (vv, sv) = (Value::Int(v), Value::Str(format!("row {k}")));
    shoal_types::layout::encode_attrs(def, &[(1, &vv), (2, &sv)], &mut attrs).unwrap();
    let (slice, _) = shoal_types::layout::AttrSlice::parse(&attrs).unwrap();
    layout.build_row(&key, slice).unwrap()
}

/// A chain restored without a log, read newest file first: each row id
/// is as the newest file holding it has it, and a row whose key a newer
/// file put at another id (it moved while that checkpoint's scan ran) is
/// gone, as an oldest-first read would leave it.
#[test]
fn a_chain_restores_each_id_as_the_newest_file_holding_it_has_it() {
    let def = table();
    let layout = RowLayout::new(&def);
    let full = lcp_file_of(
        &def,
        1,
        true,
        &[(0, Some((1, 10))), (1, Some((2, 20))), (2, Some((3, 30)))],
    );
    // Key 1 updated, key 2 deleted, key 3 moved from id 2 to id 5 after
    // the scan passed id 2.
    let partial = lcp_file_of(
        &def,
        2,
        false,
        &[(0, Some((1, 11))), (1, None), (5, Some((3, 31)))],
    );
    let files = [full, partial];
    let mut node = DataNode::new(KernelConfig::default(), 0);
    node.create_table(&def);
    let mut pieces = crate::lqh::whole_lcp_files(&files);
    let stats = node
        .restore_local(
            &mut LocalFiles {
                lcp: LcpChain {
                    first: 1,
                    last: 2,
                    max_epoch: 5,
                },
                lcp_pieces: &mut pieces,
                lcp_bytes: 0,
                log_bytes: 0,
                redo_start: 0,
                entries: &[],
                log_end: 0,
                durable: 5,
                history: 0,
            },
            &mut |_, _| {},
        )
        .expect("restored");
    let attrs_of = |k, v| {
        let (fixed, var) = row_image(&def, &layout, k, v);
        let mut out = Vec::new();
        layout.read_all_attrs(&fixed, &var, &mut out);
        out
    };
    assert_eq!(
        node.fragment_image(T, 0).expect("held here"),
        vec![(0, attrs_of(1, 11)), (5, attrs_of(3, 31))]
    );
    // The newer file's three records applied; ids 0 and 1 of the full
    // one skipped, and its key 3 at id 2 dropped.
    assert_eq!((stats.applied, stats.skipped), (3, 3), "{stats:?}");
}
