//! The schema: creating and dropping tables (on disk first, then pushed
//! to every connected data node and acknowledged), and looking them up.

use super::*;

/// The longest mgmd waits for data nodes to build a new index.
const INDEX_BUILD_ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(280);

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

    pub(super) async fn create_table(&self, mut def: TableDef) -> Result<TableDef, ShoalError> {
        // Where the table lives is mgmd's decision, not the client's.
        def.distribution = Some(self.config.table_distribution(def.options.fragment_count)?);
        def.add_primary_index();
        def.validate()?;
        let _op = self.schema_op.lock().await;
        let file = {
            let st = self.lock();
            if st.tables.contains_key(&def.name) {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{}` already exists", def.name),
                ));
            }
            if st.tables.len() >= TABLES_MAX {
                return Err(ShoalError::with_detail(
                    ErrorCode::RequestTooLarge,
                    format!("the cluster already holds {TABLES_MAX} tables, the most it can"),
                ));
            }
            def.id = TableId(st.next_table_id);
            def.version = SchemaVersion(1);
            let mut file = st.schema_file(self.config.cluster_id);
            file.next_table_id = st
                .next_table_id
                .checked_add(1)
                .ok_or_else(|| mgmd_err("table ids exhausted"))?;
            file.tables.push(def.clone());
            file
        };
        // Durable before any node hears of it: a node must never hold a
        // table that mgmd forgets after a crash.
        self.store.save_schema(file).await?;
        let waits = {
            let mut st = self.lock();
            st.next_table_id += 1;
            st.tables.insert(def.name.clone(), def.clone());
            st.creating = Some(def.name.clone());
            st.push_to_all_data_nodes(&MgmEvent::TableCreated(def.clone()))
        };
        info!(table = %def.name, id = %def.id, nodes = waits.len(), "creating table");
        let what = format!("creating table `{}`", def.name);
        match self.await_acks(waits, &what).await {
            Ok(()) => {
                self.lock().creating = None;
                info!(table = %def.name, id = %def.id, "table created");
                Ok(def)
            }
            Err(e) => {
                // Roll back so the cluster does not keep a table that some
                // node lacks. The id stays used (ids are never reused).
                warn!(table = %def.name, "create failed, rolling back: {e}");
                let (file, waits) = {
                    let mut st = self.lock();
                    st.tables.remove(&def.name);
                    st.creating = None;
                    let waits = st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: def.id });
                    (st.schema_file(self.config.cluster_id), waits)
                };
                if let Err(pe) = self.store.save_schema(file).await {
                    error!(table = %def.name, "cannot persist rollback of create: {pe}");
                }
                let what = format!("rolling back table `{}`", def.name);
                if let Err(re) = self.await_acks(waits, &what).await {
                    warn!("{re}");
                }
                Err(e)
            }
        }
    }

    pub(super) async fn drop_table(&self, name: &str) -> Result<(), ShoalError> {
        let _op = self.schema_op.lock().await;
        let (def, waits) = {
            let mut st = self.lock();
            let def = st.tables.remove(name).ok_or_else(|| no_such_table(name))?;
            let waits = st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: def.id });
            (def, waits)
        };
        info!(table = %def.name, id = %def.id, nodes = waits.len(), "dropping table");
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
            if def.index_number(&index.name).is_some() {
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

    /// Drops an ordered index (its number stays taken).
    pub(super) async fn drop_index(
        &self,
        table: &str,
        index: &str,
    ) -> Result<TableDef, ShoalError> {
        let _op = self.schema_op.lock().await;
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
    async fn change_indexes(&self, def: TableDef, what: &str) -> Result<(), ShoalError> {
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

    pub(super) fn get_table(&self, name: &str) -> Result<TableDef, ShoalError> {
        let st = self.lock();
        if st.creating.as_deref() == Some(name) {
            return Err(no_such_table(name));
        }
        st.tables
            .get(name)
            .cloned()
            .ok_or_else(|| no_such_table(name))
    }

    pub(super) fn list_tables(&self) -> Vec<TableDef> {
        let st = self.lock();
        let mut tables: Vec<TableDef> = st
            .tables
            .values()
            .filter(|t| st.creating.as_deref() != Some(t.name.as_str()))
            .cloned()
            .collect();
        tables.sort_by_key(|t| t.id);
        tables
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

fn no_such_table(name: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchTable,
        format!("table `{name}` does not exist"),
    )
}
