//! The schema's unique indexes: created with a table or on one that holds
//! rows (a hidden table, then the index listed as building until its
//! client-side build says it is done), dropped, and made whole again at
//! start after a crash in the middle of one (docs/PROTOCOL.md §13).

use super::schema::{no_such_table, INDEX_BUILD_ACK_TIMEOUT};
use super::*;

impl Shared {
    /// Refuses a unique index while a configured data node is not
    /// connected: a node cut off from mgmd but still coordinating writes
    /// would not keep the index (a stopped node learns it at its start,
    /// before it serves).
    pub(super) fn every_data_node_connected(
        &self,
        st: &State,
        what: &str,
    ) -> Result<(), ShoalError> {
        let missing: Vec<u16> = self
            .config
            .data_node_ids()
            .into_iter()
            .filter(|id| {
                !st.sessions
                    .get(id)
                    .is_some_and(|s| s.kind == SessionKind::DataNode)
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(ShoalError::with_detail(
            ErrorCode::NodeNotReady,
            format!(
                "data node(s) {missing:?} not connected to mgmd: {what} is created only while every data node is (a node cut off from mgmd would not keep it); retry once they are"
            ),
        ))
    }

    /// The hidden table of unique index `index` of `base`, with id `id`,
    /// placed by mgmd like any table.
    pub(super) fn hidden_table(
        &self,
        base: &TableDef,
        index: &UniqueIndexDef,
        id: TableId,
    ) -> Result<TableDef, ShoalError> {
        let mut h = index.table_def(base)?;
        h.id = id;
        h.version = SchemaVersion(1);
        h.distribution = Some(self.config.table_distribution(h.options.fragment_count)?);
        h.validate()?;
        Ok(h)
    }

    /// Adds unique index `index` to table `table`, which may hold rows:
    /// creates its hidden table and lists the index as building (both on
    /// disk at once), and answers once every data node acked both, that
    /// is, once every write that begins keeps the index. The client then
    /// fills the index from the table's rows and says so with
    /// [`Shared::unique_index_built`]; if `owner`'s connection closes
    /// first, mgmd drops the index.
    pub(super) async fn create_unique_index(
        &self,
        table: &str,
        mut index: UniqueIndexDef,
        owner: BuildOwner,
    ) -> Result<TableDef, ShoalError> {
        let _op = self.schema_op.lock().await;
        index.building = true;
        let (before, def, hidden, file) = {
            let st = self.lock();
            self.every_data_node_connected(&st, "a unique index")?;
            let before = st
                .tables
                .get(table)
                .filter(|_| !st.creating.contains(table))
                .cloned()
                .ok_or_else(|| no_such_table(table))?;
            if before.options.index_of.is_some() {
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!("table `{table}` is the hidden table of a unique index; it takes no indexes"),
                ));
            }
            if before.index_number(&index.name).is_some()
                || before.unique_index(&index.name).is_some()
            {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{table}` has an index `{}` already", index.name),
                ));
            }
            let hidden_name = UniqueIndexDef::table_name(table, &index.name);
            if st.tables.contains_key(&hidden_name) {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{hidden_name}` already exists (the name of the index's hidden table)"),
                ));
            }
            if st.tables.len() >= TABLES_MAX {
                return Err(ShoalError::with_detail(
                    ErrorCode::RequestTooLarge,
                    format!("the cluster already holds {TABLES_MAX} tables, the most it can"),
                ));
            }
            let next_table_id = st
                .next_table_id
                .checked_add(1)
                .ok_or_else(|| mgmd_err("table ids exhausted"))?;
            let hidden = self.hidden_table(&before, &index, TableId(st.next_table_id))?;
            index.table = hidden.id;
            let mut def = before.clone();
            def.unique_indexes.push(index.clone());
            def.validate()?;
            let mut file = st.schema_file(self.config.cluster_id);
            file.next_table_id = next_table_id;
            file.tables.retain(|t| t.name != def.name);
            file.tables.push(def.clone());
            file.tables.push(hidden.clone());
            file.tables.sort_by_key(|t| t.id);
            (before, def, hidden, file)
        };
        self.store.save_schema(file).await?;
        let waits = {
            let mut st = self.lock();
            st.next_table_id += 1;
            st.tables.insert(def.name.clone(), def.clone());
            st.tables.insert(hidden.name.clone(), hidden.clone());
            st.creating.insert(hidden.name.clone());
            st.unique_builds
                .insert((table.to_string(), index.name.clone()), owner);
            let mut waits = st.push_to_all_data_nodes(&MgmEvent::TableCreated(hidden.clone()));
            waits.extend(st.push_to_all_data_nodes(&MgmEvent::IndexesChanged(def.clone())));
            waits
        };
        info!(
            table,
            index = %index.name,
            hidden_id = %hidden.id,
            nodes = waits.len(),
            "creating unique index"
        );
        let what = format!("creating unique index `{}` of table `{table}`", index.name);
        let timeout = self.ack_timeout.max(INDEX_BUILD_ACK_TIMEOUT);
        match self.await_every_ack(waits, &what, timeout).await {
            Ok(()) => {
                self.lock().creating.remove(&hidden.name);
                info!(table, index = %index.name, "unique index created; building");
                Ok(def)
            }
            Err(e) => {
                warn!(table, index = %index.name, "unique index create failed, dropping it: {e}");
                // Failures are logged inside; the create's error is the answer.
                let _ = self
                    .remove_unique_index(&before, &index, &hidden, "rolling back")
                    .await;
                Err(e)
            }
        }
    }

    /// Takes a unique index out of its table's definition and drops its
    /// hidden table: on disk at once, then `IndexesChanged` (nodes stop
    /// keeping the index) and `TableDropped`. `without` is the table's
    /// definition without the index. Failures are logged and returned.
    pub(super) async fn remove_unique_index(
        &self,
        without: &TableDef,
        index: &UniqueIndexDef,
        hidden: &TableDef,
        why: &str,
    ) -> Result<(), ShoalError> {
        let build_key = (without.name.clone(), index.name.clone());
        let (file, before, owner) = {
            let mut st = self.lock();
            let before = st.tables.insert(without.name.clone(), without.clone());
            st.tables.remove(&hidden.name);
            let owner = st.unique_builds.remove(&build_key);
            (st.schema_file(self.config.cluster_id), before, owner)
        };
        let what = format!(
            "{why}: dropping unique index `{}` of table `{}`",
            index.name, without.name
        );
        if let Err(e) = self.store.save_schema(file).await {
            // Nothing changed then: no node heard of it, and the file
            // still holds the index.
            error!("cannot persist {what}: {e}");
            let mut st = self.lock();
            if let Some(before) = before {
                st.tables.insert(without.name.clone(), before);
            }
            st.tables.insert(hidden.name.clone(), hidden.clone());
            if let Some(owner) = owner {
                st.unique_builds.insert(build_key, owner);
            }
            return Err(e);
        }
        self.lock().creating.remove(&hidden.name);
        let waits = {
            let mut st = self.lock();
            let mut waits = st.push_to_all_data_nodes(&MgmEvent::IndexesChanged(without.clone()));
            waits.extend(st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: hidden.id }));
            waits
        };
        let timeout = self.ack_timeout.max(INDEX_BUILD_ACK_TIMEOUT);
        let acks = self.await_acks_within(waits, &what, timeout).await;
        if let Err(e) = &acks {
            warn!("{e}");
        }
        acks
    }

    /// The client built unique index `index` of `table`: reads through it
    /// are served from now on. Already built: answered the same.
    pub(super) async fn unique_index_built(
        &self,
        table: &str,
        index: &str,
        index_table: TableId,
        caller: BuildOwner,
    ) -> Result<TableDef, ShoalError> {
        let _op = self.schema_op.lock().await;
        let def = {
            let mut st = self.lock();
            let mut def = st
                .tables
                .get(table)
                .cloned()
                .ok_or_else(|| no_such_table(table))?;
            let u = def
                .unique_indexes
                .iter_mut()
                .find(|u| u.name == index)
                .ok_or_else(|| no_such_unique_index(table, index))?;
            if u.table != index_table {
                return Err(ShoalError::with_detail(
                    ErrorCode::NoSuchColumn,
                    format!("unique index `{index}` of table `{table}` is another one (hidden table id {}, not {index_table}): it was dropped and created again", u.table),
                ));
            }
            if !u.building {
                return Ok(def);
            }
            let key = (table.to_string(), index.to_string());
            if st.unique_builds.get(&key) != Some(&caller) {
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!("the build of unique index `{index}` of table `{table}` belongs to another connection"),
                ));
            }
            u.building = false;
            st.unique_builds
                .remove(&(table.to_string(), index.to_string()));
            def
        };
        self.change_indexes(
            def.clone(),
            &format!("finishing the build of unique index `{index}` of table `{table}`"),
        )
        .await?;
        info!(table, index, "unique index built");
        Ok(def)
    }

    /// The connection `owner` closed: drops the unique indexes it was
    /// still building (in the background; each waits its turn).
    pub(super) fn abandon_unique_builds(self: &Arc<Self>, owner: BuildOwner) {
        let abandoned: Vec<(String, String)> = self
            .lock()
            .unique_builds
            .iter()
            .filter(|(_, o)| **o == owner)
            .map(|(k, _)| k.clone())
            .collect();
        for (table, index) in abandoned {
            let shared = self.clone();
            tokio::spawn(async move {
                let _op = shared.schema_op.lock().await;
                if shared.stopped.load(std::sync::atomic::Ordering::Acquire) {
                    // A restarted mgmd drops it (`repair_unique_indexes`).
                    return;
                }
                // Finished or dropped meanwhile: nothing to do.
                let still = shared
                    .lock()
                    .unique_builds
                    .get(&(table.clone(), index.clone()))
                    == Some(&owner);
                if !still {
                    return;
                }
                warn!(
                    table,
                    index,
                    api_node = owner.node_id,
                    "the connection building a unique index closed before the build was done; dropping the index"
                );
                if let Err(e) = shared
                    .drop_unique_index(&table, &index, "build abandoned")
                    .await
                {
                    warn!(table, index, "dropping an abandoned unique index: {e}");
                }
            });
        }
    }

    /// Drops unique index `index` of `table` (the caller holds `schema_op`).
    pub(super) async fn drop_unique_index(
        &self,
        table: &str,
        index: &str,
        why: &str,
    ) -> Result<TableDef, ShoalError> {
        let (without, u, hidden) = {
            let st = self.lock();
            let mut def = st
                .tables
                .get(table)
                .cloned()
                .ok_or_else(|| no_such_table(table))?;
            let at = def
                .unique_indexes
                .iter()
                .position(|u| u.name == index)
                .ok_or_else(|| no_such_unique_index(table, index))?;
            let u = def.unique_indexes.remove(at);
            let hidden_name = UniqueIndexDef::table_name(table, index);
            let hidden = st.tables.get(&hidden_name).cloned().ok_or_else(|| {
                mgmd_err(format!(
                    "unique index `{index}` of table `{table}` has no hidden table `{hidden_name}`"
                ))
            })?;
            (def, u, hidden)
        };
        self.remove_unique_index(&without, &u, &hidden, why).await?;
        info!(table, index, "unique index dropped");
        Ok(without)
    }
}

pub(super) fn no_such_unique_index(table: &str, index: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchColumn,
        format!("table `{table}` has no unique index `{index}`"),
    )
}

/// Makes a schema loaded at start whole again after a crash in the middle
/// of a unique index's life: an index still building is dropped (its
/// builder's connection died with the old mgmd), and so is a hidden table
/// no table's index names, and an index whose hidden table is missing.
/// Returns what it dropped, for the log (empty: nothing to do). Runs
/// before any node connects: nodes learn the result from their schema.
pub(super) fn repair_unique_indexes(tables: &mut Vec<TableDef>) -> Vec<String> {
    let mut dropped = Vec::new();
    let hidden_ids: std::collections::BTreeSet<TableId> = tables
        .iter()
        .filter(|t| t.options.index_of.is_some())
        .map(|t| t.id)
        .collect();
    for t in tables.iter_mut() {
        t.unique_indexes.retain(|u| {
            let keep = !u.building && hidden_ids.contains(&u.table);
            if !keep {
                dropped.push(format!(
                    "unique index `{}` of table `{}` ({})",
                    u.name,
                    t.name,
                    if u.building {
                        "still building"
                    } else {
                        "its hidden table is missing"
                    }
                ));
            }
            keep
        });
    }
    let named: std::collections::BTreeSet<(TableId, TableId)> = tables
        .iter()
        .flat_map(|t| t.unique_indexes.iter().map(move |u| (t.id, u.table)))
        .collect();
    tables.retain(|t| match t.options.index_of {
        Some(base) if !named.contains(&(base, t.id)) => {
            dropped.push(format!("hidden table `{}` (no index names it)", t.name));
            false
        }
        _ => true,
    });
    dropped
}
