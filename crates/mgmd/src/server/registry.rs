//! Who is connected: data node and API registrations (node ids and start
//! numbers), reattaching data nodes, the states they report, and
//! deregistration when a connection closes.

use super::*;

impl Shared {
    /// Registers a data node: picks its id, bumps and persists its start
    /// number, then enters the session. The session appears only once the
    /// start number is durable, so nobody sees an incarnation that a crash
    /// could hand out again.
    pub(super) async fn register_data_node(
        &self,
        requested: Option<u16>,
        conn: &ConnHandle,
    ) -> Result<Registered, ShoalError> {
        let ids = self.config.data_node_ids();
        let list = ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let _op = self.starts_op.lock().await;
        let (node_id, incarnation, starts) = {
            let mut st = self.lock();
            let node_id = match requested {
                Some(id) => {
                    if !ids.contains(&id) {
                        return Err(ShoalError::with_detail(
                            ErrorCode::NodeIdRefused,
                            format!(
                                "node id {id} is not a data node in the config; configured data node ids: {list}"
                            ),
                        ));
                    }
                    if let Some(s) = st.sessions.get(&id) {
                        return Err(id_in_use(id, s.peer));
                    }
                    id
                }
                None => *ids
                    .iter()
                    .find(|id| !st.sessions.contains_key(id))
                    .ok_or_else(|| {
                        ShoalError::with_detail(
                            ErrorCode::NodeIdRefused,
                            format!("all data node ids ({list}) are in use"),
                        )
                    })?,
            };
            // One sequence for all data nodes, not one per node: a cluster
            // formed later then numbers its views above every earlier
            // cluster's (a view's high half is its formation's newest
            // start number), which the arbitrator relies on to tell a new
            // split from an old one.
            let previous = st.starts.values().copied().max().unwrap_or(0);
            let incarnation = previous.checked_add(1).ok_or_else(|| {
                mgmd_err(format!(
                    "data nodes have registered {previous} times, the most a start number counts"
                ))
            })?;
            // Bumped in memory before the write: if the write fails the
            // number is skipped, never reused.
            st.starts.insert(node_id, incarnation);
            (node_id, incarnation, st.starts.clone())
        };
        if let Err(e) = self.store.save_starts(self.config.cluster_id, starts).await {
            error!(
                node_id,
                "cannot persist the start number, refusing the registration: {e}"
            );
            return Err(e);
        }
        let config = self
            .config
            .data_node_config(node_id)
            .expect("id is a configured data node");
        let mut st = self.lock();
        // Only API registrations ran meanwhile, and they never take a data
        // node id; checked anyway rather than trusted.
        if let Some(s) = st.sessions.get(&node_id) {
            return Err(id_in_use(node_id, s.peer));
        }
        let mut tables: Vec<TableDef> = st.tables.values().cloned().collect();
        tables.sort_by_key(|t| t.id);
        let mut session = conn.session(SessionKind::DataNode);
        session.incarnation = incarnation;
        st.sessions.insert(node_id, session);
        Ok(Registered {
            node_id,
            incarnation,
            config,
            tables,
        })
    }

    /// Takes a running data node back after its session broke: same node
    /// id, same start. Nothing is written: the start is already on disk
    /// (it was handed out only after it was). Refusals that can never turn
    /// into an acceptance are `HandshakeRejected`; a live session holding
    /// the id (mgmd has not yet seen the node's old connection close) is
    /// `NodeIdRefused`, worth retrying.
    pub(super) fn reattach_data_node(
        &self,
        node_id: u16,
        incarnation: u32,
        cluster_id: u64,
        conn: &ConnHandle,
    ) -> Result<Registered, ShoalError> {
        let refuse = |why: String| {
            ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!("data node {node_id} (start {incarnation}) cannot reattach: {why}"),
            )
        };
        if cluster_id != self.config.cluster_id {
            return Err(refuse(format!(
                "it belongs to cluster {cluster_id}, this mgmd serves cluster {}",
                self.config.cluster_id
            )));
        }
        if incarnation == 0 {
            return Err(refuse(
                "start numbers begin at 1; register the node instead".into(),
            ));
        }
        let Some(config) = self.config.data_node_config(node_id) else {
            let list = self
                .config
                .data_node_ids()
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(refuse(format!(
                "{node_id} is not a data node in the config; configured data node ids: {list}"
            )));
        };
        // No need for `starts_op`: a registration bumps the count in
        // memory before anyone hears the new number, so under this lock
        // either the bump is visible (the reattach is refused as stale) or
        // the session entered here makes the registration find the id in
        // use.
        let mut st = self.lock();
        let last = st.starts.get(&node_id).copied().unwrap_or(0);
        if incarnation != last {
            return Err(if incarnation < last {
                refuse(format!(
                    "node {node_id} has started again since (start {last}); this process is \
                     stale and must not act as node {node_id}"
                ))
            } else {
                refuse(format!(
                    "mgmd has recorded only {last} start(s) of node {node_id} (was mgmd's data \
                     dir replaced?); restart the node to register it anew"
                ))
            });
        }
        if let Some(s) = st.sessions.get(&node_id) {
            return Err(id_in_use(node_id, s.peer));
        }
        // The table snapshot and the session enter under one lock, like a
        // registration: every later schema event reaches this session.
        let mut tables: Vec<TableDef> = st.tables.values().cloned().collect();
        tables.sort_by_key(|t| t.id);
        let mut session = conn.session(SessionKind::DataNode);
        session.incarnation = incarnation;
        session.reattached = true;
        st.sessions.insert(node_id, session);
        Ok(Registered {
            node_id,
            incarnation,
            config,
            tables,
        })
    }

    pub(super) fn register_api(&self, conn: &ConnHandle) -> Result<u16, ShoalError> {
        let mut api_ids: Vec<u16> = self
            .config
            .nodes
            .iter()
            .filter(|n| n.kind == KIND_API)
            .map(|n| n.node_id)
            .collect();
        api_ids.sort_unstable();
        let mut st = self.lock();
        let node_id = if api_ids.is_empty() {
            let first = self
                .config
                .nodes
                .iter()
                .map(|n| n.node_id)
                .max()
                .unwrap_or(0)
                .saturating_add(1);
            (first..=crate::config::NODE_ID_MAX)
                .find(|id| !st.sessions.contains_key(id))
                .ok_or_else(|| {
                    ShoalError::with_detail(
                        ErrorCode::NodeIdRefused,
                        format!(
                            "no free API node id: ids {first}..={} are all in use",
                            crate::config::NODE_ID_MAX
                        ),
                    )
                })?
        } else {
            *api_ids
                .iter()
                .find(|id| !st.sessions.contains_key(id))
                .ok_or_else(|| {
                    ShoalError::with_detail(
                        ErrorCode::NodeIdRefused,
                        format!(
                            "no free API node id: all {} [[node]] type = \"api\" ids are in use",
                            api_ids.len()
                        ),
                    )
                })?
        };
        st.sessions.insert(node_id, conn.session(SessionKind::Api));
        Ok(node_id)
    }

    /// Frees the node id if this connection still holds it.
    pub(super) fn deregister(&self, node_id: u16, conn_id: u64) {
        let mut st = self.lock();
        if st.sessions.get(&node_id).map(|s| s.conn_id) == Some(conn_id) {
            let s = st.sessions.remove(&node_id).expect("present");
            info!(node_id, peer = %s.peer, kind = ?s.kind, "node disconnected; id is free again");
            if !s.supervises.is_empty() {
                warn!(
                    supervisor = node_id,
                    nodes = ?s.supervises,
                    "supervisor disconnected; these data nodes are no longer restarted when they exit"
                );
            }
        }
    }

    /// Refuses a node id that is not a data node of the config.
    pub(super) fn check_data_node_id(&self, node_id: u16) -> Result<(), ShoalError> {
        let ids = self.config.data_node_ids();
        if ids.contains(&node_id) {
            return Ok(());
        }
        let list = ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Err(ShoalError::with_detail(
            ErrorCode::BadRequest,
            format!("node {node_id} is not a data node in the config; data node ids: {list}"),
        ))
    }

    pub(super) fn report_status(&self, node_id: u16, conn_id: u64, status: NodeStatus) {
        let mut st = self.lock();
        if let Some(s) = st.sessions.get_mut(&node_id) {
            if s.conn_id == conn_id {
                if s.state != status.state {
                    info!(
                        node_id,
                        from = s.state.as_str(),
                        to = status.state.as_str(),
                        "data node state"
                    );
                }
                s.state = status.state;
                s.status = Some(status);
            }
        }
    }
}
