//! mgmd end to end inside one process: a real server on a 127.0.0.1
//! listener with a temporary data dir, driven through the real client API.

use std::path::Path;
use std::time::Duration;

use shoal_types::distribution::DistributionSpec;
use shoal_types::{ColumnDef, ColumnType, ErrorCode, TableDef};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::client::{format_show, wait_started, ApiSession, DataNodeSession, MgmClient};
use crate::config::ClusterConfig;
use crate::proto::{
    encode_frame, read_frame, ClientFrame, ClusterStatus, MgmEvent, NodeInfo, NodeState,
    NodeStatus, Request, Response, ServerFrame, ServerMessage, StartPhase, FRAME_BYTES_MAX,
    PROTOCOL_VERSION,
};
use crate::server;

/// A running mgmd; dropping `stop` shuts it down.
struct Mgmd {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), shoal_types::ShoalError>>,
}

impl Mgmd {
    async fn start(dir: &Path, data_nodes: u32) -> Mgmd {
        Mgmd::start_with(dir, data_nodes, |_| {}).await
    }

    /// Starts mgmd with its configuration changed by `tune` first.
    async fn start_with(
        dir: &Path,
        data_nodes: u32,
        tune: impl FnOnce(&mut ClusterConfig),
    ) -> Mgmd {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut config = ClusterConfig::local(data_nodes, 1, port, dir);
        tune(&mut config);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server::run(config, listener, async {
            let _ = stopped.await;
        }));
        Mgmd {
            addr: format!("127.0.0.1:{port}"),
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        drop(self.stop.take());
        let result = tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("mgmd did not stop within 10 s")
            .expect("mgmd task panicked");
        result.expect("mgmd ended with an error");
    }
}

fn table(name: &str) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::VarChar(20)).nullable(),
        ],
        &["id"],
    )
    .unwrap()
}

async fn api(addr: &str) -> crate::client::ApiSession {
    MgmClient::connect(addr)
        .await
        .unwrap()
        .register_api()
        .await
        .unwrap()
}

#[tokio::test]
async fn node_ids_are_handed_out_once() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;

    let first = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .unwrap();
    assert_eq!(first.node_id(), 1);
    assert_eq!(first.cluster_id(), 1);

    let dup = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .err()
        .expect("a second node 1 must be refused");
    assert_eq!(dup.code, ErrorCode::NodeIdRefused);
    assert!(dup.detail.contains('1'), "detail names the node: {dup}");

    let unknown = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(7))
        .await
        .err()
        .expect("node 7 is not in the config");
    assert_eq!(unknown.code, ErrorCode::NodeIdRefused);

    // No id asked: the first free data node id.
    let second = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(None)
        .await
        .unwrap();
    assert_eq!(second.node_id(), 2);

    // All data node ids taken.
    let full = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(None)
        .await
        .err()
        .expect("no data node id is free");
    assert_eq!(full.code, ErrorCode::NodeIdRefused);

    // Closing a session frees its id.
    drop(first);
    let mut again = None;
    for _ in 0..50 {
        match MgmClient::connect(&mgmd.addr)
            .await
            .unwrap()
            .register_data_node(Some(1))
            .await
        {
            Ok(s) => {
                again = Some(s);
                break;
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::NodeIdRefused);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert!(
        again.is_some(),
        "node id 1 was not freed after its session closed"
    );

    // API nodes get distinct ids from 50 up.
    let a = api(&mgmd.addr).await;
    let b = api(&mgmd.addr).await;
    assert!(a.node_id() >= 50 && b.node_id() >= 50);
    assert_ne!(a.node_id(), b.node_id());

    drop((second, again, a, b));
    mgmd.stop().await;
}

#[tokio::test]
async fn tables_are_created_listed_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;

    let t1 = s.create_table(table("t1")).await.unwrap();
    assert_ne!(t1.id.0, 0, "an id is assigned");
    assert_ne!(t1.version.0, 0, "a version is assigned");
    // mgmd places it: partitions_per_node (2) × 1 data node, on node 1.
    assert_eq!(
        t1.distribution,
        Some(DistributionSpec::single_node(1, 2)),
        "mgmd assigns the distribution"
    );
    let mut custom = table("custom");
    custom.options.fragment_count = Some(5);
    let custom = s.create_table(custom).await.unwrap();
    assert_eq!(custom.distribution.unwrap().fragment_count(), 5);
    s.drop_table("custom").await.unwrap();
    assert_eq!(s.get_table("t1").await.unwrap(), t1);

    let dup = s.create_table(table("t1")).await.unwrap_err();
    assert_eq!(dup.code, ErrorCode::TableExists);

    let t2 = s.create_table(table("t2")).await.unwrap();
    assert_ne!(t2.id, t1.id);
    let names: Vec<String> = s
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["t1".to_string(), "t2".to_string()]);

    s.drop_table("t1").await.unwrap();
    assert_eq!(
        s.get_table("t1").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );
    assert_eq!(
        s.drop_table("t1").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );

    // A recreated table never reuses the dropped table's id.
    let t1b = s.create_table(table("t1")).await.unwrap();
    assert_ne!(t1b.id, t1.id);
    assert_ne!(t1b.id, t2.id);

    // Invalid definitions are refused by mgmd as well as the client.
    let mut bad = table("bad");
    bad.primary_key.clear();
    assert_eq!(
        s.create_table(bad).await.unwrap_err().code,
        ErrorCode::BadTableDefinition
    );

    drop(s);
    mgmd.stop().await;
}

#[tokio::test]
async fn schema_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    let kept = s.create_table(table("kept")).await.unwrap();
    let dropped = s.create_table(table("dropped")).await.unwrap();
    s.drop_table("dropped").await.unwrap();
    drop(s);
    mgmd.stop().await;

    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    assert_eq!(s.get_table("kept").await.unwrap(), kept);
    assert_eq!(
        s.get_table("dropped").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );
    let fresh = s.create_table(table("fresh")).await.unwrap();
    assert!(
        fresh.id.0 > dropped.id.0,
        "table ids are not reused across restarts"
    );
    drop(s);
    mgmd.stop().await;
}

#[tokio::test]
async fn corrupt_schema_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = ClusterConfig::local(1, 1, 0, dir.path());
    let schema_dir = config.mgmd_data_dir();
    std::fs::create_dir_all(&schema_dir).unwrap();
    std::fs::write(schema_dir.join(server::SCHEMA_FILE), b"{ not json").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = server::run(config, listener, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        err.detail.contains(server::SCHEMA_FILE),
        "the error names the file: {err}"
    );
}

#[tokio::test]
async fn data_nodes_receive_and_ack_schema_events() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut node = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .unwrap();
    assert!(node.initial_tables().is_empty());

    let addr = mgmd.addr.clone();
    let creator = tokio::spawn(async move {
        let mut s = api(&addr).await;
        s.create_table(table("evented")).await
    });
    let (event_id, event) = tokio::time::timeout(Duration::from_secs(10), node.next_event())
        .await
        .expect("no schema event within 10 s")
        .unwrap();
    let created = match event {
        MgmEvent::TableCreated(t) => t,
        other => panic!("expected TableCreated, got {other:?}"),
    };
    assert_eq!(created.name, "evented");
    // The create is answered only after the node acked.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !creator.is_finished(),
        "create answered before the node acked"
    );
    node.ack_event(event_id, Ok(())).await.unwrap();
    let t = creator.await.unwrap().unwrap();
    assert_eq!(t, created);

    // A node that registers later finds the table in its initial schema.
    drop(node);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let node = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .unwrap();
    assert_eq!(node.initial_tables(), &[t]);
    drop(node);
    mgmd.stop().await;
}

#[tokio::test]
async fn show_and_wait_follow_node_states() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;

    let err = wait_started(&mgmd.addr, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NodeNotReady);
    assert!(err.detail.contains("node 1"), "names the node: {err}");

    // Created while no data node is connected (nothing to wait for): its
    // two fragments have their primaries on node 1.
    api(&mgmd.addr)
        .await
        .create_table(table("placed"))
        .await
        .unwrap();
    let mut node = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .unwrap();
    node.report_status(NodeStatus {
        state: NodeState::Started,
        data_memory_used_bytes: 3 << 20,
        data_memory_total_bytes: 64 << 20,
        rows: 12,
        client_connections: 2,
        listen_port: 40000,
        start_phase: None,
        in_cluster: false,
    })
    .await
    .unwrap();

    let status = wait_started(&mgmd.addr, Duration::from_secs(10))
        .await
        .unwrap();
    let text = format_show(&status);
    assert!(
        text.contains("nodegroup 0, 2 primary fragment(s)"),
        "{text}"
    );
    assert!(text.contains("[datanode] 1 node(s)"), "{text}");
    assert!(text.contains("started"), "{text}");
    assert!(text.contains(":40000"), "live port shown: {text}");
    assert!(text.contains("used 3.0 MiB / free 61.0 MiB"), "{text}");
    assert!(text.contains("12 rows"), "{text}");
    assert!(text.contains("[mgmd] 1 node(s)"), "{text}");

    // A node whose session ends is no longer started.
    drop(node);
    let mut s = MgmClient::connect(&mgmd.addr).await.unwrap();
    let mut state = NodeState::Started;
    for _ in 0..50 {
        let st = s.show().await.unwrap();
        state = st.nodes.iter().find(|n| n.node_id == 1).unwrap().state;
        if state != NodeState::Started {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, NodeState::NotStarted);
    drop(s);
    mgmd.stop().await;
}

#[tokio::test]
async fn garbage_from_one_peer_does_not_hurt_others() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut good = api(&mgmd.addr).await;

    let mut bad = tokio::net::TcpStream::connect(&mgmd.addr).await.unwrap();
    // A length prefix far over the frame limit, then junk.
    bad.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    bad.write_all(b"junk junk junk").await.unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), bad.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "mgmd must close the offending connection");

    good.create_table(table("still_fine")).await.unwrap();
    drop(good);
    mgmd.stop().await;
}

async fn data_node(addr: &str, node_id: u16) -> DataNodeSession {
    // A just-closed session frees its id a moment later; retry briefly.
    for _ in 0..100 {
        match MgmClient::connect(addr)
            .await
            .unwrap()
            .register_data_node(Some(node_id))
            .await
        {
            Ok(s) => return s,
            Err(e) if e.code == ErrorCode::NodeIdRefused => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("registering data node {node_id}: {e}"),
        }
    }
    panic!("data node id {node_id} never became free");
}

async fn node_info(s: &mut ApiSession, node_id: u16) -> NodeInfo {
    s.show()
        .await
        .unwrap()
        .nodes
        .into_iter()
        .find(|n| n.node_id == node_id)
        .expect("node in show")
}

/// Sends `requests` one after the other on one raw connection (so a
/// registration among them applies to the later ones) and returns the
/// answers.
async fn raw_requests(addr: &str, requests: Vec<Request>) -> Vec<Response> {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut answers = Vec::new();
    for (i, request) in requests.into_iter().enumerate() {
        let frame = encode_frame(&ClientFrame {
            v: PROTOCOL_VERSION,
            id: i as u64 + 1,
            request,
        })
        .unwrap();
        stream.write_all(&frame).await.unwrap();
        loop {
            let body = tokio::time::timeout(
                Duration::from_secs(10),
                read_frame(&mut stream, FRAME_BYTES_MAX),
            )
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .expect("mgmd keeps the connection open");
            let frame: ServerFrame = serde_json::from_slice(&body).unwrap();
            if let ServerMessage::Response { response, .. } = frame.msg {
                answers.push(response);
                break;
            }
        }
    }
    answers
}

fn error_of(r: &Response) -> shoal_types::ShoalError {
    match r {
        Response::Error(e) => e.clone().into(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn incarnations_grow_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let n1 = data_node(&mgmd.addr, 1).await;
    assert_eq!(n1.incarnation(), 1, "a node never seen starts at 1");
    drop(n1);
    let n1 = data_node(&mgmd.addr, 1).await;
    assert_eq!(n1.incarnation(), 2);
    let n2 = data_node(&mgmd.addr, 2).await;
    assert_eq!(
        n2.incarnation(),
        3,
        "one sequence over all data nodes (a later cluster's views number above an earlier one's)"
    );
    let mut s = api(&mgmd.addr).await;
    assert_eq!(node_info(&mut s, 1).await.incarnation, 2);
    let text = format_show(&s.show().await.unwrap());
    assert!(text.contains("start #2"), "{text}");
    drop((n1, n2, s));
    mgmd.stop().await;

    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut s = api(&mgmd.addr).await;
    let info = node_info(&mut s, 1).await;
    assert_eq!(
        (info.state, info.incarnation),
        (NodeState::NotStarted, 2),
        "the last start number is known before the node comes back"
    );
    let n1 = data_node(&mgmd.addr, 1).await;
    assert_eq!(n1.incarnation(), 4, "the count survives an mgmd restart");
    assert_eq!(node_info(&mut s, 1).await.incarnation, 4);
    drop((n1, s));
    mgmd.stop().await;
}

#[tokio::test]
async fn corrupt_starts_and_arbitration_files_are_refused_at_start() {
    for file in [server::STARTS_FILE, server::ARBITRATION_FILE] {
        for content in [
            &b"{ not json"[..],
            &br#"{"format_version": 99, "cluster_id": 1}"#[..],
        ] {
            let dir = tempfile::tempdir().unwrap();
            let config = ClusterConfig::local(1, 1, 0, dir.path());
            let mgmd_dir = config.mgmd_data_dir();
            std::fs::create_dir_all(&mgmd_dir).unwrap();
            std::fs::write(mgmd_dir.join(file), content).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let err = server::run(config, listener, std::future::pending())
                .await
                .unwrap_err();
            assert!(err.detail.contains(file), "the error names {file}: {err}");
        }
    }
    // Well-formed but impossible: a start count of 0, a grant to nobody.
    for (file, content) in [
        (
            server::STARTS_FILE,
            r#"{"format_version":1,"cluster_id":1,"starts":{"1":0}}"#,
        ),
        (
            server::ARBITRATION_FILE,
            r#"{"format_version":1,"cluster_id":1,"grant":{"view":3,"survivors":[]}}"#,
        ),
        (
            server::STARTS_FILE,
            r#"{"format_version":1,"cluster_id":2,"starts":{}}"#,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = ClusterConfig::local(1, 1, 0, dir.path());
        std::fs::create_dir_all(config.mgmd_data_dir()).unwrap();
        std::fs::write(config.mgmd_data_dir().join(file), content).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = server::run(config, listener, std::future::pending())
            .await
            .unwrap_err();
        assert!(err.detail.contains(file), "{err}");
    }
}

#[tokio::test]
async fn arbitrator_grants_one_side_and_remembers_it_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut n1 = data_node(&mgmd.addr, 1).await;
    let mut n2 = data_node(&mgmd.addr, 2).await;
    assert!(
        n1.arbitrate(5, 5, vec![1]).await.unwrap(),
        "first side wins"
    );
    assert!(
        !n2.arbitrate(5, 5, vec![2]).await.unwrap(),
        "the other side of the same split loses"
    );
    assert!(
        n1.arbitrate(5, 5, vec![1]).await.unwrap(),
        "the winner asking again is granted again"
    );
    // Requests that make no sense are refused, not decided.
    let e = n1.arbitrate(6, 6, vec![2]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.detail.contains("without itself"), "{e}");
    let e = n1.arbitrate(6, 6, vec![1, 9]).await.unwrap_err();
    assert!(e.detail.contains("node 9"), "{e}");
    // Only data nodes may ask.
    let answers = raw_requests(
        &mgmd.addr,
        vec![
            Request::Arbitrate {
                view: 7,
                newest: 7,
                survivors: vec![1],
            },
            Request::RegisterApi,
            Request::Arbitrate {
                view: 7,
                newest: 7,
                survivors: vec![1],
            },
        ],
    )
    .await;
    assert_eq!(error_of(&answers[0]).code, ErrorCode::BadRequest);
    assert_eq!(error_of(&answers[2]).code, ErrorCode::BadRequest);
    drop((n1, n2));
    mgmd.stop().await;

    let grant = std::fs::read_to_string(
        ClusterConfig::local(2, 1, 0, dir.path())
            .mgmd_data_dir()
            .join(server::ARBITRATION_FILE),
    )
    .unwrap();
    assert!(grant.contains("\"view\": 5"), "{grant}");

    // A restarted mgmd still refuses the losing side of view 5.
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut n2 = data_node(&mgmd.addr, 2).await;
    assert!(!n2.arbitrate(5, 5, vec![2]).await.unwrap());
    assert!(!n2.arbitrate(4, 4, vec![2]).await.unwrap(), "an older view");
    let mut n1 = data_node(&mgmd.addr, 1).await;
    assert!(n1.arbitrate(5, 5, vec![1]).await.unwrap());
    // A later split is decided afresh.
    assert!(n2.arbitrate(6, 6, vec![2]).await.unwrap());
    assert!(!n1.arbitrate(6, 6, vec![1]).await.unwrap());
    drop((n1, n2));
    mgmd.stop().await;
}

#[tokio::test]
async fn a_partial_start_is_refused_while_another_data_node_is_started() {
    let dir = tempfile::tempdir().unwrap();
    // A short formation lease (4 heartbeats + an arbitration timeout).
    let mgmd = Mgmd::start_with(dir.path(), 3, |c| {
        c.heartbeat_interval_ms = 50;
        c.arbitration_timeout_ms = 100;
    })
    .await;
    let lease = Duration::from_millis(300);
    let mut n1 = data_node(&mgmd.addr, 1).await;
    let mut n2 = data_node(&mgmd.addr, 2).await;
    let mut n3 = data_node(&mgmd.addr, 3).await;
    let status = |state| NodeStatus {
        state,
        data_memory_used_bytes: 0,
        data_memory_total_bytes: 64 << 20,
        rows: 0,
        client_connections: 0,
        listen_port: 40000,
        start_phase: None,
        in_cluster: state == NodeState::Started,
    };
    // Right after mgmd started, running data nodes may not have
    // reattached yet: no partial start for a lease.
    assert!(!n1.arbitrate(0, 0, vec![1, 2]).await.unwrap());
    tokio::time::sleep(lease).await;
    // Nobody started: nodes 1 and 2 may start without node 3.
    assert!(n1.arbitrate(0, 0, vec![1, 2]).await.unwrap());
    // Meanwhile no other group may (it could share nodes with this one);
    // the same group asking again may.
    assert!(!n2.arbitrate(0, 0, vec![2, 3]).await.unwrap());
    assert!(n1.arbitrate(0, 0, vec![1, 2]).await.unwrap());
    // Node 3 runs a cluster the others cannot see: refused (and nothing
    // is stored: the answer follows the states).
    n3.report_status(status(NodeState::Started)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while n1.arbitrate(0, 0, vec![1, 2]).await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "node 3's state never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A start that includes node 3 is no partial start of the others
    // (once the lease of the last allowed group ran out).
    tokio::time::sleep(lease).await;
    assert!(n1.arbitrate(0, 0, vec![1, 3]).await.unwrap());
    // Node 3 gone from mgmd: allowed again.
    drop(n3);
    tokio::time::sleep(lease).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !n1.arbitrate(0, 0, vec![1, 2]).await.unwrap() {
        assert!(std::time::Instant::now() < deadline, "node 3 still counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // No grant was stored: a survival request of a later view is decided
    // as the first of its split.
    assert!(n1.arbitrate(5, 5, vec![1]).await.unwrap());
    drop((n1, n2));
    mgmd.stop().await;
}

/// After an mgmd restart every node is back, none started, but node 2
/// is still restoring its rows in the cluster they formed before the
/// restart: a node that took the others for fresh may not form a second
/// cluster over it (PROTOCOL.md §7) — neither once node 2 says so, nor
/// between its reattach and its first report.
#[tokio::test]
async fn a_start_of_every_node_is_refused_while_one_restores_in_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let short_lease = |c: &mut ClusterConfig| {
        c.heartbeat_interval_ms = 50;
        c.arbitration_timeout_ms = 100;
    };
    let mgmd = Mgmd::start_with(dir.path(), 3, short_lease).await;
    let n2 = data_node(&mgmd.addr, 2).await;
    assert_eq!(n2.incarnation(), 1);
    mgmd.stop().await;
    drop(n2);
    let mgmd = Mgmd::start_with(dir.path(), 3, short_lease).await;
    let mut n1 = data_node(&mgmd.addr, 1).await;
    let _n3 = data_node(&mgmd.addr, 3).await;
    let mut n2 = reattach(&mgmd.addr, 2, 1, 1).await.unwrap();
    // Reattached, not reported yet: it may be in a cluster.
    assert!(!n1.arbitrate(0, 0, vec![1, 2, 3]).await.unwrap());
    let restoring = |in_cluster| NodeStatus {
        state: NodeState::Starting,
        data_memory_used_bytes: 0,
        data_memory_total_bytes: 64 << 20,
        rows: 0,
        client_connections: 0,
        listen_port: 40000,
        start_phase: Some(StartPhase {
            what: "restoring its rows to the cluster's restart epoch".into(),
            done: 0,
            total: 0,
        }),
        in_cluster,
    };
    n2.report_status(restoring(true)).await.unwrap();
    assert!(!n1.arbitrate(0, 0, vec![1, 2, 3]).await.unwrap());
    // A node that is in no cluster holds nobody back.
    n2.report_status(restoring(false)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !n1.arbitrate(0, 0, vec![1, 2, 3]).await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "node 2 still counted in a cluster"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    mgmd.stop().await;
}

#[tokio::test]
async fn a_second_mgmd_on_the_same_files_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;
    // Serving (so it holds its directory) once a node got through.
    let n1 = data_node(&mgmd.addr, 1).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = ClusterConfig::local(2, 1, port, dir.path());
    let second = server::run(config, listener, std::future::pending());
    let err = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second mgmd must refuse at once, not serve")
        .unwrap_err();
    drop(n1);
    assert_eq!(err.code, ErrorCode::DataDirInUse, "{err}");
    assert!(err.detail.contains("mgmd 49, pid"), "{err}");
    mgmd.stop().await;
}

/// Waits for the data node's next event, which must be Shutdown, and acks it.
async fn ack_shutdown(node: &mut DataNodeSession) {
    let (event_id, event) = tokio::time::timeout(Duration::from_secs(10), node.next_event())
        .await
        .expect("an event within 10 s")
        .unwrap();
    assert_eq!(event, MgmEvent::Shutdown);
    node.ack_event(event_id, Ok(())).await.unwrap();
}

#[tokio::test]
async fn wanted_state_and_supervision() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut n1 = data_node(&mgmd.addr, 1).await;
    let mut admin = api(&mgmd.addr).await;
    let info = node_info(&mut admin, 2).await;
    assert!(info.wanted_running && !info.supervised, "{info:?}");

    // Without a supervisor: start of a running node is a no-op, of a
    // stopped one tells how to start it by hand; restart is refused.
    admin.start_node(1).await.unwrap();
    admin.stop_node(2).await.unwrap();
    assert!(!node_info(&mut admin, 2).await.wanted_running);
    let text = format_show(&admin.show().await.unwrap());
    assert!(text.contains("stopped on request"), "{text}");
    let e = admin.start_node(2).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NodeNotReady);
    assert!(
        e.detail.contains(&format!(
            "shoal datanode --connect {} --node-id 2",
            mgmd.addr
        )),
        "{e}"
    );
    assert!(
        node_info(&mut admin, 2).await.wanted_running,
        "wanted even so"
    );
    let e = admin.restart_node(1).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.detail.contains("no supervisor"), "{e}");
    let e = admin.stop_node(9).await.unwrap_err();
    assert!(e.detail.contains("not a data node"), "{e}");

    // A supervisor.
    let mut angel = api(&mgmd.addr).await;
    let e = angel.supervise(vec![1, 9]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.detail.contains("node 9"), "{e}");
    angel.supervise(vec![1, 2]).await.unwrap();
    assert!(node_info(&mut admin, 1).await.supervised);
    let mut rival = api(&mgmd.addr).await;
    let e = rival.supervise(vec![2]).await.unwrap_err();
    assert!(e.detail.contains("already supervised"), "{e}");
    admin.start_node(2).await.unwrap();

    // Restart: the node is told to stop and stays wanted; answered after
    // the node acked.
    let addr = mgmd.addr.clone();
    let restart = tokio::spawn(async move {
        let mut s = api(&addr).await;
        s.restart_node(1).await
    });
    ack_shutdown(&mut n1).await;
    restart.await.unwrap().unwrap();
    assert!(node_info(&mut admin, 1).await.wanted_running);

    // Stop: not wanted any more.
    let addr = mgmd.addr.clone();
    let stop = tokio::spawn(async move {
        let mut s = api(&addr).await;
        s.stop_node(1).await
    });
    ack_shutdown(&mut n1).await;
    stop.await.unwrap().unwrap();
    assert!(!node_info(&mut admin, 1).await.wanted_running);

    // Data nodes may not send operator requests.
    let answers = raw_requests(
        &mgmd.addr,
        vec![
            Request::RegisterDataNode { node_id: Some(2) },
            Request::Supervise { nodes: vec![2] },
            Request::StartNode { node_id: 2 },
        ],
    )
    .await;
    assert!(matches!(answers[0], Response::DataNodeRegistered { .. }));
    assert_eq!(error_of(&answers[1]).code, ErrorCode::BadRequest);
    assert_eq!(error_of(&answers[2]).code, ErrorCode::BadRequest);

    // The supervisor leaving ends the supervision.
    drop(angel);
    let mut supervised = true;
    for _ in 0..100 {
        supervised = node_info(&mut admin, 1).await.supervised;
        if !supervised {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !supervised,
        "supervision ends with the supervisor's connection"
    );
    rival.supervise(vec![2]).await.unwrap();
    // Node 1 is gone: a restart cannot ask it to stop, and says so.
    rival.supervise(vec![1, 2]).await.unwrap();
    drop(n1);
    let mut e = None;
    for _ in 0..100 {
        match admin.restart_node(1).await {
            Err(err) if err.code == ErrorCode::NodeNotReady => {
                e = Some(err);
                break;
            }
            // Its session may not have closed yet.
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let e = e.expect("restart of a disconnected node is refused");
    assert!(e.detail.contains("`1 start`"), "{e}");
    drop((admin, rival));
    mgmd.stop().await;
}

#[test]
fn show_prints_start_progress() {
    let node = |state, phase: Option<StartPhase>| NodeInfo {
        node_id: 2,
        kind: "datanode".into(),
        host: "127.0.0.1".into(),
        port: 4000,
        state,
        status: Some(NodeStatus {
            state,
            data_memory_used_bytes: 0,
            data_memory_total_bytes: 1 << 20,
            rows: 0,
            client_connections: 0,
            listen_port: 4000,
            start_phase: phase,
            in_cluster: false,
        }),
        primaries: 0,
        node_group: Some(0),
        incarnation: 3,
        wanted_running: true,
        supervised: true,
    };
    let show = |n: NodeInfo| {
        format_show(&ClusterStatus {
            cluster_id: 1,
            no_of_replicas: 2,
            nodes: vec![n],
        })
    };
    let copying = |done, total| StartPhase {
        what: "copying fragments".into(),
        done,
        total,
    };
    let text = show(node(NodeState::Starting, Some(copying(45, 100))));
    assert!(
        text.contains("starting (copying fragments, 45 %)"),
        "{text}"
    );
    assert!(text.contains("start #3, supervised"), "{text}");
    let text = show(node(NodeState::Starting, Some(copying(u64::MAX, u64::MAX))));
    assert!(text.contains("(copying fragments, 100 %)"), "{text}");
    let text = show(node(NodeState::Starting, Some(copying(5, 0))));
    assert!(text.contains("starting (copying fragments)"), "{text}");
    // A started node's leftover phase is not shown.
    let text = show(node(NodeState::Started, Some(copying(1, 2))));
    assert!(!text.contains("copying"), "{text}");
}

/// Asks mgmd, on a fresh connection, to take data node `node_id` back in
/// start `incarnation` of cluster `cluster_id`.
async fn reattach(
    addr: &str,
    node_id: u16,
    incarnation: u32,
    cluster_id: u64,
) -> Result<DataNodeSession, shoal_types::ShoalError> {
    MgmClient::connect(addr)
        .await
        .unwrap()
        .reattach_data_node(node_id, incarnation, cluster_id)
        .await
}

/// The bytes of mgmd's start-number file.
fn starts_file(dir: &Path) -> Vec<u8> {
    let path = ClusterConfig::local(1, 1, 0, dir)
        .mgmd_data_dir()
        .join(server::STARTS_FILE);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[tokio::test]
async fn reattach_keeps_the_start_and_refuses_stale_or_doubled_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut admin = api(&mgmd.addr).await;
    admin.create_table(table("before")).await.unwrap();
    let mut n1 = data_node(&mgmd.addr, 1).await;
    assert_eq!(n1.incarnation(), 1);

    // While its session lives the id is held: refused, worth retrying.
    let held = reattach(&mgmd.addr, 1, 1, 1)
        .await
        .err()
        .expect("id 1 is held");
    assert_eq!(held.code, ErrorCode::NodeIdRefused, "{held}");
    assert!(held.detail.contains("in use"), "{held}");
    // Starts never handed out, another cluster, an unknown id: refused
    // for good, each saying why.
    for (node_id, incarnation, cluster_id, why) in [
        (1, 2, 1, "recorded only 1 start(s)"),
        (1, 0, 1, "begin at 1"),
        (1, 1, 99, "cluster 99"),
        (7, 1, 1, "not a data node"),
    ] {
        let e = reattach(&mgmd.addr, node_id, incarnation, cluster_id)
            .await
            .err()
            .expect("refused");
        assert_eq!(e.code, ErrorCode::HandshakeRejected, "{e}");
        assert!(e.detail.contains(why), "{why}: {e}");
    }
    // Only an unregistered connection may reattach.
    let answers = raw_requests(
        &mgmd.addr,
        vec![
            Request::RegisterApi,
            Request::ReattachDataNode {
                node_id: 2,
                incarnation: 1,
                cluster_id: 1,
            },
        ],
    )
    .await;
    assert_eq!(error_of(&answers[1]).code, ErrorCode::BadRequest);

    // mgmd restarts on the same data dir; the node's session breaks.
    let starts_before = starts_file(dir.path());
    drop(admin);
    mgmd.stop().await;
    let lost = tokio::time::timeout(Duration::from_secs(10), n1.next_event())
        .await
        .expect("the session ends with mgmd");
    assert!(lost.is_err(), "{lost:?}");
    let mgmd = Mgmd::start(dir.path(), 2).await;
    let mut admin = api(&mgmd.addr).await;
    // Schema changes while the node is away.
    let away = admin.create_table(table("while_away")).await.unwrap();
    admin.drop_table("before").await.unwrap();

    let mut back = reattach(&mgmd.addr, 1, 1, 1).await.unwrap();
    assert_eq!((back.node_id(), back.incarnation()), (1, 1));
    assert_eq!(back.initial_tables(), &[away], "the schema as it is now");
    assert_eq!(
        starts_file(dir.path()),
        starts_before,
        "a reattach is not a start"
    );
    let info = node_info(&mut admin, 1).await;
    assert_eq!((info.state, info.incarnation), (NodeState::Starting, 1));
    back.report_status(NodeStatus {
        state: NodeState::Started,
        data_memory_used_bytes: 0,
        data_memory_total_bytes: 64 << 20,
        rows: 0,
        client_connections: 0,
        listen_port: 40001,
        start_phase: None,
        in_cluster: true,
    })
    .await
    .unwrap();
    let mut state = NodeState::Starting;
    for _ in 0..100 {
        state = node_info(&mut admin, 1).await.state;
        if state == NodeState::Started {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, NodeState::Started, "the report after the reattach");

    // The reattached session holds the id against a second reattach and a
    // registration alike.
    let twice = reattach(&mgmd.addr, 1, 1, 1).await.err().expect("held");
    assert_eq!(twice.code, ErrorCode::NodeIdRefused, "{twice}");
    let reg = MgmClient::connect(&mgmd.addr)
        .await
        .unwrap()
        .register_data_node(Some(1))
        .await
        .err()
        .expect("held");
    assert_eq!(reg.code, ErrorCode::NodeIdRefused, "{reg}");

    // Schema events reach the reattached session, and its ack completes
    // the change.
    let addr = mgmd.addr.clone();
    let creator = tokio::spawn(async move { api(&addr).await.create_table(table("after")).await });
    let (event_id, event) = tokio::time::timeout(Duration::from_secs(10), back.next_event())
        .await
        .expect("an event within 10 s")
        .unwrap();
    assert!(
        matches!(&event, MgmEvent::TableCreated(t) if t.name == "after"),
        "{event:?}"
    );
    back.ack_event(event_id, Ok(())).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), creator)
        .await
        .expect("create answered after the ack")
        .unwrap()
        .unwrap();
    assert_eq!(starts_file(dir.path()), starts_before);

    // A newer start takes the id over: the old process is stale for good,
    // even once the newer one is gone again.
    drop(back);
    let newer = data_node(&mgmd.addr, 1).await;
    assert_eq!(newer.incarnation(), 2);
    drop(newer);
    let stale = reattach(&mgmd.addr, 1, 1, 1).await.err().expect("stale");
    assert_eq!(stale.code, ErrorCode::HandshakeRejected, "{stale}");
    assert!(stale.detail.contains("started again"), "{stale}");
    assert_eq!(node_info(&mut admin, 1).await.incarnation, 2);

    drop(admin);
    mgmd.stop().await;
}

/// `users(id INT UNSIGNED, email VARCHAR(20) NULL)` with unique index
/// `by_email` when `unique`.
fn users(name: &str, unique: bool) -> TableDef {
    let t = TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("email", ColumnType::VarChar(20)).nullable(),
        ],
        &["id"],
    )
    .unwrap();
    if unique {
        t.with_unique_index("by_email", &["email"]).unwrap()
    } else {
        t
    }
}

fn unique_def(name: &str, columns: &[u16]) -> shoal_types::UniqueIndexDef {
    shoal_types::UniqueIndexDef {
        name: name.into(),
        columns: columns.to_vec(),
        table: shoal_types::TableId(0),
        building: false,
    }
}

/// Data node `node_id`, acknowledging every event it gets until dropped
/// (unique indexes are created only while every data node is connected).
async fn acking_data_node(addr: &str, node_id: u16) -> tokio::task::JoinHandle<()> {
    let mut node = data_node(addr, node_id).await;
    tokio::spawn(async move {
        while let Ok((event_id, _)) = node.next_event().await {
            if node.ack_event(event_id, Ok(())).await.is_err() {
                return;
            }
        }
    })
}

/// The next event of `node`, acked with `result`.
async fn next_event_acked(
    node: &mut DataNodeSession,
    result: Result<(), shoal_types::ShoalError>,
) -> MgmEvent {
    let (event_id, event) = tokio::time::timeout(Duration::from_secs(10), node.next_event())
        .await
        .expect("an event within 10 s")
        .unwrap();
    node.ack_event(event_id, result).await.unwrap();
    event
}

#[tokio::test]
async fn unique_indexes_get_hidden_tables_that_clients_do_not_list() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    // Refused while a data node is away.
    let e = s.create_table(users("users", true)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NodeNotReady, "{e}");
    let _node = acking_data_node(&mgmd.addr, 1).await;

    let base = s.create_table(users("users", true)).await.unwrap();
    let index = base.unique_index("by_email").expect("the index").clone();
    assert!(!index.building, "a new table has nothing to build");
    assert_eq!(index.columns, vec![1]);
    assert_ne!(index.table.0, 0, "mgmd assigns the hidden table");
    assert_ne!(index.table, base.id);
    let hidden = s.get_table("users$unique$by_email").await.unwrap();
    assert_eq!(hidden.id, index.table);
    assert_eq!(hidden.options.index_of, Some(base.id));
    assert!(hidden.distribution.is_some(), "placed like any table");
    assert_eq!(
        hidden
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        vec!["email", shoal_types::schema::UNIQUE_PK_COLUMN]
    );
    assert_eq!(s.get_table("users").await.unwrap(), base);

    // Lists leave hidden tables out.
    let names: Vec<String> = s
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["users".to_string()]);

    // A hidden table is dropped through its index, not by name.
    let e = s.drop_table("users$unique$by_email").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    assert!(e.detail.contains("drop the index instead"), "{e}");
    assert!(
        e.detail.contains("by_email") && e.detail.contains("users"),
        "{e}"
    );
    // Nor may a create request make one.
    let mut sneaky = users("sneaky", false);
    sneaky.options.index_of = Some(base.id);
    let e = s.create_table(sneaky).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadTableDefinition, "{e}");
    // A table whose hidden table's name is taken is refused whole.
    s.create_table(users("clash$unique$by_email", false))
        .await
        .unwrap();
    let e = s.create_table(users("clash", true)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TableExists, "{e}");
    assert_eq!(
        s.get_table("clash").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );

    // Both survive a restart.
    drop(s);
    mgmd.stop().await;
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    assert_eq!(s.get_table("users").await.unwrap(), base);
    assert_eq!(s.get_table("users$unique$by_email").await.unwrap(), hidden);

    // Dropping the table drops its hidden tables; ids are never reused.
    s.drop_table("users").await.unwrap();
    for name in ["users", "users$unique$by_email"] {
        assert_eq!(
            s.get_table(name).await.unwrap_err().code,
            ErrorCode::NoSuchTable,
            "{name}"
        );
    }
    let _node = acking_data_node(&mgmd.addr, 1).await;
    let again = s.create_table(users("users", true)).await.unwrap();
    assert!(again.id.0 > hidden.id.0);
    drop(s);
    mgmd.stop().await;
}

#[tokio::test]
async fn a_table_with_unique_indexes_reaches_data_nodes_in_steps_and_rolls_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut node = data_node(&mgmd.addr, 1).await;

    let addr = mgmd.addr.clone();
    let creator =
        tokio::spawn(async move { api(&addr).await.create_table(users("u", true)).await });
    // The table without its unique index, then the hidden table, then the
    // index; clients see nothing before the last ack.
    let bare = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::TableCreated(t) => t,
        other => panic!("expected TableCreated, got {other:?}"),
    };
    assert_eq!(bare.name, "u");
    assert!(bare.unique_indexes.is_empty(), "{bare:?}");
    let mut s = api(&mgmd.addr).await;
    assert_eq!(
        s.get_table("u").await.unwrap_err().code,
        ErrorCode::NoSuchTable,
        "hidden while its indexes are not in place"
    );
    let hidden = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::TableCreated(t) => t,
        other => panic!("expected TableCreated, got {other:?}"),
    };
    assert_eq!(hidden.name, "u$unique$by_email");
    assert_eq!(hidden.options.index_of, Some(bare.id));
    let full = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::IndexesChanged(t) => t,
        other => panic!("expected IndexesChanged, got {other:?}"),
    };
    assert_eq!(full.unique_indexes.len(), 1);
    assert_eq!(full.unique_indexes[0].table, hidden.id);
    let created = creator.await.unwrap().unwrap();
    assert_eq!(created, full);
    assert_eq!(s.get_table("u").await.unwrap(), full);

    // A node that fails the index: everything is dropped again.
    let addr = mgmd.addr.clone();
    let creator =
        tokio::spawn(async move { api(&addr).await.create_table(users("v", true)).await });
    let bare = next_event_acked(&mut node, Ok(())).await;
    let hidden = next_event_acked(&mut node, Ok(())).await;
    let refused = shoal_types::ShoalError::with_detail(ErrorCode::OutOfDataMemory, "full");
    assert!(matches!(
        next_event_acked(&mut node, Err(refused)).await,
        MgmEvent::IndexesChanged(_)
    ));
    let mut dropped = Vec::new();
    for _ in 0..2 {
        match next_event_acked(&mut node, Ok(())).await {
            MgmEvent::TableDropped { id } => dropped.push(id),
            other => panic!("expected TableDropped, got {other:?}"),
        }
    }
    let (MgmEvent::TableCreated(bare), MgmEvent::TableCreated(hidden)) = (bare, hidden) else {
        panic!("expected two TableCreated");
    };
    assert_eq!(dropped, vec![bare.id, hidden.id], "the table first");
    let e = creator.await.unwrap().unwrap_err();
    assert_eq!(e.code, ErrorCode::OutOfDataMemory, "{e}");
    for name in ["v", "v$unique$by_email"] {
        assert_eq!(
            s.get_table(name).await.unwrap_err().code,
            ErrorCode::NoSuchTable
        );
    }
    drop((node, s));
    mgmd.stop().await;
}

#[tokio::test]
async fn a_unique_index_is_created_building_then_built_then_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut node = data_node(&mgmd.addr, 1).await;
    let mut s = api(&mgmd.addr).await;
    let addr = mgmd.addr.clone();
    let setup = tokio::spawn(async move {
        let mut s = api(&addr).await;
        let base = s.create_table(users("t", false)).await.unwrap();
        let ordered = shoal_types::IndexDef {
            name: "by_id".into(),
            columns: vec![0],
            dropped: false,
        };
        s.create_index("t", ordered).await.unwrap();
        base
    });
    next_event_acked(&mut node, Ok(())).await;
    next_event_acked(&mut node, Ok(())).await;
    let base = setup.await.unwrap();

    // Created: the hidden table, then the table listing the index as
    // building; answered after both acks.
    let addr = mgmd.addr.clone();
    let creating = tokio::spawn(async move {
        let mut s = api(&addr).await;
        let t = s
            .create_unique_index("t", unique_def("by_email", &[1]))
            .await;
        (s, t)
    });
    let hidden = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::TableCreated(h) => h,
        other => panic!("expected TableCreated, got {other:?}"),
    };
    assert_eq!(hidden.options.index_of, Some(base.id));
    let changed = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::IndexesChanged(t) => t,
        other => panic!("expected IndexesChanged, got {other:?}"),
    };
    let (mut builder, created) = creating.await.unwrap();
    let created = created.unwrap();
    assert_eq!(created, changed);
    assert_eq!(created.version, base.version, "an index changes no version");
    let u = created.unique_index("by_email").unwrap();
    assert!(u.building);
    assert_eq!(u.table, hidden.id);
    assert_eq!(
        s.get_table("t$unique$by_email").await.unwrap(),
        hidden,
        "served to clients: the builder writes it"
    );

    // Names are shared with ordered indexes (both ways); columns must
    // exist.
    for (name, columns) in [
        ("by_email", vec![1]),
        ("by_id", vec![0]),
        ("PRIMARY", vec![0]),
    ] {
        let e = s
            .create_unique_index("t", unique_def(name, &columns))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::TableExists, "{name}: {e}");
    }
    let e = s
        .create_index(
            "t",
            shoal_types::IndexDef {
                name: "by_email".into(),
                columns: vec![1],
                dropped: false,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TableExists, "{e}");
    let e = s
        .create_unique_index("t", unique_def("bad", &[7]))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadTableDefinition, "{e}");
    let e = s
        .create_unique_index("nope", unique_def("x", &[0]))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
    let e = s
        .create_unique_index("t$unique$by_email", unique_def("x", &[0]))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest, "{e}");

    // Built: only by the connection building it, naming its hidden table.
    let hidden_id = s
        .get_table("t")
        .await
        .unwrap()
        .unique_index("by_email")
        .unwrap()
        .table;
    let e = s
        .unique_index_built("t", "by_email", hidden_id)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest, "not the builder: {e}");
    let e = builder
        .unique_index_built("t", "by_email", shoal_types::TableId(hidden_id.0 + 100))
        .await
        .unwrap_err();
    assert_eq!(
        e.code,
        ErrorCode::NoSuchColumn,
        "another index's table: {e}"
    );
    let addr = mgmd.addr.clone();
    let built =
        tokio::spawn(async move { builder.unique_index_built("t", "by_email", hidden_id).await });
    let changed = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::IndexesChanged(t) => t,
        other => panic!("expected IndexesChanged, got {other:?}"),
    };
    let built = built.await.unwrap().unwrap();
    assert_eq!(built, changed);
    assert!(!built.unique_index("by_email").unwrap().building);
    // Again: nothing to do, same answer.
    assert_eq!(
        s.unique_index_built("t", "by_email", hidden_id)
            .await
            .unwrap(),
        built
    );
    let e = s
        .unique_index_built("t", "nope", hidden_id)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchColumn, "{e}");

    // Dropped: out of the table (nodes stop keeping it), then the hidden
    // table.
    let dropping = tokio::spawn(async move { api(&addr).await.drop_index("t", "by_email").await });
    let without = match next_event_acked(&mut node, Ok(())).await {
        MgmEvent::IndexesChanged(t) => t,
        other => panic!("expected IndexesChanged, got {other:?}"),
    };
    assert!(without.unique_indexes.is_empty());
    assert_eq!(
        next_event_acked(&mut node, Ok(())).await,
        MgmEvent::TableDropped { id: hidden.id }
    );
    assert_eq!(dropping.await.unwrap().unwrap(), without);
    assert_eq!(
        s.get_table("t$unique$by_email").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );
    assert_eq!(
        s.drop_index("t", "by_email").await.unwrap_err().code,
        ErrorCode::NoSuchColumn
    );
    // The ordered index is untouched and the name is free again.
    assert!(without.index_number("by_id").is_some());
    let addr = mgmd.addr.clone();
    let again = tokio::spawn(async move {
        api(&addr)
            .await
            .create_unique_index("t", unique_def("by_email", &[1]))
            .await
    });
    next_event_acked(&mut node, Ok(())).await;
    next_event_acked(&mut node, Ok(())).await;
    let again = again.await.unwrap().unwrap();
    assert!(again.unique_index("by_email").unwrap().table.0 > hidden.id.0);
    drop((node, s));
    mgmd.stop().await;
}

/// Polls until `table` has no unique index `index` and its hidden table
/// is gone (10 s at most).
async fn wait_unique_index_gone(s: &mut ApiSession, table: &str, index: &str) {
    let hidden = shoal_types::UniqueIndexDef::table_name(table, index);
    for _ in 0..500 {
        let def = s.get_table(table).await.unwrap();
        let gone = s.get_table(&hidden).await.is_err();
        if def.unique_index(index).is_none() && gone {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("unique index `{index}` of `{table}` was not dropped");
}

#[tokio::test]
async fn a_unique_index_whose_builder_leaves_is_dropped_also_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    let _node = acking_data_node(&mgmd.addr, 1).await;
    s.create_table(users("t", false)).await.unwrap();

    // The builder's connection closes before the build is done.
    let mut builder = api(&mgmd.addr).await;
    let t = builder
        .create_unique_index("t", unique_def("by_email", &[1]))
        .await
        .unwrap();
    assert!(t.unique_index("by_email").unwrap().building);
    drop(builder);
    wait_unique_index_gone(&mut s, "t", "by_email").await;

    // A builder that finishes keeps its index when it leaves.
    let mut builder = api(&mgmd.addr).await;
    let created = builder
        .create_unique_index("t", unique_def("by_email", &[1]))
        .await
        .unwrap();
    let hidden_id = created.unique_index("by_email").unwrap().table;
    builder
        .unique_index_built("t", "by_email", hidden_id)
        .await
        .unwrap();
    drop(builder);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(s
        .get_table("t")
        .await
        .unwrap()
        .unique_index("by_email")
        .is_some());

    // mgmd stops while another index builds: it is gone after the restart
    // (its builder's connection went with the old mgmd).
    let mut builder = api(&mgmd.addr).await;
    builder
        .create_unique_index("t", unique_def("by_id", &[0]))
        .await
        .unwrap();
    drop(s);
    mgmd.stop().await;
    drop(builder);
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    let t = s.get_table("t").await.unwrap();
    assert!(t.unique_index("by_id").is_none(), "{t:?}");
    assert!(t.unique_index("by_email").is_some(), "{t:?}");
    assert_eq!(
        s.get_table("t$unique$by_id").await.unwrap_err().code,
        ErrorCode::NoSuchTable
    );
    assert!(s.get_table("t$unique$by_email").await.is_ok());
    drop(s);
    mgmd.stop().await;
}

fn names(tables: &[TableDef]) -> Vec<String> {
    let mut n: Vec<String> = tables.iter().map(|t| t.name.clone()).collect();
    n.sort();
    n
}

#[tokio::test]
async fn databases_hold_their_tables_and_go_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    let _node = acking_data_node(&mgmd.addr, 1).await;
    assert!(s.list_databases().await.unwrap().is_empty());

    // A table of a database needs the database.
    let e = s.create_table(table("db1.t1")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
    assert!(e.detail.contains("database `db1` does not exist"), "{e}");

    s.create_database("db1").await.unwrap();
    let e = s.create_database("db1").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TableExists, "{e}");
    for reserved in ["shoal", "information_schema", "mysql"] {
        let e = s.create_database(reserved).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::TableExists, "{reserved}: {e}");
        assert!(e.detail.contains("reserved"), "{e}");
    }
    for bad in ["", "a.b", "a-b", &"x".repeat(65)] {
        let e = s.create_database(bad).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::BadTableDefinition, "{bad:?}: {e}");
    }
    s.create_database("db2").await.unwrap();
    assert_eq!(s.list_databases().await.unwrap(), vec!["db1", "db2"]);

    s.create_table(table("db1.t1")).await.unwrap();
    s.create_table(users("db1.t2", true)).await.unwrap();
    s.create_table(table("db2.t1")).await.unwrap();
    s.create_table(table("plain")).await.unwrap();
    assert!(s.get_table("db1.t2$unique$by_email").await.is_ok());

    // Databases survive a restart, and the file lists them.
    drop(s);
    mgmd.stop().await;
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    let _node = acking_data_node(&mgmd.addr, 1).await;
    assert_eq!(s.list_databases().await.unwrap(), vec!["db1", "db2"]);

    // Dropping a database drops its tables and their hidden tables only.
    let dropped = s.drop_database("db1").await.unwrap();
    assert_eq!(names(&dropped), vec!["db1.t1", "db1.t2"]);
    for gone in ["db1.t1", "db1.t2", "db1.t2$unique$by_email"] {
        assert_eq!(
            s.get_table(gone).await.unwrap_err().code,
            ErrorCode::NoSuchTable,
            "{gone}"
        );
    }
    assert_eq!(
        names(&s.list_tables().await.unwrap()),
        vec!["db2.t1", "plain"]
    );
    assert_eq!(s.list_databases().await.unwrap(), vec!["db2"]);
    let e = s.drop_database("db1").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
    assert!(e.detail.contains("database `db1`"), "{e}");
    let e = s.create_table(table("db1.t1")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
    // An empty database drops too.
    s.create_database("empty").await.unwrap();
    assert!(s.drop_database("empty").await.unwrap().is_empty());
    drop(s);
    mgmd.stop().await;

    // A schema file from before databases (no `databases` key) loads.
    let config = ClusterConfig::local(1, 1, 0, dir.path());
    let path = config.mgmd_data_dir().join(server::SCHEMA_FILE);
    let mut file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["databases"], serde_json::json!(["db2"]));
    let with_db = file.clone();
    file.as_object_mut().unwrap().remove("databases");
    file["tables"]
        .as_array_mut()
        .unwrap()
        .retain(|t| !t["name"].as_str().unwrap().contains('.'));
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let mgmd = Mgmd::start(dir.path(), 1).await;
    let mut s = api(&mgmd.addr).await;
    assert!(s.list_databases().await.unwrap().is_empty());
    assert_eq!(names(&s.list_tables().await.unwrap()), vec!["plain"]);
    drop(s);
    mgmd.stop().await;

    // A table of a database the file does not list is refused at start.
    let mut orphan = with_db;
    orphan["databases"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_vec(&orphan).unwrap()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = server::run(config, listener, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        err.detail.contains("db2.t1") && err.detail.contains(server::SCHEMA_FILE),
        "{err}"
    );
}
