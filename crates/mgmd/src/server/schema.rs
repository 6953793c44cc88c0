//! The schema: creating and dropping tables (on disk first, then pushed
//! to every connected data node and acknowledged), and looking them up;
//! SQL databases (names only, on disk with the tables: data nodes never
//! hear of them), whose tables are named `database.table`.

use super::unique::no_such_unique_index;
use super::*;
use shoal_types::schema::{check_database_name, database_of};

/// Most SQL databases the cluster holds.
pub const DATABASES_MAX: usize = 4096;
/// Database names mgmd never creates: `shoal` is the SQL node's name for
/// the tables whose names have no database part, the others are MySQL's
/// system schemas, which SQL nodes serve themselves.
pub const RESERVED_DATABASES: &[&str] = &[
    "shoal",
    "information_schema",
    "mysql",
    "performance_schema",
    "sys",
];

/// The longest mgmd waits for data nodes to build a new index.
pub(super) const INDEX_BUILD_ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(280);

impl Shared {
    /// Waits for every ack with one common deadline. The first failure
    /// wins: a node's error (prefixed with the node) or a timeout naming the
    /// node. A node that disconnected counts as done.
    pub(super) async fn await_acks(
        &self,
        waits: Vec<AckWait>,
        what: &str,
    ) -> Result<(), ShoalError> {
        self.await_acks_within(waits, what, self.ack_timeout).await
    }

    /// [`Shared::await_acks`] with its own deadline (an index build's
    /// acks come when the build is done, which grows with the table).
    pub(super) async fn await_acks_within(
        &self,
        waits: Vec<AckWait>,
        what: &str,
        timeout: std::time::Duration,
    ) -> Result<(), ShoalError> {
        self.collect_acks(waits, what, timeout, false).await
    }

    /// [`Shared::await_acks_within`] where a node that disconnects before
    /// acknowledging fails the change (a new unique index: such a node may
    /// still coordinate writes that do not keep it).
    pub(super) async fn await_every_ack(
        &self,
        waits: Vec<AckWait>,
        what: &str,
        timeout: std::time::Duration,
    ) -> Result<(), ShoalError> {
        self.collect_acks(waits, what, timeout, true).await
    }

    async fn collect_acks(
        &self,
        waits: Vec<AckWait>,
        what: &str,
        timeout: std::time::Duration,
        every: bool,
    ) -> Result<(), ShoalError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut outcome = Ok(());
        let mut unfinished = Vec::new();
        for w in waits {
            if outcome.is_err() {
                unfinished.push((w.node_id, w.event_id));
                continue;
            }
            match tokio::time::timeout_at(deadline, w.rx).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    warn!(node_id = w.node_id, "data node failed {what}: {e}");
                    outcome = Err(ShoalError::with_detail(
                        e.code,
                        format!("data node {} failed {what}: {}", w.node_id, e.detail),
                    ));
                }
                Ok(Err(_)) if every => {
                    warn!(
                        node_id = w.node_id,
                        "data node disconnected before acknowledging {what}"
                    );
                    outcome = Err(ShoalError::with_detail(
                        ErrorCode::NodeNotReady,
                        format!(
                            "data node {} disconnected before acknowledging {what}; retry",
                            w.node_id
                        ),
                    ));
                }
                Ok(Err(_)) => {
                    info!(
                        node_id = w.node_id,
                        "data node disconnected before acknowledging {what}; it reloads the schema when it registers again"
                    );
                }
                Err(_) => {
                    warn!(
                        node_id = w.node_id,
                        "data node did not acknowledge {what} in time"
                    );
                    unfinished.push((w.node_id, w.event_id));
                    outcome = Err(mgmd_err(format!(
                        "data node {} did not acknowledge {what} within {} ms",
                        w.node_id,
                        timeout.as_millis()
                    )));
                }
            }
        }
        if !unfinished.is_empty() {
            // Forget waiters nobody listens to any more, so a node that
            // never answers cannot grow the map.
            let mut st = self.lock();
            for (node_id, event_id) in unfinished {
                if let Some(s) = st.sessions.get_mut(&node_id) {
                    s.pending_acks.remove(&event_id);
                }
            }
        }
        outcome
    }

    /// Creates a table, and the hidden table of each of its unique
    /// indexes (all on disk at once). Data nodes hear of the table without
    /// its unique indexes, then of each hidden table, then of the indexes
    /// (`IndexesChanged`); clients see none of it before every node acked
    /// all of it, so no write can reach the table before its indexes are
    /// kept. Any failure drops everything again.
    pub(super) async fn create_table(&self, mut def: TableDef) -> Result<TableDef, ShoalError> {
        if def.options.index_of.is_some() {
            return Err(ShoalError::with_detail(
                ErrorCode::BadTableDefinition,
                format!(
                    "table `{}`: `index_of` marks the hidden table of a unique index; mgmd sets it, a create request may not",
                    def.name
                ),
            ));
        }
        // Where the table lives is mgmd's decision, not the client's.
        def.distribution = Some(self.config.table_distribution(def.options.fragment_count)?);
        def.add_primary_index();
        for u in &mut def.unique_indexes {
            u.table = TableId(0);
            u.building = false;
        }
        def.validate()?;
        let _op = self.schema_op.lock().await;
        let (def, hidden, file) = {
            let st = self.lock();
            if let Some(database) = database_of(&def.name) {
                if !st.databases.contains(database) {
                    return Err(no_such_database(database, &format!("table `{}`", def.name)));
                }
            }
            if !def.unique_indexes.is_empty() {
                self.every_data_node_connected(&st, "a table with unique indexes")?;
            }
            let hidden_count = def.unique_indexes.len();
            let mut names = vec![def.name.clone()];
            names.extend(
                def.unique_indexes
                    .iter()
                    .map(|u| UniqueIndexDef::table_name(&def.name, &u.name)),
            );
            if let Some(taken) = names.iter().find(|n| st.tables.contains_key(*n)) {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{taken}` already exists"),
                ));
            }
            if st.tables.len() + 1 + hidden_count > TABLES_MAX {
                return Err(ShoalError::with_detail(
                    ErrorCode::RequestTooLarge,
                    format!(
                        "the cluster holds {} tables; this one and its {hidden_count} unique index table(s) would pass {TABLES_MAX}, the most it can",
                        st.tables.len()
                    ),
                ));
            }
            let ids_needed = 1 + hidden_count as u32;
            let next_table_id = st
                .next_table_id
                .checked_add(ids_needed)
                .ok_or_else(|| mgmd_err("table ids exhausted"))?;
            def.id = TableId(st.next_table_id);
            def.version = SchemaVersion(1);
            let mut hidden = Vec::with_capacity(hidden_count);
            for (i, u) in def.unique_indexes.clone().iter().enumerate() {
                let h = self.hidden_table(&def, u, TableId(def.id.0 + 1 + i as u32))?;
                def.unique_indexes[i].table = h.id;
                hidden.push(h);
            }
            def.validate()?;
            let mut file = st.schema_file(self.config.cluster_id);
            file.next_table_id = next_table_id;
            file.tables.push(def.clone());
            file.tables.extend(hidden.iter().cloned());
            (def, hidden, file)
        };
        // Durable before any node hears of it: a node must never hold a
        // table that mgmd forgets after a crash.
        self.store.save_schema(file).await?;
        let waits = {
            let mut st = self.lock();
            st.next_table_id += 1 + hidden.len() as u32;
            for t in std::iter::once(&def).chain(&hidden) {
                st.tables.insert(t.name.clone(), t.clone());
                st.creating.insert(t.name.clone());
            }
            let mut bare = def.clone();
            bare.unique_indexes.clear();
            let mut waits = st.push_to_all_data_nodes(&MgmEvent::TableCreated(bare));
            for h in &hidden {
                waits.extend(st.push_to_all_data_nodes(&MgmEvent::TableCreated(h.clone())));
            }
            if !hidden.is_empty() {
                waits.extend(st.push_to_all_data_nodes(&MgmEvent::IndexesChanged(def.clone())));
            }
            waits
        };
        info!(
            table = %def.name,
            id = %def.id,
            unique_indexes = hidden.len(),
            nodes = waits.len(),
            "creating table"
        );
        let what = format!("creating table `{}`", def.name);
        // A node acks a table's unique indexes once the transactions it
        // had begun before have ended: not bounded by the table's size,
        // but by the longest transaction.
        let acks = if hidden.is_empty() {
            self.await_acks(waits, &what).await
        } else {
            let timeout = self.ack_timeout.max(INDEX_BUILD_ACK_TIMEOUT);
            self.await_every_ack(waits, &what, timeout).await
        };
        match acks {
            Ok(()) => {
                let mut st = self.lock();
                for t in std::iter::once(&def).chain(&hidden) {
                    st.creating.remove(&t.name);
                }
                info!(table = %def.name, id = %def.id, "table created");
                Ok(def)
            }
            Err(e) => {
                // Roll back so the cluster does not keep a table that some
                // node lacks. The ids stay used (ids are never reused).
                warn!(table = %def.name, "create failed, rolling back: {e}");
                let mut names = vec![def.name.clone()];
                names.extend(hidden.iter().map(|h| h.name.clone()));
                self.forget_tables(&names, &format!("rolling back table `{}`", def.name))
                    .await;
                Err(e)
            }
        }
    }

    /// Removes tables (a table first, then its hidden tables), persists
    /// that, pushes `TableDropped` for each and waits for the acks; a
    /// failure is logged, not returned (a rollback, or the end of a drop
    /// that is decided already).
    pub(super) async fn forget_tables(&self, names: &[String], what: &str) {
        let (file, waits) = {
            let mut st = self.lock();
            let mut waits = Vec::new();
            for name in names {
                st.creating.remove(name);
                st.unique_builds.retain(|(t, _), _| t != name);
                if let Some(t) = st.tables.remove(name) {
                    waits.extend(st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: t.id }));
                }
            }
            (st.schema_file(self.config.cluster_id), waits)
        };
        if let Err(pe) = self.store.save_schema(file).await {
            error!("cannot persist {what}: {pe}");
        }
        if let Err(re) = self.await_acks(waits, what).await {
            warn!("{re}");
        }
    }

    /// Drops a table with the hidden tables of its unique indexes. The
    /// hidden table of an index is refused: the index is dropped instead.
    pub(super) async fn drop_table(&self, name: &str) -> Result<(), ShoalError> {
        let _op = self.schema_op.lock().await;
        self.drop_table_locked(name).await
    }

    /// [`Shared::drop_table`] with `schema_op` held by the caller.
    async fn drop_table_locked(&self, name: &str) -> Result<(), ShoalError> {
        let (def, waits) = {
            let mut st = self.lock();
            let def = st.tables.get(name).ok_or_else(|| no_such_table(name))?;
            if let Some(base_id) = def.options.index_of {
                let (base, index) = st
                    .tables
                    .values()
                    .find_map(|b| {
                        (b.id == base_id)
                            .then(|| b.unique_index_by_table(def.id).map(|u| (b, u)))
                            .flatten()
                    })
                    .map(|(b, u)| (b.name.clone(), u.name.clone()))
                    .unwrap_or_else(|| (format!("(id {base_id})"), "?".into()));
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!(
                        "table `{name}` is the hidden table of unique index `{index}` of table `{base}`; drop the index instead"
                    ),
                ));
            }
            let def = st.tables.remove(name).expect("present");
            let mut waits = st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: def.id });
            for u in &def.unique_indexes {
                let hidden = UniqueIndexDef::table_name(&def.name, &u.name);
                st.unique_builds.remove(&(def.name.clone(), u.name.clone()));
                match st.tables.remove(&hidden) {
                    Some(h) => waits
                        .extend(st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: h.id })),
                    None => {
                        warn!(table = name, index = %u.name, "unique index without its hidden table `{hidden}`")
                    }
                }
            }
            (def, waits)
        };
        info!(
            table = %def.name,
            id = %def.id,
            unique_indexes = def.unique_indexes.len(),
            nodes = waits.len(),
            "dropping table"
        );
        // The drop is decided once pushed: a node that fails it is reported
        // to the caller, but the table stays dropped (its data may already
        // be gone on other nodes).
        let acks = self
            .await_acks(waits, &format!("dropping table `{name}`"))
            .await;
        let file = self.lock().schema_file(self.config.cluster_id);
        self.store.save_schema(file).await?;
        info!(table = %def.name, "table dropped");
        acks
    }

    /// Adds an ordered index to a table: on disk first, then built by
    /// every data node (each acks once its build is done); if one fails,
    /// the index is dropped again everywhere.
    pub(super) async fn create_index(
        &self,
        table: &str,
        mut index: shoal_types::IndexDef,
    ) -> Result<TableDef, ShoalError> {
        let _op = self.schema_op.lock().await;
        index.dropped = false;
        let def = {
            let st = self.lock();
            let mut def = st
                .tables
                .get(table)
                .cloned()
                .ok_or_else(|| no_such_table(table))?;
            if def.index_number(&index.name).is_some() || def.unique_index(&index.name).is_some() {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{table}` has an index `{}` already", index.name),
                ));
            }
            def.indexes.push(index.clone());
            def.validate()?;
            def
        };
        let what = format!("building index `{}` of table `{table}`", index.name);
        match self.change_indexes(def.clone(), &what).await {
            Ok(()) => {
                info!(table, index = %index.name, "index created");
                Ok(def)
            }
            Err(e) => {
                warn!(table, index = %index.name, "index build failed, dropping it: {e}");
                let mut undo = def;
                if let Some(last) = undo.indexes.last_mut() {
                    last.dropped = true;
                }
                let again = format!("dropping index `{}` of table `{table}` again", index.name);
                if let Err(re) = self.change_indexes(undo, &again).await {
                    warn!("{re}");
                }
                Err(e)
            }
        }
    }

    /// Drops an index: an ordered one (its number stays taken), or a
    /// unique one (out of the table's definition, then its hidden table).
    pub(super) async fn drop_index(
        &self,
        table: &str,
        index: &str,
        index_table: Option<TableId>,
    ) -> Result<TableDef, ShoalError> {
        let _op = self.schema_op.lock().await;
        let unique = self
            .lock()
            .tables
            .get(table)
            .and_then(|t| t.unique_index(index).map(|u| u.table));
        match (unique, index_table) {
            (Some(id), Some(wanted)) if id != wanted => {
                return Err(ShoalError::with_detail(
                    ErrorCode::NoSuchColumn,
                    format!("unique index `{index}` of table `{table}` is another one (hidden table id {id}, not {wanted}): it was dropped and created again"),
                ))
            }
            (Some(_), _) => return self.drop_unique_index(table, index, "on request").await,
            (None, Some(_)) => return Err(no_such_unique_index(table, index)),
            (None, None) => {}
        }
        let def = {
            let st = self.lock();
            let mut def = st
                .tables
                .get(table)
                .cloned()
                .ok_or_else(|| no_such_table(table))?;
            let i = def.index_number(index).ok_or_else(|| {
                ShoalError::with_detail(
                    ErrorCode::NoSuchColumn,
                    format!("table `{table}` has no index `{index}`"),
                )
            })?;
            def.indexes[usize::from(i)].dropped = true;
            def
        };
        self.change_indexes(
            def.clone(),
            &format!("dropping index `{index}` of table `{table}`"),
        )
        .await?;
        info!(table, index, "index dropped");
        Ok(def)
    }

    /// Stores the table's new definition, then pushes it to every data
    /// node and waits for their acks.
    pub(super) async fn change_indexes(&self, def: TableDef, what: &str) -> Result<(), ShoalError> {
        let file = {
            let mut st = self.lock();
            st.tables.insert(def.name.clone(), def.clone());
            st.schema_file(self.config.cluster_id)
        };
        // Durable before any node hears of it, as for a new table.
        self.store.save_schema(file).await?;
        let waits = self
            .lock()
            .push_to_all_data_nodes(&MgmEvent::IndexesChanged(def));
        // A build's ack comes when it is done: minutes for a large table
        // (within the client's wait for a schema request).
        let timeout = self.ack_timeout.max(INDEX_BUILD_ACK_TIMEOUT);
        self.await_acks_within(waits, what, timeout).await
    }

    /// A table by name, the hidden tables of unique indexes too (clients
    /// reach an index through its table's definition).
    pub(super) fn get_table(&self, name: &str) -> Result<TableDef, ShoalError> {
        let st = self.lock();
        if st.creating.contains(name) {
            return Err(no_such_table(name));
        }
        st.tables
            .get(name)
            .cloned()
            .ok_or_else(|| no_such_table(name))
    }

    /// Every table clients see: not the hidden tables of unique indexes.
    pub(super) fn list_tables(&self) -> Vec<TableDef> {
        let st = self.lock();
        let mut tables: Vec<TableDef> = st
            .tables
            .values()
            .filter(|t| !st.creating.contains(&t.name) && t.options.index_of.is_none())
            .cloned()
            .collect();
        tables.sort_by_key(|t| t.id);
        tables
    }

    /// Creates SQL database `name` (on disk before the answer). Errors:
    /// a bad or reserved name (`BadTableDefinition`, `TableExists`), one
    /// that exists (`TableExists`), too many (`RequestTooLarge`).
    pub(super) async fn create_database(&self, name: &str) -> Result<(), ShoalError> {
        check_database_name(name)?;
        if RESERVED_DATABASES.contains(&name) {
            return Err(ShoalError::with_detail(
                ErrorCode::TableExists,
                format!("database `{name}` is reserved (it always exists on SQL nodes)"),
            ));
        }
        let _op = self.schema_op.lock().await;
        let file = {
            let st = self.lock();
            if st.databases.contains(name) {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("database `{name}` already exists"),
                ));
            }
            if st.databases.len() >= DATABASES_MAX {
                return Err(ShoalError::with_detail(
                    ErrorCode::RequestTooLarge,
                    format!("the cluster holds {DATABASES_MAX} databases, the most it can"),
                ));
            }
            let mut file = st.schema_file(self.config.cluster_id);
            file.databases.insert(name.to_string());
            file
        };
        self.store.save_schema(file).await?;
        self.lock().databases.insert(name.to_string());
        info!(database = name, "database created");
        Ok(())
    }

    /// Drops SQL database `name`: each of its tables (with the hidden
    /// tables of their unique indexes), then the name. Returns the tables
    /// dropped. A table whose drop some data node failed to acknowledge
    /// stays dropped (as for `DropTable`); the first such error is
    /// returned once the database is gone. Missing: `NoSuchTable`.
    pub(super) async fn drop_database(&self, name: &str) -> Result<Vec<TableDef>, ShoalError> {
        let _op = self.schema_op.lock().await;
        let tables: Vec<TableDef> = {
            let st = self.lock();
            if !st.databases.contains(name) {
                return Err(no_such_database(name, "the drop"));
            }
            st.tables
                .values()
                .filter(|t| t.options.index_of.is_none() && database_of(&t.name) == Some(name))
                .cloned()
                .collect()
        };
        let mut first_error = None;
        for t in &tables {
            if let Err(e) = self.drop_table_locked(&t.name).await {
                warn!(database = name, table = %t.name, "dropping a table of the database: {e}");
                first_error.get_or_insert(e);
            }
        }
        let file = {
            let mut st = self.lock();
            st.databases.remove(name);
            st.schema_file(self.config.cluster_id)
        };
        self.store.save_schema(file).await?;
        info!(database = name, tables = tables.len(), "database dropped");
        match first_error {
            Some(e) => Err(e),
            None => Ok(tables),
        }
    }

    /// Every SQL database, by name.
    pub(super) fn list_databases(&self) -> Vec<String> {
        self.lock().databases.iter().cloned().collect()
    }

    pub(super) fn ack_event(&self, node_id: u16, event_id: u64, result: Result<(), ShoalError>) {
        let mut st = self.lock();
        let waiter = st
            .sessions
            .get_mut(&node_id)
            .and_then(|s| s.pending_acks.remove(&event_id));
        match waiter {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => debug!(node_id, event_id, "late or unknown event ack ignored"),
        }
    }
}

/// `NoSuchTable` (723) for a missing database, said so in the detail
/// (SQL nodes answer MySQL's 1049 "Unknown database" or 1008).
pub(super) fn no_such_database(name: &str, needed_by: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchTable,
        format!("database `{name}` does not exist (needed by {needed_by})"),
    )
}

pub(super) fn no_such_table(name: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchTable,
        format!("table `{name}` does not exist"),
    )
}
