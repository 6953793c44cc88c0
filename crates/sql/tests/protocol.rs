//! The MySQL protocol layer against a fake executor, over real sockets on
//! 127.0.0.1: a raw client here speaks the protocol byte by byte, and the
//! `mariadb` command-line client (if installed) speaks it as users do.
//! No cluster is involved.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_common::auth::plugins::caching_sha2_password::scramble_sha256;
use mysql_common::auth::plugins::mysql_native_password::scramble_native;
use mysql_common::constants::CapabilityFlags;
use shoal_sql::answer::{AnswerEnd, AnswerSink, ResultStream};
use shoal_sql::handler::answer_all;
use shoal_sql::protocol::{serve_with_shutdown, Account, PasswordHashes, ServerConfig, Users};
use shoal_sql::{Column, ColumnKind, Handler, HandlerFactory, Outcome, SessionStatus, SqlError};
use shoal_types::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------
// The fake executor.

/// What the fake handlers did, for the tests to check.
#[derive(Default)]
struct Journal {
    handlers_made: AtomicUsize,
    closes: AtomicUsize,
    queries: Mutex<Vec<String>>,
    databases: Mutex<Vec<String>>,
    /// A `STREAM n WAIT` waits here halfway, until the test has read
    /// its first rows.
    go: tokio::sync::Notify,
    /// Rows a `STREAM` wrote before its client was gone (1160).
    streamed_before_gone: Mutex<Option<u64>>,
}

struct FakeFactory {
    journal: Arc<Journal>,
}

impl HandlerFactory for FakeFactory {
    type Handler = FakeHandler;

    fn handler(&self, _user: &str, _peer: SocketAddr) -> FakeHandler {
        self.journal.handlers_made.fetch_add(1, Ordering::SeqCst);
        FakeHandler {
            journal: self.journal.clone(),
            in_transaction: false,
        }
    }
}

struct FakeHandler {
    journal: Arc<Journal>,
    in_transaction: bool,
}

fn column(name: &str, kind: ColumnKind) -> Column {
    Column {
        name: name.to_string(),
        table: String::new(),
        schema: String::new(),
        kind,
        length: 20,
        decimals: 0,
        nullable: true,
        unsigned: false,
        binary: !matches!(kind, ColumnKind::VarString | ColumnKind::String),
        primary_key: false,
    }
}

fn one_value(name: &str, kind: ColumnKind, value: &str) -> Outcome {
    Outcome::Rows {
        columns: vec![column(name, kind)],
        rows: vec![vec![Some(value.as_bytes().to_vec())]],
    }
}

impl FakeHandler {
    /// One statement: a few canned answers, `ECHO x` answers `x`, and
    /// anything else is a syntax error.
    async fn statement(&mut self, sql: &str) -> Result<Outcome, SqlError> {
        let upper = sql.to_ascii_uppercase();
        match upper.as_str() {
            "SELECT 1" => Ok(one_value("1", ColumnKind::LongLong, "1")),
            "SELECT 2" => Ok(one_value("2", ColumnKind::LongLong, "2")),
            "SELECT @@VERSION_COMMENT LIMIT 1" => Ok(one_value(
                "@@version_comment",
                ColumnKind::VarString,
                "Shoal",
            )),
            "INSERT" => Ok(Outcome::Ok {
                affected_rows: 3,
                last_insert_id: 42,
                warnings: 1,
                info: "Records: 3  Duplicates: 0  Warnings: 1".to_string(),
            }),
            "BEGIN" => {
                self.in_transaction = true;
                Ok(Outcome::ok())
            }
            "COMMIT" => {
                self.in_transaction = false;
                Ok(Outcome::ok())
            }
            "SLEEP" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(Outcome::ok())
            }
            "TYPED" => Ok(Outcome::Rows {
                columns: vec![
                    column("i", ColumnKind::Long),
                    column("d", ColumnKind::Double),
                    column("s", ColumnKind::VarString),
                    column("t", ColumnKind::DateTime),
                    column("n", ColumnKind::LongLong),
                ],
                rows: vec![vec![
                    Some(b"-7".to_vec()),
                    Some(b"2.5".to_vec()),
                    Some(b"hi".to_vec()),
                    Some(b"2024-02-29 13:05:09".to_vec()),
                    None,
                ]],
            }),
            "BROKEN" => Ok(Outcome::Rows {
                columns: vec![column("i", ColumnKind::Long)],
                rows: vec![vec![Some(b"not a number".to_vec())]],
            }),
            _ if upper.starts_with("SET ") => Ok(Outcome::ok()),
            _ if upper.starts_with("SELECT @@") => {
                Ok(one_value(&sql[7..], ColumnKind::VarString, ""))
            }
            _ if upper.starts_with("ECHO ") => {
                Ok(one_value("echo", ColumnKind::VarString, &sql[5..]))
            }
            _ => Err(SqlError::syntax(format!(
                "You have an error in your SQL syntax near '{sql}'"
            ))),
        }
    }
}

/// The 1000-byte string every `STREAM` row carries.
fn streamed_text() -> String {
    "x".repeat(1000)
}

impl FakeHandler {
    /// `STREAM n [WAIT|FAIL]`: a result set of `n` rows (`i`, and 1000
    /// bytes of text) written through a [`ResultStream`] as they are
    /// made, none held. `WAIT` stops after 300 rows until the test says
    /// go; `FAIL` ends with an error in place of the last row.
    async fn stream(&mut self, args: &str, sink: &mut dyn AnswerSink) {
        let mut words = args.split_whitespace();
        let n: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let mode = words.next().unwrap_or("");
        let end = AnswerEnd {
            status: self.status(),
            more: false,
        };
        let mut stream = ResultStream::new(sink, end);
        stream.columns(&[
            column("i", ColumnKind::LongLong),
            column("s", ColumnKind::VarString),
        ]);
        let text = streamed_text();
        let mut failed = None;
        for i in 0..n {
            if mode == "WAIT" && i == 300 {
                self.journal.go.notified().await;
            }
            if mode == "FAIL" && i + 1 == n {
                failed = Some(SqlError::new(
                    1317,
                    "70100",
                    "Query execution was interrupted",
                ));
                break;
            }
            let row = [Value::Int(i as i64), Value::Str(text.clone())];
            if let Err(e) = stream.row(&row).await {
                *self.journal.streamed_before_gone.lock().expect("lock") = Some(i);
                failed = Some(e);
                break;
            }
        }
        match failed {
            Some(e) => {
                let _ = sink.whole(Err(e), end).await;
            }
            None => sink.end_rows(end),
        }
    }
}

impl Handler for FakeHandler {
    async fn query(&mut self, sql: &str, sink: &mut dyn AnswerSink) {
        self.journal
            .queries
            .lock()
            .expect("lock")
            .push(sql.to_string());
        if let Some(args) = sql.strip_prefix("STREAM ") {
            return self.stream(args, sink).await;
        }
        let mut results = Vec::new();
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let result = self.statement(statement).await;
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        answer_all(sink, results, self.status()).await;
    }

    async fn use_database(&mut self, database: &str) -> Result<(), SqlError> {
        if database == "nope" {
            return Err(SqlError::new(1049, "42000", "Unknown database 'nope'"));
        }
        self.journal
            .databases
            .lock()
            .expect("lock")
            .push(database.to_string());
        Ok(())
    }

    fn status(&self) -> SessionStatus {
        SessionStatus {
            in_transaction: self.in_transaction,
            autocommit: true,
        }
    }

    async fn close(&mut self) {
        self.journal.closes.fetch_add(1, Ordering::SeqCst);
    }

    /// The columns the statement would answer (statements with effects
    /// answer none without running).
    async fn prepare(&mut self, sql: &str) -> Result<Vec<Column>, SqlError> {
        let upper = sql.to_ascii_uppercase();
        if upper.starts_with("ECHO ") {
            return Ok(vec![column("echo", ColumnKind::VarString)]);
        }
        if ["BEGIN", "COMMIT", "SLEEP"].contains(&upper.as_str()) {
            return Ok(Vec::new());
        }
        match self.statement(sql).await? {
            Outcome::Rows { columns, .. } => Ok(columns),
            Outcome::Ok { .. } | Outcome::Streamed => Ok(Vec::new()),
        }
    }
}

// ---------------------------------------------------------------------
// A server per test.

struct Server {
    addr: SocketAddr,
    journal: Arc<Journal>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(config: ServerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let journal = Arc::new(Journal::default());
        let factory = Arc::new(FakeFactory {
            journal: journal.clone(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with_shutdown(listener, factory, config, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            journal,
            stop: Some(stop),
            task,
        }
    }

    async fn default() -> Server {
        Server::start(test_config()).await
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = timeout(WAIT, self.task).await.expect("the server stops");
        result.expect("no panic").expect("serve returns Ok");
    }

    /// Waits until `closes` handlers have been closed.
    async fn wait_for_closes(&self, closes: usize) {
        let waited = timeout(WAIT, async {
            while self.journal.closes.load(Ordering::SeqCst) < closes {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "expected {closes} closes, saw {}",
            self.journal.closes.load(Ordering::SeqCst)
        );
    }
}

fn test_config() -> ServerConfig {
    let legacy = Account {
        user: "legacy".to_string(),
        host: "%".to_string(),
        password: PasswordHashes::from_native_hex(&PasswordHashes::of("old").native_hex()),
    };
    ServerConfig {
        users: Arc::new(
            Users::default()
                .with_password("app", "%", "secret")
                .with_account(legacy),
        ),
        ..ServerConfig::default()
    }
}

// ---------------------------------------------------------------------
// A raw client.

struct Client {
    stream: TcpStream,
    seq: u8,
    capabilities: CapabilityFlags,
}

fn client_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
}

struct Login<'a> {
    user: &'a str,
    password: &'a str,
    database: Option<&'a str>,
    plugin: &'a str,
    capabilities: CapabilityFlags,
    /// Answer the greeting with an empty proof, as libmariadb does when its
    /// `--default-auth` plugin is not the one the greeting names.
    withhold_proof: bool,
}

impl Default for Login<'_> {
    fn default() -> Self {
        Login {
            user: "root",
            password: "",
            database: None,
            plugin: "mysql_native_password",
            capabilities: client_capabilities(),
            withhold_proof: false,
        }
    }
}

fn lenenc(out: &mut Vec<u8>, bytes: &[u8]) {
    assert!(bytes.len() < 251);
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn native_proof(scramble: &[u8], password: &str) -> Vec<u8> {
    scramble_native(scramble, password.as_bytes()).map_or_else(Vec::new, |p| p.to_vec())
}

/// Reads a length-encoded integer at `*at`.
fn read_lenenc(bytes: &[u8], at: &mut usize) -> u64 {
    let first = bytes[*at];
    *at += 1;
    let width = match first {
        0..=0xFA => return u64::from(first),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => panic!("not a length-encoded integer: {first:#x}"),
    };
    let mut value = [0u8; 8];
    value[..width].copy_from_slice(&bytes[*at..*at + width]);
    *at += width;
    u64::from_le_bytes(value)
}

fn read_lenenc_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let len = read_lenenc(bytes, at) as usize;
    let out = &bytes[*at..*at + len];
    *at += len;
    out
}

/// An answer, parsed.
#[derive(Debug)]
enum Answer {
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
        status: u16,
        warnings: u16,
        info: String,
    },
    Err {
        code: u16,
        sqlstate: String,
        message: String,
    },
    Rows {
        /// (name, type, flags, collation)
        columns: Vec<(String, u8, u16, u16)>,
        /// Raw row packets.
        rows: Vec<Vec<u8>>,
        status: u16,
    },
}

fn parse_ok(packet: &[u8]) -> Answer {
    let mut at = 1;
    let affected_rows = read_lenenc(packet, &mut at);
    let last_insert_id = read_lenenc(packet, &mut at);
    let status = u16::from_le_bytes([packet[at], packet[at + 1]]);
    let warnings = u16::from_le_bytes([packet[at + 2], packet[at + 3]]);
    at += 4;
    let info = if at < packet.len() {
        String::from_utf8(read_lenenc_bytes(packet, &mut at).to_vec()).expect("utf8 info")
    } else {
        String::new()
    };
    assert_eq!(at, packet.len(), "nothing after the info");
    Answer::Ok {
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info,
    }
}

fn parse_err(packet: &[u8]) -> Answer {
    assert_eq!(packet[0], 0xFF);
    assert_eq!(packet[3], b'#', "protocol 4.1 errors carry a SQLSTATE");
    Answer::Err {
        code: u16::from_le_bytes([packet[1], packet[2]]),
        sqlstate: String::from_utf8(packet[4..9].to_vec()).expect("state"),
        message: String::from_utf8(packet[9..].to_vec()).expect("message"),
    }
}

fn text_values(row: &[u8]) -> Vec<Option<String>> {
    let mut at = 0;
    let mut values = Vec::new();
    while at < row.len() {
        if row[at] == 0xFB {
            at += 1;
            values.push(None);
        } else {
            let bytes = read_lenenc_bytes(row, &mut at);
            values.push(Some(String::from_utf8(bytes.to_vec()).expect("utf8")));
        }
    }
    values
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        Client {
            stream,
            seq: 0,
            capabilities: client_capabilities(),
        }
    }

    /// The next packet, or `None` if the server closed the connection.
    async fn try_read(&mut self) -> Option<Vec<u8>> {
        let mut header = [0u8; 4];
        match timeout(WAIT, self.stream.read_exact(&mut header)).await {
            Err(_) => panic!("no packet from the server within {WAIT:?}"),
            Ok(Err(_)) => return None,
            Ok(Ok(_)) => {}
        }
        assert_eq!(header[3], self.seq, "server sequence id");
        self.seq = self.seq.wrapping_add(1);
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut payload = vec![0u8; len];
        timeout(WAIT, self.stream.read_exact(&mut payload))
            .await
            .expect("packet body in time")
            .expect("packet body");
        Some(payload)
    }

    async fn read(&mut self) -> Vec<u8> {
        self.try_read()
            .await
            .expect("a packet, not a closed connection")
    }

    /// The server closes the connection (after whatever it sent).
    async fn expect_closed(&mut self) {
        let mut byte = [0u8; 1];
        let read = timeout(WAIT, self.stream.read(&mut byte))
            .await
            .expect("closed in time");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "expected the connection closed"
        );
    }

    async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    async fn write(&mut self, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], self.seq];
        packet.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self.write_raw(&packet).await;
    }

    async fn command(&mut self, command: u8, body: &[u8]) {
        self.seq = 0;
        let mut payload = vec![command];
        payload.extend_from_slice(body);
        self.write(&payload).await;
    }

    /// Logs in; the server's ERR packet if refused.
    async fn login(addr: SocketAddr, login: Login<'_>) -> Result<Client, Vec<u8>> {
        let mut client = Client::connect(addr).await;
        client.capabilities = login.capabilities;
        let greeting = client.read().await;
        assert_eq!(greeting[0], 10, "protocol version 10");
        let version_end = greeting.iter().position(|&b| b == 0).expect("version");
        let mut at = version_end + 1 + 4;
        let mut scramble = greeting[at..at + 8].to_vec();
        at += 8 + 1 + 2 + 1 + 2 + 2;
        let auth_len = greeting[at] as usize;
        at += 1 + 10;
        scramble.extend_from_slice(&greeting[at..at + auth_len - 9]);
        assert_eq!(scramble.len(), 20);
        let scramble: [u8; 20] = scramble.try_into().expect("20 bytes");

        let proof = match login.plugin {
            _ if login.withhold_proof => Vec::new(),
            "caching_sha2_password" => scramble_sha256(&scramble, login.password.as_bytes())
                .map_or_else(Vec::new, |p| p.to_vec()),
            _ => native_proof(&scramble, login.password),
        };
        let mut capabilities = login.capabilities;
        if login.database.is_some() {
            capabilities |= CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        }
        let mut response = capabilities.bits().to_le_bytes().to_vec();
        response.extend((16u32 << 20).to_le_bytes());
        response.push(45);
        response.extend([0u8; 23]);
        response.extend(login.user.as_bytes());
        response.push(0);
        lenenc(&mut response, &proof);
        if let Some(database) = login.database {
            response.extend(database.as_bytes());
            response.push(0);
        }
        response.extend(login.plugin.as_bytes());
        response.push(0);
        let mut attrs = Vec::new();
        lenenc(&mut attrs, b"program_name");
        lenenc(&mut attrs, b"protocol-test");
        lenenc(&mut response, &attrs);
        client.write(&response).await;

        loop {
            let packet = client.read().await;
            match packet[0] {
                0x00 => return Ok(client),
                0xFF => return Err(packet),
                0x01 => assert_eq!(packet, [0x01, 0x03], "fast_auth_success"),
                0xFE => {
                    let name_end = packet.iter().position(|&b| b == 0).expect("plugin name");
                    assert_eq!(&packet[1..name_end], b"mysql_native_password");
                    let data = &packet[name_end + 1..];
                    assert_eq!(data.len(), 21, "20 bytes of scramble and a NUL");
                    let proof = native_proof(&data[..20], login.password);
                    client.write(&proof).await;
                }
                other => panic!("unexpected login packet {other:#x}"),
            }
        }
    }

    async fn root(addr: SocketAddr) -> Client {
        Client::login(addr, Login::default())
            .await
            .expect("root logs in")
    }

    /// Reads one answer: an OK, an ERR, or a whole result set.
    async fn answer(&mut self) -> Answer {
        let first = self.read().await;
        match first[0] {
            0x00 => return parse_ok(&first),
            0xFF => return parse_err(&first),
            _ => {}
        }
        let mut at = 0;
        let count = read_lenenc(&first, &mut at);
        let mut columns = Vec::new();
        for _ in 0..count {
            let definition = self.read().await;
            let mut at = 0;
            for _ in 0..4 {
                read_lenenc_bytes(&definition, &mut at);
            }
            let name =
                String::from_utf8(read_lenenc_bytes(&definition, &mut at).to_vec()).expect("name");
            read_lenenc_bytes(&definition, &mut at);
            assert_eq!(definition[at], 0x0C);
            let collation = u16::from_le_bytes([definition[at + 1], definition[at + 2]]);
            let kind = definition[at + 7];
            let flags = u16::from_le_bytes([definition[at + 8], definition[at + 9]]);
            columns.push((name, kind, flags, collation));
        }
        let deprecate_eof = self
            .capabilities
            .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        if !deprecate_eof {
            let eof = self.read().await;
            assert_eq!((eof[0], eof.len()), (0xFE, 5), "EOF after the columns");
        }
        let mut rows = Vec::new();
        loop {
            let packet = self.read().await;
            if packet[0] == 0xFE && packet.len() < 9 {
                let status = if deprecate_eof {
                    match parse_ok(&packet) {
                        Answer::Ok { status, .. } => status,
                        _ => unreachable!(),
                    }
                } else {
                    assert_eq!(packet.len(), 5, "an EOF packet");
                    u16::from_le_bytes([packet[3], packet[4]])
                };
                return Answer::Rows {
                    columns,
                    rows,
                    status,
                };
            }
            if packet[0] == 0xFF {
                panic!("an error inside a result set: {:?}", parse_err(&packet));
            }
            rows.push(packet);
        }
    }

    async fn query(&mut self, sql: &str) -> Answer {
        self.command(0x03, sql.as_bytes()).await;
        self.answer().await
    }

    /// A query answering one result set: its text rows.
    async fn rows(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        match self.query(sql).await {
            Answer::Rows { rows, .. } => rows.iter().map(|r| text_values(r)).collect(),
            other => panic!("expected rows for {sql}, got {other:?}"),
        }
    }
}

fn err_code(answer: &Answer) -> u16 {
    match answer {
        Answer::Err { code, .. } => *code,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn err_packet_code(packet: &[u8]) -> u16 {
    assert_eq!(packet[0], 0xFF, "an ERR packet");
    u16::from_le_bytes([packet[1], packet[2]])
}

fn err_packet_message(packet: &[u8]) -> String {
    String::from_utf8_lossy(&packet[9..]).into_owned()
}

const AUTOCOMMIT: u16 = 0x0002;
const IN_TRANS: u16 = 0x0001;
const MORE_RESULTS: u16 = 0x0008;

// ---------------------------------------------------------------------
// Tests.

#[tokio::test]
async fn select_1_answers_a_result_set_byte_for_byte() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x03, b"SELECT 1").await;
    assert_eq!(client.read().await, [1], "one column");
    let mut definition = vec![3, b'd', b'e', b'f', 0, 0, 0, 1, b'1', 1, b'1', 0x0C, 63, 0];
    definition.extend([20, 0, 0, 0, 8]); // length 20, LONGLONG
    definition.extend((0x8000u16 | 0x80).to_le_bytes()); // NUM | BINARY
    definition.extend([0, 0, 0]);
    assert_eq!(client.read().await, definition);
    assert_eq!(client.read().await, [1, b'1'], "the row");
    assert_eq!(
        client.read().await,
        [0xFE, 0, 0, 2, 0, 0, 0],
        "OK-as-EOF, autocommit"
    );
    server.stop().await;
}

#[tokio::test]
async fn ok_packets_carry_affected_rows_insert_id_warnings_info_and_status() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x03, b"INSERT").await;
    let mut expected = vec![0x00, 3, 42, 2, 0, 1, 0, 38];
    expected.extend(b"Records: 3  Duplicates: 0  Warnings: 1");
    assert_eq!(client.read().await, expected);
    match client.query("INSERT").await {
        Answer::Ok {
            affected_rows,
            last_insert_id,
            warnings,
            info,
            ..
        } => {
            assert_eq!((affected_rows, last_insert_id, warnings), (3, 42, 1));
            assert_eq!(info, "Records: 3  Duplicates: 0  Warnings: 1");
        }
        other => panic!("{other:?}"),
    }
    match client.query("BEGIN").await {
        Answer::Ok { status, .. } => assert_eq!(status, AUTOCOMMIT | IN_TRANS),
        other => panic!("{other:?}"),
    }
    match client.query("COMMIT").await {
        Answer::Ok { status, .. } => assert_eq!(status, AUTOCOMMIT),
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn multi_statements_answer_each_result_with_more_results_between() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x03, b"SELECT 1; INSERT; SELECT 2").await;
    match client.answer().await {
        Answer::Rows { status, rows, .. } => {
            assert_eq!(status, AUTOCOMMIT | MORE_RESULTS);
            assert_eq!(text_values(&rows[0]), vec![Some("1".to_string())]);
        }
        other => panic!("{other:?}"),
    }
    match client.answer().await {
        Answer::Ok {
            status,
            affected_rows,
            ..
        } => assert_eq!((status, affected_rows), (AUTOCOMMIT | MORE_RESULTS, 3)),
        other => panic!("{other:?}"),
    }
    match client.answer().await {
        Answer::Rows { status, .. } => assert_eq!(status, AUTOCOMMIT),
        other => panic!("{other:?}"),
    }
    // An error ends the list.
    client.command(0x03, b"SELECT 1; NONSENSE; SELECT 2").await;
    match client.answer().await {
        Answer::Rows { status, .. } => assert_eq!(status, AUTOCOMMIT | MORE_RESULTS),
        other => panic!("{other:?}"),
    }
    match client.answer().await {
        Answer::Err {
            code,
            sqlstate,
            message,
        } => {
            assert_eq!((code, sqlstate.as_str()), (1064, "42000"));
            assert!(message.contains("NONSENSE"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The connection is in step: the next query answers normally.
    assert_eq!(
        client.rows("SELECT 2").await,
        vec![vec![Some("2".to_string())]]
    );
    server.stop().await;
}

#[tokio::test]
async fn multi_statements_are_refused_when_the_client_did_not_ask() {
    let server = Server::default().await;
    let login = Login {
        capabilities: client_capabilities() - CapabilityFlags::CLIENT_MULTI_STATEMENTS,
        ..Login::default()
    };
    let mut client = Client::login(server.addr, login).await.expect("login");
    assert_eq!(err_code(&client.query("SELECT 1; SELECT 2").await), 1064);
    assert_eq!(
        client.rows("SELECT 1;").await.len(),
        1,
        "a trailing ; is one statement"
    );
    // COM_SET_OPTION turns them on.
    client.command(0x1B, &0u16.to_le_bytes()).await;
    assert_eq!(client.read().await[0], 0xFE);
    client.command(0x03, b"SELECT 1; SELECT 2").await;
    assert!(matches!(client.answer().await, Answer::Rows { .. }));
    assert!(matches!(client.answer().await, Answer::Rows { .. }));
    server.stop().await;
}

#[tokio::test]
async fn clients_without_deprecate_eof_get_eof_packets() {
    let server = Server::default().await;
    let login = Login {
        capabilities: client_capabilities() - CapabilityFlags::CLIENT_DEPRECATE_EOF,
        ..Login::default()
    };
    let mut client = Client::login(server.addr, login).await.expect("login");
    client.command(0x03, b"SELECT 1").await;
    assert_eq!(client.read().await, [1]);
    client.read().await; // the column definition
    assert_eq!(
        client.read().await,
        [0xFE, 0, 0, 2, 0],
        "EOF after the columns"
    );
    assert_eq!(client.read().await, [1, b'1']);
    assert_eq!(
        client.read().await,
        [0xFE, 0, 0, 2, 0],
        "EOF after the rows"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_prepare_answer_without_deprecate_eof_ends_each_list_with_eof() {
    let server = Server::default().await;
    let login = Login {
        capabilities: client_capabilities() - CapabilityFlags::CLIENT_DEPRECATE_EOF,
        ..Login::default()
    };
    let mut client = Client::login(server.addr, login).await.expect("login");
    client.command(0x16, b"ECHO ?").await;
    let ok = client.read().await;
    assert_eq!(&ok[5..9], &[1, 0, 1, 0]);
    assert_eq!(
        client.read().await[..4],
        [3, b'd', b'e', b'f'],
        "the parameter"
    );
    assert_eq!(client.read().await, [0xFE, 0, 0, 2, 0]);
    assert_eq!(
        client.read().await[..4],
        [3, b'd', b'e', b'f'],
        "the column"
    );
    assert_eq!(client.read().await, [0xFE, 0, 0, 2, 0]);
    // A statement with neither: the OK alone.
    client.command(0x16, b"INSERT").await;
    assert_eq!(client.read().await[5..9], [0, 0, 0, 0]);
    client.command(0x0E, b"").await;
    assert_eq!(client.read().await[0], 0x00, "nothing else was pending");
    server.stop().await;
}

#[tokio::test]
async fn passwords_plugins_and_refusals() {
    let server = Server::default().await;
    // mysql_native_password.
    let app = Login {
        user: "app",
        password: "secret",
        ..Login::default()
    };
    assert!(Client::login(server.addr, app).await.is_ok());
    // caching_sha2_password fast path: 0x01 0x03 then OK (checked in login()).
    let sha2 = Login {
        user: "app",
        password: "secret",
        plugin: "caching_sha2_password",
        ..Login::default()
    };
    assert!(Client::login(server.addr, sha2).await.is_ok());
    // An account with only a native hash: caching_sha2 gets an auth switch.
    let legacy = Login {
        user: "legacy",
        password: "old",
        plugin: "caching_sha2_password",
        ..Login::default()
    };
    assert!(Client::login(server.addr, legacy).await.is_ok());
    // A caching_sha2 client that kept the greeting's scramble to itself.
    let withheld = Login {
        user: "app",
        password: "secret",
        plugin: "caching_sha2_password",
        withhold_proof: true,
        ..Login::default()
    };
    assert!(Client::login(server.addr, withheld).await.is_ok());
    // An unknown plugin gets an auth switch too.
    let dialog = Login {
        user: "app",
        password: "secret",
        plugin: "dialog",
        ..Login::default()
    };
    assert!(Client::login(server.addr, dialog).await.is_ok());

    // Refusals: one code, one message shape.
    let cases = [
        ("app", "wrong", "mysql_native_password", "YES"),
        ("app", "wrong", "caching_sha2_password", "YES"),
        ("app", "", "mysql_native_password", "NO"),
        ("nobody", "x", "mysql_native_password", "YES"),
        ("nobody", "x", "caching_sha2_password", "YES"),
        ("root", "x", "mysql_native_password", "YES"),
    ];
    for (user, password, plugin, using) in cases {
        let login = Login {
            user,
            password,
            plugin,
            ..Login::default()
        };
        let refused = Client::login(server.addr, login)
            .await
            .err()
            .expect("refused");
        assert_eq!(
            err_packet_code(&refused),
            1045,
            "{user}/{password}/{plugin}"
        );
        assert_eq!(&refused[3..9], b"#28000");
        assert_eq!(
            err_packet_message(&refused),
            format!("Access denied for user '{user}'@'127.0.0.1' (using password: {using})")
        );
    }
    assert_eq!(server.journal.handlers_made.load(Ordering::SeqCst), 5);
    // The server still serves.
    let mut client = Client::root(server.addr).await;
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn the_handshake_database_is_opened_or_refused() {
    let server = Server::default().await;
    let shop = Login {
        database: Some("shop"),
        ..Login::default()
    };
    let mut client = Client::login(server.addr, shop).await.expect("login");
    assert_eq!(*server.journal.databases.lock().expect("lock"), ["shop"]);
    // COM_INIT_DB.
    client.command(0x02, b"other").await;
    assert_eq!(client.read().await[0], 0x00);
    client.command(0x02, b"nope").await;
    assert_eq!(err_packet_code(&client.read().await), 1049);

    let nope = Login {
        database: Some("nope"),
        ..Login::default()
    };
    let refused = Client::login(server.addr, nope)
        .await
        .err()
        .expect("refused");
    assert_eq!(err_packet_code(&refused), 1049);
    server.stop().await;
}

#[tokio::test]
async fn small_commands() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    // COM_PING.
    client.command(0x0E, b"").await;
    assert_eq!(client.read().await, [0, 0, 0, 2, 0, 0, 0]);
    // COM_STATISTICS: one text packet.
    client.command(0x09, b"").await;
    let statistics = String::from_utf8(client.read().await).expect("text");
    assert!(statistics.starts_with("Uptime: "), "{statistics}");
    assert!(statistics.contains("Threads: 1"), "{statistics}");
    // COM_FIELD_LIST: an empty list.
    client.command(0x04, b"t\0").await;
    assert_eq!(client.read().await[0], 0xFE);
    // An unknown command: 1047, and the connection goes on.
    client.command(0x1D, b"").await;
    let unknown = client.read().await;
    assert_eq!(err_packet_code(&unknown), 1047);
    assert_eq!(&unknown[3..9], b"#08S01");
    // COM_STMT_FETCH: no cursors.
    client.command(0x1C, &[1, 0, 0, 0, 1, 0, 0, 0]).await;
    assert_eq!(err_packet_code(&client.read().await), 1421);
    // Not UTF-8.
    client.command(0x03, b"SELECT '\xFF'").await;
    assert_eq!(err_packet_code(&client.read().await), 1300);
    // Empty.
    assert_eq!(err_code(&client.query("  ").await), 1065);
    // COM_RESET_CONNECTION: a fresh handler (the old one closed).
    client.command(0x1F, b"").await;
    assert_eq!(client.read().await[0], 0x00);
    assert_eq!(server.journal.handlers_made.load(Ordering::SeqCst), 2);
    assert_eq!(server.journal.closes.load(Ordering::SeqCst), 1);
    assert_eq!(client.rows("SELECT 2").await.len(), 1);
    // COM_QUIT: no answer, the handler closes.
    client.command(0x01, b"").await;
    client.expect_closed().await;
    server.wait_for_closes(2).await;
    server.stop().await;
}

#[tokio::test]
async fn prepared_statements_bind_parameters_and_answer_binary_rows() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x16, b"ECHO ? and ? and '?'").await;
    let ok = client.read().await;
    assert_eq!(ok[0], 0x00);
    let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    assert_eq!(&ok[5..9], &[1, 0, 2, 0], "one column, two parameters");
    for _ in 0..2 {
        let param = client.read().await;
        assert_eq!(&param[..4], &[3, b'd', b'e', b'f']);
    }
    let announced = client.read().await;
    assert_eq!(
        &announced[..12],
        &[3, b'd', b'e', b'f', 0, 0, 0, 4, b'e', b'c', b'h', b'o']
    );
    // Execute: a LONGLONG 5 and a string with a quote.
    let mut execute = id.to_le_bytes().to_vec();
    execute.push(0);
    execute.extend(1u32.to_le_bytes());
    execute.push(0); // NULL bitmap
    execute.push(1); // types follow
    execute.extend([8, 0, 253, 0]);
    execute.extend(5i64.to_le_bytes());
    execute.extend(b"\x04it's");
    client.command(0x17, &execute).await;
    match client.answer().await {
        Answer::Rows { columns, rows, .. } => {
            assert_eq!(columns[0].0, "echo");
            // Binary row: header, 1-byte NULL bitmap, one lenenc string.
            let expected = b"5 and 'it''s' and '?'";
            let mut row = vec![0x00, 0x00, expected.len() as u8];
            row.extend(expected);
            assert_eq!(rows, vec![row]);
        }
        other => panic!("{other:?}"),
    }
    let queries = server.journal.queries.lock().expect("lock").clone();
    assert_eq!(
        queries.last().map(String::as_str),
        Some("ECHO 5 and 'it''s' and '?'")
    );

    // Typed binary values.
    client.command(0x16, b"TYPED").await;
    let ok = client.read().await;
    let typed = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    assert_eq!(&ok[5..9], &[5, 0, 0, 0], "five columns, no parameters");
    for _ in 0..5 {
        client.read().await;
    }
    let mut execute = typed.to_le_bytes().to_vec();
    execute.push(0);
    execute.extend(1u32.to_le_bytes());
    client.command(0x17, &execute).await;
    match client.answer().await {
        Answer::Rows { columns, rows, .. } => {
            let kinds: Vec<u8> = columns.iter().map(|c| c.1).collect();
            assert_eq!(kinds, [3, 5, 253, 12, 8]);
            let mut row = vec![0x00, 0b0100_0000]; // column 4 is NULL: bit 4 + 2
            row.extend((-7i32).to_le_bytes());
            row.extend(2.5f64.to_le_bytes());
            row.extend([2, b'h', b'i']);
            row.extend([7, 0xE8, 0x07, 2, 29, 13, 5, 9]);
            assert_eq!(rows, vec![row]);
        }
        other => panic!("{other:?}"),
    }
    // A value that does not fit its type: an ERR, and the connection goes on.
    client.command(0x16, b"BROKEN").await;
    let ok = client.read().await;
    let broken = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    client.read().await; // its column
    let mut execute = broken.to_le_bytes().to_vec();
    execute.push(0);
    execute.extend(1u32.to_le_bytes());
    client.command(0x17, &execute).await;
    assert_eq!(err_code(&client.answer().await), 1105);
    // A statement the executor refuses at prepare.
    client.command(0x16, b"NONSENSE ?").await;
    assert_eq!(err_code(&client.answer().await), 1064);
    // Closed statements are unknown; COM_STMT_CLOSE has no answer.
    client.command(0x19, &id.to_le_bytes()).await;
    let mut execute = id.to_le_bytes().to_vec();
    execute.extend([0, 1, 0, 0, 0]);
    client.command(0x17, &execute).await;
    assert_eq!(err_code(&client.answer().await), 1243);
    // Text queries still work alongside.
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_malformed_handshake_is_refused_and_the_server_goes_on() {
    let server = Server::default().await;
    // Garbage after the greeting.
    let mut client = Client::connect(server.addr).await;
    client.read().await;
    client.write(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]).await;
    let refused = client.read().await;
    assert_eq!(
        err_packet_code(&refused),
        1835,
        "{}",
        err_packet_message(&refused)
    );
    client.expect_closed().await;
    // An SSLRequest: told to connect without TLS.
    let mut client = Client::connect(server.addr).await;
    client.read().await;
    let mut ssl = (client_capabilities() | CapabilityFlags::CLIENT_SSL)
        .bits()
        .to_le_bytes()
        .to_vec();
    ssl.extend([0u8; 28]);
    client.write(&ssl).await;
    let refused = client.read().await;
    assert_eq!(err_packet_code(&refused), 1043);
    assert!(err_packet_message(&refused).contains("--skip-ssl"));
    // Bytes that are not even a packet: the client gives up mid-header.
    let mut client = Client::connect(server.addr).await;
    client.read().await;
    client.write_raw(&[5, 0]).await;
    drop(client);
    // Random handshake responses, seeded.
    let mut state = 0x1234_5678_9ABC_DEF1u64;
    for _ in 0..20 {
        let mut client = Client::connect(server.addr).await;
        client.read().await;
        let len = 1 + (state % 80) as usize;
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        client.write(&garbage).await;
        // Refused (or, by luck, a login attempt refused): an ERR either way.
        let answer = client.try_read().await;
        if let Some(packet) = answer {
            assert!(matches!(packet[0], 0xFF | 0xFE), "{packet:?}");
        }
    }
    let mut client = Client::root(server.addr).await;
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn an_oversized_packet_gets_1153_and_a_close() {
    let config = ServerConfig {
        packet_bytes_max: 1024,
        ..test_config()
    };
    let server = Server::start(config).await;
    let mut client = Client::root(server.addr).await;
    // At the limit: fine.
    let mut at_limit = b"ECHO ".to_vec();
    at_limit.resize(1023, b'x');
    assert_eq!(
        client
            .rows(std::str::from_utf8(&at_limit).expect("ascii"))
            .await
            .len(),
        1
    );
    // One byte past it: refused from the header alone.
    client.seq = 0;
    client.write_raw(&[0x01, 0x04, 0x00, 0x00, 0x03]).await;
    client.seq = 1;
    let refused = client.read().await;
    assert_eq!(err_packet_code(&refused), 1153);
    assert_eq!(&refused[3..9], b"#08S01");
    assert_eq!(
        err_packet_message(&refused),
        "Got a packet bigger than 'max_allowed_packet' bytes"
    );
    client.expect_closed().await;
    server.wait_for_closes(1).await;
    let mut client = Client::root(server.addr).await;
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn malformed_commands_get_an_error_and_a_close() {
    let server = Server::default().await;
    // A packet out of sequence.
    let mut client = Client::root(server.addr).await;
    client.seq = 3;
    client.write(&[0x0E]).await;
    client.seq = 4;
    assert_eq!(err_packet_code(&client.read().await), 1156);
    client.expect_closed().await;
    // An empty command packet.
    let mut client = Client::root(server.addr).await;
    client.command_raw_empty().await;
    assert_eq!(err_packet_code(&client.read().await), 1835);
    client.expect_closed().await;
    // A truncated COM_STMT_EXECUTE.
    let mut client = Client::root(server.addr).await;
    client.command(0x16, b"ECHO ?").await;
    for _ in 0..3 {
        client.read().await; // the OK, the parameter, the column
    }
    client
        .command(0x17, &[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8])
        .await;
    assert_eq!(err_packet_code(&client.read().await), 1835);
    client.expect_closed().await;
    server.wait_for_closes(3).await;
    server.stop().await;
}

impl Client {
    async fn command_raw_empty(&mut self) {
        self.seq = 0;
        self.write(&[]).await;
    }
}

#[tokio::test]
async fn a_client_that_vanishes_mid_query_has_its_handler_closed() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x03, b"SLEEP").await;
    drop(client);
    server.wait_for_closes(1).await;
    let mut client = Client::root(server.addr).await;
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_result_set_streams_its_rows_before_the_statement_ends() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    // The handler stops after 300 rows (300 KB) until this client has read
    // a row: were the result held until the statement ends, no row would
    // come and the read would time out.
    client.command(0x03, b"STREAM 1000 WAIT").await;
    let head = client.read().await;
    assert_eq!(head, [2], "two columns");
    client.read().await;
    client.read().await;
    let first = client.read().await;
    assert_eq!(text_values(&first)[0].as_deref(), Some("0"));
    server.journal.go.notify_one();
    let mut rows = 1;
    loop {
        let packet = client.read().await;
        if packet[0] == 0xFE && packet.len() < 9 {
            break;
        }
        let values = text_values(&packet);
        assert_eq!(values[0].as_deref(), Some(rows.to_string().as_str()));
        assert_eq!(values[1].as_deref(), Some(streamed_text().as_str()));
        rows += 1;
    }
    assert_eq!(rows, 1000);
    // The connection goes on.
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn an_error_mid_stream_ends_the_result_set_and_the_connection_goes_on() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    client.command(0x03, b"STREAM 100 FAIL").await;
    assert_eq!(client.read().await, [2]);
    client.read().await;
    client.read().await;
    let mut rows = 0;
    let error = loop {
        let packet = client.read().await;
        assert_ne!(
            packet[0], 0xFE,
            "the result set ends with the error, not an EOF"
        );
        if packet[0] == 0xFF {
            break packet;
        }
        rows += 1;
    };
    assert_eq!(rows, 99);
    assert_eq!(err_packet_code(&error), 1317);
    assert_eq!(client.rows("SELECT 2").await, vec![vec![Some("2".into())]]);
    server.stop().await;
}

#[tokio::test]
async fn a_client_gone_mid_stream_stops_the_statement() {
    let server = Server::default().await;
    let mut client = Client::root(server.addr).await;
    // Far more than the socket buffers hold: the writes fail once the
    // client is gone, and the statement stops there instead of running on.
    client.command(0x03, b"STREAM 10000000").await;
    client.read().await;
    drop(client);
    server.wait_for_closes(1).await;
    let stopped_at = server
        .journal
        .streamed_before_gone
        .lock()
        .expect("lock")
        .expect("the statement learned that its client was gone");
    assert!(stopped_at < 10_000_000, "{stopped_at}");
    let mut client = Client::root(server.addr).await;
    assert_eq!(client.rows("SELECT 1").await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn past_connections_max_a_client_gets_1040() {
    let config = ServerConfig {
        connections_max: 1,
        ..test_config()
    };
    let server = Server::start(config).await;
    let mut first = Client::root(server.addr).await;
    let mut second = Client::connect(server.addr).await;
    let refused = second.read().await;
    // Before the handshake: no SQLSTATE.
    assert_eq!(refused, {
        let mut expected = vec![0xFF, 0x10, 0x04];
        expected.extend(b"Too many connections");
        expected
    });
    second.expect_closed().await;
    assert_eq!(first.rows("SELECT 1").await.len(), 1);
    first.command(0x01, b"").await;
    first.expect_closed().await;
    server.wait_for_closes(1).await;
    // The slot is free again (the permit goes with the task, a moment later).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut client = Client::connect(server.addr).await;
        let greeting = client.read().await;
        if greeting[0] == 10 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot never freed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn timeouts_close_silent_clients() {
    let config = ServerConfig {
        // Long enough for a login on a loaded machine, short for a test.
        connect_timeout: Duration::from_millis(1000),
        wait_timeout: Duration::from_millis(300),
        ..test_config()
    };
    let server = Server::start(config).await;
    // Connected, never logs in.
    let mut client = Client::connect(server.addr).await;
    client.read().await;
    let refused = client.read().await;
    assert_eq!(err_packet_code(&refused), 1159);
    client.expect_closed().await;
    // Logged in, then idle.
    let mut client = Client::root(server.addr).await;
    client.seq = 0;
    let refused = client.read().await;
    assert_eq!(err_packet_code(&refused), 4031);
    client.expect_closed().await;
    server.wait_for_closes(1).await;
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_returns() {
    let server = Server::default().await;
    let mut idle = Client::root(server.addr).await;
    let mut busy = Client::root(server.addr).await;
    busy.command(0x03, b"SLEEP").await;
    // Stop only once the statement runs (it takes 300 ms).
    let started = timeout(WAIT, async {
        while !server
            .journal
            .queries
            .lock()
            .expect("lock")
            .contains(&"SLEEP".to_string())
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(started.is_ok(), "the statement never started");
    let journal = server.journal.clone();
    server.stop().await;
    // The running statement finished and was answered before the close.
    assert_eq!(busy.read().await[0], 0x00);
    busy.seq = 0;
    assert_eq!(err_packet_code(&busy.read().await), 1053);
    busy.expect_closed().await;
    idle.seq = 0;
    let told = idle.read().await;
    assert_eq!(err_packet_code(&told), 1053);
    assert_eq!(err_packet_message(&told), "Server shutdown in progress");
    idle.expect_closed().await;
    assert_eq!(journal.closes.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_invalid_config_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let factory = Arc::new(FakeFactory {
        journal: Arc::default(),
    });
    let config = ServerConfig {
        packet_bytes_max: 10,
        ..ServerConfig::default()
    };
    let error = shoal_sql::protocol::serve(listener, factory, config)
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("packet_bytes_max"), "{error}");
}

// ---------------------------------------------------------------------
// A real client.

/// Runs the `mariadb` command-line client against the server.
async fn mariadb(addr: SocketAddr, args: &[&str]) -> Option<std::process::Output> {
    let binary = ["/usr/bin/mariadb", "/usr/local/bin/mariadb"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())?;
    let mut command = std::process::Command::new(binary);
    command.args([
        "--no-defaults",
        "--protocol=tcp",
        "-h",
        "127.0.0.1",
        "-P",
        &addr.port().to_string(),
        "--skip-ssl",
        "--connect-timeout=5",
    ]);
    command.args(args);
    let run = tokio::task::spawn_blocking(move || command.output());
    let output = timeout(Duration::from_secs(30), run)
        .await
        .expect("mariadb finished in time")
        .expect("joined")
        .expect("mariadb ran");
    Some(output)
}

#[tokio::test]
async fn the_mariadb_client_runs_queries() {
    let server = Server::default().await;
    let Some(output) = mariadb(server.addr, &["-u", "root", "-e", "SELECT 1; SELECT 2"]).await
    else {
        println!("note: the mariadb client is not installed; skipping (apt-get install -y mariadb-client)");
        return;
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "mariadb failed: {stderr}");
    assert_eq!(stdout, "1\n1\n2\n2\n", "stderr: {stderr}");

    // With a password, a database, an INSERT's OK and a statement error.
    let output = mariadb(
        server.addr,
        &[
            "-u",
            "app",
            "-psecret",
            "-D",
            "shop",
            "-e",
            "INSERT; SELECT 1; NONSENSE",
        ],
    )
    .await
    .expect("installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert_eq!(stdout, "1\n1\n", "stderr: {stderr}");
    assert!(stderr.contains("ERROR 1064 (42000)"), "{stderr}");
    assert!(server
        .journal
        .databases
        .lock()
        .expect("lock")
        .contains(&"shop".to_string()));

    // A client whose own default plugin is caching_sha2_password.
    let output = mariadb(
        server.addr,
        &[
            "-u",
            "app",
            "-psecret",
            "--default-auth=caching_sha2_password",
            "-e",
            "SELECT 2",
        ],
    )
    .await
    .expect("installed");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "2\n2\n",
        "stderr: {stderr}"
    );

    let output = mariadb(server.addr, &["-u", "app", "-pwrong", "-e", "SELECT 1"])
        .await
        .expect("installed");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "ERROR 1045 (28000): Access denied for user 'app'@'127.0.0.1' (using password: YES)"
        ),
        "{stderr}"
    );
    server.stop().await;
}
