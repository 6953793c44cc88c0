//! What the operator asks of the cluster: its status, stopping, starting
//! and restarting data nodes, supervision by `shoal up`, and arbitration
//! between the two sides of a split.

use super::*;

impl Shared {
    pub(super) fn status(&self) -> ClusterStatus {
        let st = self.lock();
        let groups = self.config.node_groups();
        // Primary replicas per node, over every table's fragments.
        let mut primaries: HashMap<u16, u32> = HashMap::new();
        for t in st.tables.values() {
            if let Some(Ok(map)) = t.distribution.as_ref().map(|d| d.map()) {
                for f in &map.fragments {
                    *primaries.entry(f.replicas[0]).or_default() += 1;
                }
            }
        }
        let mut nodes = Vec::new();
        for n in &self.config.nodes {
            let session = st.sessions.get(&n.node_id);
            let info = match n.kind.as_str() {
                KIND_MGMD => NodeInfo {
                    node_id: n.node_id,
                    kind: n.kind.clone(),
                    host: n.host.clone(),
                    port: self.mgmd_port,
                    state: NodeState::Started,
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                },
                KIND_DATANODE => {
                    let status = session.and_then(|s| s.status.clone());
                    let port = match &status {
                        Some(s) if s.listen_port != 0 => s.listen_port,
                        _ => n.port,
                    };
                    NodeInfo {
                        node_id: n.node_id,
                        kind: n.kind.clone(),
                        host: n.host.clone(),
                        port,
                        state: session.map_or(NodeState::NotStarted, |s| s.state),
                        status,
                        primaries: primaries.get(&n.node_id).copied().unwrap_or(0),
                        node_group: groups
                            .iter()
                            .position(|g| g.contains(&n.node_id))
                            .map(|g| g as u16),
                        incarnation: session.map_or_else(
                            || st.starts.get(&n.node_id).copied().unwrap_or(0),
                            |s| s.incarnation,
                        ),
                        wanted_running: st.wanted_running.get(&n.node_id).copied().unwrap_or(true),
                        supervised: st.supervisor_of(n.node_id).is_some(),
                    }
                }
                _ => NodeInfo {
                    node_id: n.node_id,
                    kind: n.kind.clone(),
                    host: session.map_or_else(|| n.host.clone(), |s| s.peer.ip().to_string()),
                    port: 0,
                    state: if session.is_some() {
                        NodeState::Started
                    } else {
                        NodeState::NotStarted
                    },
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                },
            };
            nodes.push(info);
        }
        // API nodes with ids outside any [[node]] section.
        for (&id, s) in &st.sessions {
            if s.kind == SessionKind::Api && !self.config.nodes.iter().any(|n| n.node_id == id) {
                nodes.push(NodeInfo {
                    node_id: id,
                    kind: KIND_API.to_string(),
                    host: s.peer.ip().to_string(),
                    port: 0,
                    state: NodeState::Started,
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                });
            }
        }
        nodes.sort_by_key(|n| n.node_id);
        ClusterStatus {
            cluster_id: self.config.cluster_id,
            no_of_replicas: self.config.no_of_replicas,
            nodes,
        }
    }

    /// "host:port" that a data node started by hand should connect to.
    pub(super) fn connect_string(&self) -> String {
        format!("{}:{}", self.config.mgmd_node().host, self.mgmd_port)
    }

    /// `N stop`: not wanted any more (its supervisor keeps it down), then
    /// stopped if it runs. A node that is not connected stays down.
    pub(super) async fn stop_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let wait = {
            let mut st = self.lock();
            // Before the push: a supervisor that sees the node exit must
            // already find it unwanted, or it would start it again.
            st.wanted_running.insert(node_id, false);
            if st.is_connected_data_node(node_id) {
                st.push_event(node_id, &MgmEvent::Shutdown)
            } else {
                None
            }
        };
        info!(
            node_id,
            running = wait.is_some(),
            "data node wanted stopped; asking it to stop"
        );
        self.await_acks(wait.into_iter().collect(), "stopping")
            .await
    }

    /// `N start`: wanted again. Only a supervisor can start a process, so
    /// without one the operator is told how to start it by hand.
    pub(super) fn start_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let mut st = self.lock();
        st.wanted_running.insert(node_id, true);
        let running = st.is_connected_data_node(node_id);
        let supervisor = st.supervisor_of(node_id);
        drop(st);
        info!(node_id, running, supervisor, "data node wanted running");
        if running || supervisor.is_some() {
            return Ok(());
        }
        Err(ShoalError::with_detail(
            ErrorCode::NodeNotReady,
            format!(
                "data node {node_id} is wanted running again, but no supervisor (shoal up) covers it, \
                 so nothing will start it: start it by hand with \
                 `shoal datanode --connect {} --node-id {node_id}`",
                self.connect_string()
            ),
        ))
    }

    /// `N restart`: stop a supervised node and let its supervisor start it
    /// again. Refused without a supervisor: the node would stop and stay
    /// down.
    pub(super) async fn restart_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let (wait, supervisor) = {
            let mut st = self.lock();
            let Some(supervisor) = st.supervisor_of(node_id) else {
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!(
                        "data node {node_id} has no supervisor (shoal up), so after stopping \
                         nothing would start it again; restart it by hand: `shoal mgm -e \"{node_id} stop\"`, \
                         then `shoal datanode --connect {} --node-id {node_id}`",
                        self.connect_string()
                    ),
                ));
            };
            if !st.is_connected_data_node(node_id) {
                // Down (then `N start` is what the operator wants) or
                // running without a link to mgmd: either way mgmd cannot
                // ask it to stop.
                return Err(ShoalError::with_detail(
                    ErrorCode::NodeNotReady,
                    format!(
                        "data node {node_id} is not connected to mgmd, so it cannot be asked to \
                         stop; if it is down, `{node_id} start` starts it"
                    ),
                ));
            }
            st.wanted_running.insert(node_id, true);
            (st.push_event(node_id, &MgmEvent::Shutdown), supervisor)
        };
        info!(
            node_id,
            supervisor, "restarting data node: asking it to stop, its supervisor starts it again"
        );
        self.await_acks(wait.into_iter().collect(), "stopping for a restart")
            .await
    }

    /// API node `api_id` supervises `nodes` (replacing its earlier list).
    pub(super) fn supervise(&self, api_id: u16, nodes: Vec<u16>) -> Result<(), ShoalError> {
        // Checked before the loop below walks it: a frame may hold millions.
        if nodes.len() > usize::from(NODE_ID_MAX) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "supervise lists {} nodes; a cluster has at most {NODE_ID_MAX}",
                    nodes.len()
                ),
            ));
        }
        let nodes: BTreeSet<u16> = nodes.into_iter().collect();
        for &n in &nodes {
            self.check_data_node_id(n)?;
        }
        let mut st = self.lock();
        for &n in &nodes {
            if let Some(other) = st.supervisor_of(n).filter(|&o| o != api_id) {
                // Two supervisors would race to start the same node id.
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!("data node {n} is already supervised by API node {other}"),
                ));
            }
        }
        let session = st
            .sessions
            .get_mut(&api_id)
            .expect("a registered API connection has a session");
        info!(supervisor = api_id, nodes = ?nodes, "supervisor registered");
        session.supervises = nodes;
        Ok(())
    }

    /// Data node `asker` asks whether `forming` may start a cluster: without
    /// the other data nodes, only if none of those is connected here and
    /// reports itself in a cluster (it may run a cluster the forming nodes
    /// cannot see), no other group was allowed just before (two groups of
    /// a split may share nodes), and this mgmd did not just start (the
    /// nodes of a running cluster may not have reattached yet); with every
    /// data node, only if none is in a cluster, no other group was allowed
    /// just before, and, right after this mgmd started, every one of them
    /// has registered here (see `FormationGate::request`).
    ///
    /// In a cluster counts a node still restoring or copying its rows, not
    /// only a started one: after an mgmd restart a node that took the
    /// others for fresh may ask to form with them while the cluster they
    /// formed (before the restart) is still restoring.
    fn may_form(&self, asker: u16, forming: &BTreeSet<u16>) -> bool {
        let now_ms = self.started.elapsed().as_millis() as u64;
        let mut st = self.lock();
        let mut started = BTreeSet::new();
        let mut registered = BTreeSet::new();
        for (&id, s) in &st.sessions {
            if s.kind == SessionKind::DataNode {
                registered.insert(id);
                if s.in_cluster() {
                    started.insert(id);
                }
            }
        }
        let everyone = self
            .config
            .data_node_ids()
            .iter()
            .all(|n| forming.contains(n));
        match st
            .formation
            .request(now_ms, forming, &started, &registered, everyone)
        {
            Ok(()) => {
                info!(asker, nodes = ?forming, everyone, "arbitration: initial start allowed (no other data node is in a cluster)");
                true
            }
            Err(why) => {
                warn!(asker, nodes = ?forming, everyone, "arbitration: initial start refused: {why}");
                false
            }
        }
    }

    /// Data node `asker` asks whether its side of a split may survive.
    pub(super) async fn arbitrate(
        &self,
        asker: u16,
        view: u64,
        newest: u64,
        survivors: Vec<u16>,
    ) -> Result<bool, ShoalError> {
        if survivors.len() > usize::from(NODE_ID_MAX) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "arbitration request lists {} survivors; a cluster has at most {NODE_ID_MAX}",
                    survivors.len()
                ),
            ));
        }
        let survivors: BTreeSet<u16> = survivors.into_iter().collect();
        for &n in &survivors {
            self.check_data_node_id(n)?;
        }
        if !survivors.contains(&asker) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "data node {asker} asks for survivors {survivors:?} without itself; \
                     a node asks only for its own side"
                ),
            ));
        }
        if view == FORM_VIEW {
            return Ok(self.may_form(asker, &survivors));
        }
        let _op = self.arbitration_op.lock().await;
        // Decided on a copy, committed only once durable: a grant that
        // failed to reach the disk must not be remembered either.
        let (granted, changed) = {
            let st = self.lock();
            let mut arbitrator = st.arbitrator.clone();
            let granted = arbitrator.request(view, newest, &survivors);
            let changed = (arbitrator.grant() != st.arbitrator.grant()).then_some(arbitrator);
            (granted, changed)
        };
        if let Some(arbitrator) = changed {
            let grant = arbitrator
                .grant()
                .expect("a changed arbitrator holds a grant");
            if let Err(e) = self
                .store
                .save_arbitration(self.config.cluster_id, grant)
                .await
            {
                // No answer means shut down for the asking side; an error
                // is the same, and the other side may still be granted.
                error!(view, survivors = ?survivors, asker, "cannot persist the arbitration grant, not granting: {e}");
                return Err(e);
            }
            self.lock().arbitrator = arbitrator;
        }
        if granted {
            info!(view, newest, survivors = ?survivors, asker, "arbitration: survival granted");
        } else {
            let winner = self.lock().arbitrator.grant().cloned();
            warn!(
                view,
                newest,
                survivors = ?survivors,
                asker,
                granted_view = winner.as_ref().map(|g| g.view),
                granted_newest = winner.as_ref().map(|g| g.newest),
                granted_survivors = ?winner.map(|g| g.survivors),
                "arbitration: survival refused (another side already won)"
            );
        }
        Ok(granted)
    }
}
