//! Kernel-only cost of single-operation write transactions: the data
//! nodes' blocks wired together in one thread, no sockets, no encoding.
//! Separates the blocks' own work from the runtime's.
//!
//!   cargo run --release -p shoal-kernel --example kernel_cost -- [replicas] [rows]
//!
//! With `NOVER=1` the replicas skip the distribution-version check of each
//! operation (to measure what that check costs); `PHASES=insert` (or
//! `insert,update`) runs only those phases, so instruction counts under
//! callgrind can be split by operation. Committed answers are
//! acknowledged after each batch, as the client library does.

use shoal_kernel::signal::BlockSignal;
use shoal_kernel::{DataNode, KernelConfig, Output};
use shoal_types::distribution::DistributionSpec;
use shoal_types::{
    ColumnDef, ColumnType, RowLayout, SchemaVersion, TableDef, TableId, TransId, Value,
};
use shoal_wire::{ExecType, KeyOp, LockMode, OpType, Signal, TcKeyReq};
use std::collections::VecDeque;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let replicas: u16 = args.next().map_or(2, |a| a.parse().unwrap());
    let rows: u32 = args.next().map_or(400_000, |a| a.parse().unwrap());
    let mut def = TableDef::new(
        "t",
        vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::Int { unsigned: true }),
        ],
        &["k"],
    )
    .unwrap();
    def.id = TableId(1);
    def.version = SchemaVersion(1);
    let groups: Vec<Vec<u16>> = if replicas == 2 {
        vec![vec![1, 2]]
    } else {
        vec![vec![1], vec![2]]
    };
    def.distribution = Some(DistributionSpec {
        version: 1,
        node_groups: groups,
        fragments_per_group: if replicas == 2 { 4 } else { 2 },
    });
    let map = def.distribution.as_ref().unwrap().map().unwrap();
    let layout = RowLayout::new(&def);
    let mut nodes: Vec<DataNode> = [1u16, 2]
        .iter()
        .map(|&node_id| {
            let mut n = DataNode::new(
                KernelConfig {
                    node_id,
                    data_nodes: vec![1, 2],
                    node_groups: if replicas == 2 {
                        vec![vec![1, 2]]
                    } else {
                        vec![vec![1], vec![2]]
                    },
                    data_memory_bytes: 2 << 30,
                    max_concurrent_transactions: 1 << 20,
                    max_concurrent_operations: 1 << 22,
                    faults: shoal_kernel::Faults {
                        ignore_dist_version: std::env::var_os("NOVER").is_some(),
                        ..Default::default()
                    },
                    ..KernelConfig::default()
                },
                0,
            );
            n.create_table(&def);
            n.client_connected(1, 100);
            n
        })
        .collect();
    let now = shoal_kernel::testkit::form_cluster(&mut nodes, 0);
    let key = |k: u32| {
        let mut out = Vec::new();
        layout
            .encode_key(&[Value::UInt(u64::from(k))], &mut out)
            .unwrap();
        out
    };
    let mut next_trans = [1u64, 1];
    let batch = 2048u32;
    // SHOAL_WIRE=1: every signal between the nodes is encoded and decoded.
    let wire = std::env::var_os("SHOAL_WIRE").is_some_and(|v| v == "1");
    let mut body = Vec::new();
    for (phase, op) in [
        ("insert", OpType::Insert),
        ("update", OpType::Update),
        ("delete", OpType::Delete),
    ] {
        // PHASES=insert,update: only those (each needs the ones before
        // it for its rows, so a list is a prefix in practice).
        if std::env::var("PHASES").is_ok_and(|p| !p.split(',').any(|x| x == phase)) {
            continue;
        }
        let start = Instant::now();
        let mut k = 0;
        while k < rows {
            let mut queue: VecDeque<(u16, BlockSignal)> = VecDeque::new();
            let mut out = Vec::new();
            let mut answers = 0;
            // Committed answers are acknowledged, as the client library
            // does with its next write (the replicas' commit markers go).
            let mut acks: [Vec<TransId>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..batch.min(rows - k) {
                let kb = key(k);
                let primary = map.primary(map.fragment_of(shoal_types::hash_key(&kb)));
                let mut attrs = Vec::new();
                if op != OpType::Delete {
                    shoal_types::layout::encode_attrs(
                        &def,
                        &[(1, &Value::UInt(u64::from(k)))],
                        &mut attrs,
                    )
                    .unwrap();
                }
                let n = primary as usize - 1;
                let req = TcKeyReq {
                    trans: TransId(next_trans[n]),
                    request: 0,
                    exec: ExecType::Commit,
                    durable: false,
                    ops: vec![KeyOp::new(
                        op,
                        LockMode::Exclusive,
                        0,
                        def.id,
                        def.version,
                        &kb,
                        &attrs,
                    )],
                };
                next_trans[n] += 1;
                nodes[n]
                    .client_signal(now, 1, Signal::TcKeyReq(req), &mut out)
                    .unwrap();
                k += 1;
                let mut from = primary;
                loop {
                    for o in out.drain(..) {
                        match o {
                            Output::ToNode { signal, .. } => queue.push_back((from, signal)),
                            Output::Send {
                                signal: Signal::TcKeyConf(c),
                                ..
                            } => {
                                answers += 1;
                                if c.ack_wanted {
                                    acks[n].push(c.trans);
                                }
                            }
                            Output::Send { .. } => answers += 1,
                            _ => {}
                        }
                    }
                    let Some((sender, mut sig)) = queue.pop_front() else {
                        break;
                    };
                    if wire {
                        body.clear();
                        sig.encode_body(&mut body);
                        sig = BlockSignal::decode(sig.gsn(), &body).unwrap();
                    }
                    let to = sig.destination_node();
                    from = to;
                    nodes[to as usize - 1].node_signal(now, sender, sig, &mut out);
                }
            }
            let _ = answers;
            for (n, trans) in acks.iter_mut().enumerate() {
                for chunk in trans.chunks(shoal_wire::COMMIT_ACKS_MAX) {
                    let ack = Signal::TcCommitAck(shoal_wire::TcCommitAck {
                        trans: chunk.to_vec(),
                    });
                    nodes[n].client_signal(now, 1, ack, &mut out).unwrap();
                }
                trans.clear();
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "R={replicas} {phase}: {:.0} ns per transaction ({:.0}/s on one core)",
            secs * 1e9 / f64::from(rows),
            f64::from(rows) / secs
        );
    }
}
