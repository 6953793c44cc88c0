//! [`Cluster`]: one API node's membership in a cluster. It registers with
//! mgmd (which hands out the node id and knows the data nodes and the
//! schema), opens one [`Connection`] per started data node (and, in the
//! background, again to a data node that restarted), caches table
//! definitions, and hands out transactions.
//!
//! Invariants:
//! - Transaction ids are unique per `Cluster` (a counter shared by its
//!   connections): the data node keys transactions by (connection, id),
//!   and a node taking over a failed coordinator names them by id alone.
//! - The table cache only holds definitions mgmd returned; a transaction
//!   that hears "no such table" or "stale schema version" evicts the
//!   table's entry, so the next `table()` fetches the current one.

use crate::conn::Connection;
use crate::error::bad_request;
use crate::outcomes::Shared;
use crate::park_spin::ParkSpin;
use crate::record::Table;
use crate::transaction::Transaction;
use crate::unique::{self, UniqueIndex};
use shoal_mgmd::{ApiSession, MgmClient, NodeState};
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableDef, TableId, UniqueIndexDef};
use shoal_wire::{Hello, NodeType};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

/// How often the background task looks for data nodes to reconnect to.
const RECONNECT_EVERY: Duration = Duration::from_millis(250);

/// Settings of a [`Cluster`] connection.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// How long connecting and handshaking with one data node may take.
    pub connect_timeout: Duration,
    /// A request the data node has not answered after this long fails
    /// with `ReceiveTimeout` (4008). `None`: wait for ever. Keep it well
    /// above the cluster's deadlock timeout: a lock wait is not a failure.
    pub receive_timeout: Option<Duration>,
    /// A commit whose data node failed before answering waits this long
    /// for the node taking over to report its outcome; then it fails with
    /// `CommitOutcomeUnknown` (4012). Keep it above the cluster's failure
    /// detection time (four heartbeat intervals) plus the takeover.
    pub takeover_wait: Duration,
    /// Values an AUTO_INCREMENT fetch takes at least (NDB's
    /// `ndb_autoincrement_prefetch_sz`; 0 counts as 1;
    /// `crate::auto_increment`).
    pub auto_increment_prefetch: u64,
    /// Gather the requests of every task that is ready before writing to
    /// a data node, so many small requests leave in one send. It costs an
    /// extra turn of the scheduler per write: worth it for many tasks
    /// each sending one request (the SQL node's sessions: a third more
    /// point selects at 8 clients), not for a few sending large batches
    /// (flexasynch reads about 10 % slower with it).
    pub coalesce_sends: bool,
    /// Poll this cluster's data-node sockets for a while before the
    /// runtime's thread sleeps (the runtime must be built with the same
    /// spin's [`ParkSpin::hook`]). Cuts the latency of a request that
    /// waits alone by the wake-up of a sleeping thread, at the cost of a
    /// busy core; `None` (the default) never spins. Measured with a
    /// `current_thread` runtime (see [`crate::park_spin`]).
    pub park_spin: Option<ParkSpin>,
    /// The data node this client prefers as a transaction's coordinator
    /// (NDB's `ndb_data_node_neighbour`): a transaction whose first
    /// operation is on a READ_BACKUP table with a replica on that node
    /// (a read or a write: the coordinator sends writes to the primary
    /// either way), and any transaction or scan with no key to hint, start
    /// there while it is up. Set it to the data node on the client's own
    /// host: committed reads and scans of READ_BACKUP tables are then
    /// served by its replicas, for the fragments it holds and has
    /// finished copying (all of them in a cluster of one node group),
    /// unless the transaction already locked or wrote the row's fragment.
    /// `None` (the default): the primary replica's node, and round-robin
    /// without a key.
    pub neighbour: Option<u16>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            connect_timeout: Duration::from_secs(10),
            receive_timeout: Some(Duration::from_secs(60)),
            takeover_wait: Duration::from_secs(30),
            auto_increment_prefetch: crate::auto_increment::PREFETCH_DEFAULT,
            coalesce_sends: false,
            park_spin: None,
            neighbour: None,
        }
    }
}

struct Inner {
    node_id: u16,
    cluster_id: u64,
    mgmd_addr: String,
    opts: ClusterOptions,
    /// mgmd's session is one TCP stream with request/reply: one caller at
    /// a time. Replaced by a fresh session if mgmd restarts.
    mgm: tokio::sync::Mutex<ApiSession>,
    /// One per data node, in node id order (a dead one stays until a new
    /// connection to that node replaces it).
    conns: RwLock<Vec<Arc<Connection>>>,
    /// Every configured data node.
    data_nodes: Vec<u16>,
    next_conn: AtomicUsize,
    tables: Mutex<HashMap<String, Table>>,
    shared: Arc<Shared>,
    /// `close` was called: no reconnecting.
    closed: AtomicBool,
    counters: crate::auto_increment::Counters,
}

impl Inner {
    fn conns(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Connection>>> {
        self.conns.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for c in self.conns().iter() {
            c.fail("the cluster handle was dropped", true);
        }
    }
}

/// A connection to a Shoal cluster. Cheap to clone; clones share the
/// connections, the table cache and the transaction id counter.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.inner.node_id)
            .field("mgmd", &self.inner.mgmd_addr)
            .field(
                "data_nodes",
                &self
                    .inner
                    .conns()
                    .iter()
                    .map(|c| c.node_id())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Runs one mgmd request (`$call`, using `$s: &mut ApiSession`); if mgmd's
/// session broke, registers again once and retries.
macro_rules! with_mgm {
    ($self:ident, |$s:ident| $call:expr) => {{
        let mut guard = $self.inner.mgm.lock().await;
        let first = {
            let $s = &mut *guard;
            $call.await
        };
        match first {
            Err(e) if e.code == ErrorCode::MgmdFailure => {
                $self.reconnect_mgm(&mut guard, &e).await?;
                let $s = &mut *guard;
                $call.await
            }
            other => other,
        }
    }};
}

fn failure(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::ClusterFailure, detail)
}

impl Cluster {
    /// Connects through mgmd at `mgmd_addr` ("host:port") with default
    /// options. Needs a tokio runtime with I/O and time enabled.
    pub async fn connect(mgmd_addr: &str) -> Result<Cluster, ShoalError> {
        Cluster::connect_with(mgmd_addr, ClusterOptions::default()).await
    }

    pub async fn connect_with(
        mgmd_addr: &str,
        opts: ClusterOptions,
    ) -> Result<Cluster, ShoalError> {
        let mut session = MgmClient::connect(mgmd_addr).await?.register_api().await?;
        let node_id = session.node_id();
        let cluster_id = session.cluster_id();
        let nodes = session.data_nodes().await?;
        let data_nodes: Vec<u16> = nodes
            .iter()
            .filter(|n| n.kind == "datanode")
            .map(|n| n.node_id)
            .collect();
        if let Some(n) = opts.neighbour.filter(|n| !data_nodes.contains(n)) {
            let ids: Vec<String> = data_nodes.iter().map(u16::to_string).collect();
            return Err(bad_request(format!(
                "neighbour node {n} is not a data node of this cluster (its data nodes: {}); name one of them",
                ids.join(", ")
            )));
        }
        let shared = Shared::new(opts.takeover_wait);
        let mut conns = Vec::new();
        let mut down = Vec::new();
        for n in nodes.iter().filter(|n| n.kind == "datanode") {
            if n.state != NodeState::Started {
                down.push(format!("node {} is {:?}", n.node_id, n.state));
                continue;
            }
            let port = n.status.as_ref().map_or(n.port, |s| s.listen_port);
            let addr = format!("{}:{port}", n.host);
            let hello = Hello::new(NodeType::Api, cluster_id, node_id, n.node_id);
            match Connection::open(&addr, &hello, &opts, shared.clone()).await {
                Ok(c) => conns.push(c),
                // It may have failed since mgmd last heard from it; the
                // others serve, and this one is tried again later.
                Err(e) => down.push(format!("node {}: {e}", n.node_id)),
            }
        }
        if conns.is_empty() {
            return Err(failure(format!(
                "no data node is started ({}); check `shoal mgm --connect {mgmd_addr} -e show`",
                if down.is_empty() {
                    "none configured".to_string()
                } else {
                    down.join(", ")
                }
            )));
        }
        let inner = Arc::new(Inner {
            node_id,
            cluster_id,
            mgmd_addr: mgmd_addr.to_string(),
            opts,
            mgm: tokio::sync::Mutex::new(session),
            conns: RwLock::new(conns),
            data_nodes,
            next_conn: AtomicUsize::new(0),
            tables: Mutex::new(HashMap::new()),
            shared,
            closed: AtomicBool::new(false),
            counters: Default::default(),
        });
        tokio::spawn(keep_connected(Arc::downgrade(&inner)));
        Ok(Cluster { inner })
    }

    /// Opens a connection to every started data node that has no live
    /// one (it restarted, or was down when the cluster connected).
    async fn reconnect(&self) -> Result<(), ShoalError> {
        let missing: Vec<u16> = {
            let conns = self.inner.conns();
            self.inner
                .data_nodes
                .iter()
                .copied()
                .filter(|&n| !conns.iter().any(|c| c.node_id() == n && c.is_alive()))
                .collect()
        };
        if missing.is_empty() || self.inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let nodes = with_mgm!(self, |s| s.data_nodes())?;
        for n in nodes
            .iter()
            .filter(|n| missing.contains(&n.node_id) && n.state == NodeState::Started)
        {
            let port = n.status.as_ref().map_or(n.port, |s| s.listen_port);
            let addr = format!("{}:{port}", n.host);
            let hello = Hello::new(
                NodeType::Api,
                self.inner.cluster_id,
                self.inner.node_id,
                n.node_id,
            );
            match Connection::open(&addr, &hello, &self.inner.opts, self.inner.shared.clone()).await
            {
                Ok(c) if self.inner.closed.load(Ordering::Acquire) => {
                    c.fail("the cluster handle was closed", true);
                }
                Ok(c) => {
                    tracing::info!(
                        "connected to data node {} (start {})",
                        n.node_id,
                        c.incarnation()
                    );
                    let mut conns = self.inner.conns.write().unwrap_or_else(|e| e.into_inner());
                    conns.retain(|old| old.node_id() != n.node_id);
                    conns.push(c);
                    conns.sort_by_key(|c| c.node_id());
                }
                Err(e) => tracing::debug!("reconnecting to data node {}: {e}", n.node_id),
            }
        }
        Ok(())
    }

    /// The API node id mgmd gave this connection.
    pub fn node_id(&self) -> u16 {
        self.inner.node_id
    }

    /// Registers again with mgmd (after its session broke: mgmd restarted).
    async fn reconnect_mgm(
        &self,
        session: &mut ApiSession,
        why: &ShoalError,
    ) -> Result<(), ShoalError> {
        tracing::info!("mgmd session lost ({why}); registering again");
        *session = MgmClient::connect(&self.inner.mgmd_addr)
            .await?
            .register_api()
            .await?;
        Ok(())
    }

    /// Creates a table (through mgmd, which assigns its id and version and
    /// waits until every data node has it).
    pub async fn create_table(&self, def: TableDef) -> Result<Table, ShoalError> {
        crate::auto_increment::check_new_table(&def)?;
        self.create_table_any(def).await
    }

    /// [`Cluster::create_table`] of any name (the system table's too).
    pub(crate) async fn create_table_any(&self, def: TableDef) -> Result<Table, ShoalError> {
        def.validate()?;
        let created = with_mgm!(self, |s| s.create_table(def.clone()))?;
        let table = Table::new(created);
        self.cache().insert(table.name().to_string(), table.clone());
        Ok(table)
    }

    /// Drops a table; its rows are gone and operations on it fail with
    /// `NoSuchTable` (723).
    pub async fn drop_table(&self, name: &str) -> Result<(), ShoalError> {
        crate::auto_increment::refuse_reserved(name)?;
        let dropping = self.table_any(name).await.ok();
        self.forget_with_hidden(name);
        with_mgm!(self, |s| s.drop_table(name))?;
        if let Some(t) = dropping {
            self.forget_auto_increment(t.def()).await;
        }
        Ok(())
    }

    /// Forgets `name` and the hidden tables of its unique indexes.
    fn forget_with_hidden(&self, name: &str) {
        let prefix = UniqueIndexDef::table_name(name, "");
        self.cache()
            .retain(|t, _| t != name && !t.starts_with(&prefix));
    }

    /// Creates SQL database `name`: tables named `name.table` may then be
    /// created. Errors: `TableExists` (721) if it exists or is reserved
    /// (`shoal`, `information_schema`, `mysql`, ...), `BadTableDefinition`
    /// (740) for a bad name.
    pub async fn create_database(&self, name: &str) -> Result<(), ShoalError> {
        shoal_types::schema::check_database_name(name)?;
        with_mgm!(self, |s| s.create_database(name))
    }

    /// Drops SQL database `name` with every table named `name.*` (and
    /// their unique indexes); returns the names of the tables dropped.
    /// `NoSuchTable` (723) if the database does not exist.
    pub async fn drop_database(&self, name: &str) -> Result<Vec<String>, ShoalError> {
        let prefix = format!("{name}.");
        self.cache().retain(|t, _| !t.starts_with(&prefix));
        let dropped = with_mgm!(self, |s| s.drop_database(name));
        // Tables created in the database by others meanwhile.
        self.cache().retain(|t, _| !t.starts_with(&prefix));
        let dropped = dropped?;
        for t in &dropped {
            self.forget_auto_increment(t).await;
        }
        Ok(dropped.into_iter().map(|t| t.name).collect())
    }

    /// Every SQL database, sorted by name (not `shoal`, the database of
    /// the tables whose names have none).
    pub async fn databases(&self) -> Result<Vec<String>, ShoalError> {
        with_mgm!(self, |s| s.list_databases())
    }

    /// One request about SQL accounts (`crate::users`).
    pub(crate) async fn users_request(
        &self,
        request: shoal_mgmd::proto::UsersRequest,
    ) -> Result<Vec<shoal_mgmd::proto::UserAccount>, ShoalError> {
        with_mgm!(self, |s| s.users(request.clone()))
    }

    /// Every table clients see (not the hidden tables of unique
    /// indexes, nor the AUTO_INCREMENT counters'), from mgmd, by id.
    pub async fn tables(&self) -> Result<Vec<TableDef>, ShoalError> {
        let mut tables = with_mgm!(self, |s| s.list_tables())?;
        tables.retain(|t| t.name != crate::auto_increment::SEQUENCE_TABLE);
        Ok(tables)
    }

    /// Adds an ordered index `index` on `columns` (in key order) to
    /// table `table`, which may hold rows and take writes meanwhile:
    /// every data node builds it, and the call returns once all have.
    /// Returns the table with the index (the cache holds it too).
    pub async fn create_index(
        &self,
        table: &str,
        index: &str,
        columns: &[&str],
    ) -> Result<Table, ShoalError> {
        let current = self.table(table).await?;
        // Checked here first, for an error naming the column.
        let def = current.def().clone().with_index(index, columns)?;
        let wanted = def.indexes.last().expect("just added").clone();
        self.cache().remove(table);
        let changed = with_mgm!(self, |s| s.create_index(table, wanted.clone()))?;
        let t = Table::new(changed);
        self.cache().insert(table.to_string(), t.clone());
        Ok(t)
    }

    /// Drops index `index` of table `table`: an ordered one (scans of it
    /// fail from then on), or a unique one (writes stop keeping it, its
    /// values may repeat, and operations through it fail). Returns the
    /// table without it.
    pub async fn drop_index(&self, table: &str, index: &str) -> Result<Table, ShoalError> {
        self.drop_index_if(table, index, None).await
    }

    /// [`Cluster::drop_index`], only if `index` is the unique index whose
    /// hidden table is `index_table` (given).
    pub(crate) async fn drop_index_if(
        &self,
        table: &str,
        index: &str,
        index_table: Option<shoal_types::TableId>,
    ) -> Result<Table, ShoalError> {
        crate::auto_increment::refuse_reserved(table)?;
        self.cache().remove(table);
        self.cache()
            .remove(&UniqueIndexDef::table_name(table, index));
        let changed = with_mgm!(self, |s| s.drop_index_if(table, index, index_table))?;
        let t = Table::new(changed);
        self.cache().insert(table.to_string(), t.clone());
        Ok(t)
    }

    /// Adds unique hash index `index` on `columns` (in key order) to table
    /// `table`, which may hold rows and take writes meanwhile: mgmd
    /// creates the index (every write keeps it from then on), then this
    /// client fills it from the table's rows, a batch of
    /// [`unique::BUILD_BATCH_ROWS`] rows per transaction (each row locked
    /// shared while its entry goes in), and tells mgmd it is built. Rows
    /// with a NULL in an index column get no entry. If two rows hold the
    /// same values the build fails with 630 (`TupleAlreadyExists`) naming
    /// both rows and the values, and the index is dropped; so it is after
    /// any other failure, and if this future is dropped before the end.
    /// Returns the table with the index (the cache holds it too).
    pub async fn create_unique_index(
        &self,
        table: &str,
        index: &str,
        columns: &[&str],
    ) -> Result<Table, ShoalError> {
        self.invalidate_table(table);
        let current = self.table(table).await?;
        // Checked here first, for an error naming the column.
        let def = current.def().clone().with_unique_index(index, columns)?;
        let wanted = def.unique_indexes.last().expect("just added").clone();
        self.cache().remove(table);
        let created = with_mgm!(self, |s| s.create_unique_index(table, wanted.clone()))?;
        // The index is this one only while its hidden table is: a namesake
        // created after it was dropped (its builder gone) is left alone.
        let index_table = created
            .unique_index(index)
            .map(|u| u.table)
            .ok_or_else(|| failure(format!("mgmd created unique index {index:?} of table {table:?} but its answer lacks it")))?;
        let guard = unique::AbandonGuard::new(self, table, index, index_table);
        let started = std::time::Instant::now();
        let built = async {
            let base = Table::new(created);
            let hidden_name = UniqueIndexDef::table_name(table, index);
            self.invalidate_table(&hidden_name);
            let hidden = self.table(&hidden_name).await?;
            let handle = UniqueIndex::new(base, hidden, index)?;
            let entries = unique::build(self, &handle).await?;
            let def = with_mgm!(self, |s| s.unique_index_built(table, index, index_table))?;
            Ok::<_, ShoalError>((def, entries))
        }
        .await;
        guard.disarm();
        match built {
            Ok((def, entries)) => {
                tracing::info!(
                    "unique index {index:?} of table {table:?} built: {entries} entries in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                let t = Table::new(def);
                self.cache().insert(table.to_string(), t.clone());
                Ok(t)
            }
            Err(e) => {
                tracing::warn!(
                    "unique index {index:?} of table {table:?} not built ({e}); dropping it"
                );
                if let Err(de) = self.drop_index_if(table, index, Some(index_table)).await {
                    tracing::warn!("dropping unique index {index:?} of table {table:?} after its failed build: {de}");
                }
                Err(e)
            }
        }
    }

    /// Unique index `index` of table `table`, for operations by unique
    /// key ([`Transaction::read_unique`] ...). Errors: no such table
    /// (723) or index (4004); an index still being built (5005,
    /// temporary: its build is under way, try again after it).
    pub async fn unique_index(&self, table: &str, index: &str) -> Result<UniqueIndex, ShoalError> {
        let mut base = self.table(table).await?;
        if base.def().unique_index(index).is_none_or(|u| u.building) {
            // The cache may be older than the index or its build.
            self.invalidate_table(table);
            base = self.table(table).await?;
        }
        let Some(def) = base.def().unique_index(index) else {
            return Err(unique::no_such_index(&base, index));
        };
        if def.building {
            self.invalidate_table(table);
            return Err(ShoalError::with_detail(
                ErrorCode::NodeNotReady,
                format!(
                    "unique index {index:?} of table {table:?} is still being built (Cluster::create_unique_index); try again once its build is done"
                ),
            ));
        }
        let hidden_name = UniqueIndexDef::table_name(table, index);
        let mut hidden = self.table(&hidden_name).await?;
        if hidden.id() != def.table {
            // A hidden table of an index of the same name, dropped since.
            self.invalidate_table(&hidden_name);
            hidden = self.table(&hidden_name).await?;
        }
        UniqueIndex::new(base, hidden, index)
    }

    /// The table called `name`, from the cache or else from mgmd.
    pub async fn table(&self, name: &str) -> Result<Table, ShoalError> {
        crate::auto_increment::refuse_reserved(name)?;
        self.table_any(name).await
    }

    /// [`Cluster::table`] of any name (the system table's too).
    pub(crate) async fn table_any(&self, name: &str) -> Result<Table, ShoalError> {
        if let Some(t) = self.cache().get(name) {
            return Ok(t.clone());
        }
        let def = with_mgm!(self, |s| s.get_table(name))?;
        // mgmd validated it; a definition that does not hold up here is
        // refused rather than trusted.
        def.validate().map_err(|e| {
            failure(format!(
                "mgmd served an invalid definition of table {name:?}: {e}"
            ))
        })?;
        let table = Table::new(def);
        self.cache().insert(name.to_string(), table.clone());
        Ok(table)
    }

    /// Every table's definition, from mgmd, with the hidden tables of
    /// their unique indexes (which mgmd's list leaves out).
    pub(crate) async fn table_defs(&self) -> Result<Vec<TableDef>, ShoalError> {
        let mut defs = with_mgm!(self, |s| s.list_tables())?;
        let hidden: Vec<String> = defs
            .iter()
            .flat_map(|d| {
                d.unique_indexes
                    .iter()
                    .map(|u| UniqueIndexDef::table_name(&d.name, &u.name))
            })
            .collect();
        for name in hidden {
            match with_mgm!(self, |s| s.get_table(&name)) {
                Ok(def) => defs.push(def),
                // Dropped since the list.
                Err(e) if e.code == ErrorCode::NoSuchTable => {}
                Err(e) => return Err(e),
            }
        }
        Ok(defs)
    }

    /// Forgets the cached definition of `name` (after a schema change made
    /// by another client), so the next [`Cluster::table`] asks mgmd.
    pub fn invalidate_table(&self, name: &str) {
        self.cache().remove(name);
    }

    /// Checks every cached table against mgmd's schema and forgets those
    /// another client has dropped, replaced or changed since they were
    /// cached; returns how many it forgot. A data node refuses an
    /// operation on a stale definition (241), but what a caller decides
    /// from the definition alone (that a column does not exist, say) it
    /// should check here before reporting it. One request to mgmd: a
    /// unique index's hidden table is checked through its base table's
    /// definition, which names it.
    pub async fn forget_stale_tables(&self) -> Result<usize, ShoalError> {
        let defs = with_mgm!(self, |s| s.list_tables())?;
        // Hidden tables never change in place: their id is enough.
        let mut current: HashMap<String, (TableId, Option<SchemaVersion>)> = HashMap::new();
        for d in &defs {
            current.insert(d.name.clone(), (d.id, Some(d.version)));
            for u in &d.unique_indexes {
                current.insert(
                    UniqueIndexDef::table_name(&d.name, &u.name),
                    (u.table, None),
                );
            }
        }
        let mut cache = self.cache();
        let before = cache.len();
        cache.retain(|name, t| match current.get(name) {
            Some((id, Some(version))) => *id == t.id() && *version == t.def().version,
            Some((id, None)) => *id == t.id(),
            None => false,
        });
        Ok(before - cache.len())
    }

    /// Starts a transaction. Nothing is sent until its first `execute`.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// Closes every data node connection (after sending what is queued).
    /// Transactions still waiting fail: `CommitOutcomeUnknown` for a
    /// commit, `NodeFailureAbort` otherwise.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        let conns: Vec<Arc<Connection>> = self.inner.conns().clone();
        for c in &conns {
            c.fail("closed by the application", true);
        }
        for c in &conns {
            c.join_writer(Duration::from_secs(5)).await;
        }
    }

    pub(crate) fn counters(&self) -> &crate::auto_increment::Counters {
        &self.inner.counters
    }

    pub(crate) fn auto_increment_prefetch(&self) -> u64 {
        self.inner.opts.auto_increment_prefetch.max(1)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Table>> {
        self.inner.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection to data node `node`, if it is up: a transaction
    /// whose first key lives there starts its coordinator there (one hop
    /// less for its first operations, as with NDB's distribution-aware
    /// `startTransaction`).
    pub(crate) fn connection_to(&self, node: u16) -> Option<Arc<Connection>> {
        self.inner
            .conns()
            .iter()
            .find(|c| c.node_id() == node && c.is_alive())
            .cloned()
    }

    /// Where a transaction whose first operation is on `key` of `table`
    /// starts: the neighbour if the table reads from backups and the
    /// neighbour holds the row's fragment, else the first live replica in
    /// preferred order (the primary); `None` if the table's distribution
    /// is unknown or no replica is connected.
    pub(crate) fn coordinator_for(&self, table: &Table, key: &[u8]) -> Option<Arc<Connection>> {
        let replicas = table.replica_nodes(key)?;
        if let Some(n) = self.inner.opts.neighbour {
            if table.def().options.read_backup && replicas.contains(&n) {
                if let Some(c) = self.connection_to(n) {
                    return Some(c);
                }
            }
        }
        replicas.iter().find_map(|&n| self.connection_to(n))
    }

    /// A live connection for a transaction or scan without a key hint: the
    /// neighbour if it is up, else round-robin.
    pub(crate) fn pick_connection(&self) -> Result<Arc<Connection>, ShoalError> {
        if let Some(c) = self
            .inner
            .opts
            .neighbour
            .and_then(|n| self.connection_to(n))
        {
            return Ok(c);
        }
        let conns = self.inner.conns();
        let start = self.inner.next_conn.fetch_add(1, Ordering::Relaxed);
        (0..conns.len())
            .map(|i| &conns[(start + i) % conns.len()])
            .find(|c| c.is_alive())
            .cloned()
            .ok_or_else(|| {
                failure(format!(
                    "every data node connection is down; check `shoal mgm --connect {} -e show` and reconnect",
                    self.inner.mgmd_addr
                ))
            })
    }
}

/// The background task that reconnects to data nodes as they come back;
/// it ends with the last handle to the cluster.
async fn keep_connected(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(RECONNECT_EVERY).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let cluster = Cluster { inner };
        if let Err(e) = cluster.reconnect().await {
            tracing::debug!("looking for data nodes to reconnect to: {e}");
        }
    }
}
