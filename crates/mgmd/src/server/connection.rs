//! One peer connection: its reader and writer tasks, the handshake, and
//! each request dispatched to the registry, schema or operations.

use super::*;

/// What a connection task hands to the registry when it registers.
pub(super) struct ConnHandle {
    pub(super) conn_id: u64,
    pub(super) peer: SocketAddr,
    pub(super) out: mpsc::Sender<Vec<u8>>,
    pub(super) close: Arc<Notify>,
}

impl ConnHandle {
    pub(super) fn session(&self, kind: SessionKind) -> Session {
        Session {
            conn_id: self.conn_id,
            kind,
            peer: self.peer,
            state: match kind {
                SessionKind::DataNode => NodeState::Starting,
                SessionKind::Api => NodeState::Started,
            },
            status: None,
            out: self.out.clone(),
            close: self.close.clone(),
            pending_acks: HashMap::new(),
            incarnation: 0,
            reattached: false,
            supervises: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Unregistered,
    DataNode(u16),
    Api(u16),
}

struct Connection {
    shared: Arc<Shared>,
    handle: ConnHandle,
    role: Role,
}

pub(super) async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (out_tx, out_rx) = mpsc::channel(OUT_QUEUE_FRAMES);
    let writer = tokio::spawn(write_loop(wr, out_rx));
    let conn_id = {
        let mut st = shared.lock();
        let id = st.next_conn_id;
        st.next_conn_id += 1;
        id
    };
    debug!(%peer, conn_id, "connection accepted");
    let close = Arc::new(Notify::new());
    let mut conn = Connection {
        shared,
        handle: ConnHandle {
            conn_id,
            peer,
            out: out_tx,
            close: close.clone(),
        },
        role: Role::Unregistered,
    };
    let mut rd = BufReader::new(rd);
    // Whether the connection ends because mgmd stops (not the peer).
    let mut stopping = *stop.borrow_and_update();
    if !stopping {
        loop {
            let frame = tokio::select! {
                r = read_frame(&mut rd, FRAME_BYTES_MAX) => r,
                _ = stop.changed() => {
                    stopping = true;
                    break;
                }
                _ = close.notified() => {
                    warn!(%peer, "closing connection: peer is not reading its events");
                    break;
                }
            };
            match frame {
                Ok(None) => {
                    debug!(%peer, "peer closed the connection");
                    break;
                }
                Err(e) => {
                    warn!(%peer, "closing connection: {e}");
                    break;
                }
                Ok(Some(body)) => {
                    if let Err(reason) = conn.handle_frame(&body).await {
                        warn!(%peer, "closing connection: {reason}");
                        break;
                    }
                }
            }
        }
    }
    match conn.role {
        Role::DataNode(id) => conn.shared.deregister(id, conn_id),
        Role::Api(id) => {
            conn.shared.deregister(id, conn_id);
            // When mgmd stops, the next one drops them at its start.
            if !stopping {
                conn.shared.abandon_unique_builds(BuildOwner {
                    node_id: id,
                    conn_id,
                });
            }
        }
        Role::Unregistered => {}
    }
    // Dropping the last sender lets the writer flush what is queued and end.
    drop(conn);
    let mut writer = writer;
    if tokio::time::timeout(WRITER_FLUSH_TIMEOUT, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = rx.recv().await {
        if let Err(e) = wr.write_all(&frame).await {
            debug!("write to peer failed: {e}");
            return;
        }
    }
    let _ = wr.shutdown().await;
}

/// Answers a connection over the limit with an error frame and closes it.
pub(super) async fn refuse_connection(mut stream: TcpStream, max_connections: usize) {
    let err = mgmd_err(format!(
        "mgmd refuses the connection: mgmd_max_connections = {max_connections} reached"
    ));
    let frame = encode_frame(&ServerFrame {
        v: PROTOCOL_VERSION,
        msg: ServerMessage::Response {
            id: 0,
            response: Response::Error(WireError::from(&err)),
        },
    })
    .expect("small frame encodes");
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&frame).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

impl Connection {
    /// Queues an answer. Err = the writer is gone (close the connection).
    async fn respond(&self, id: u64, response: Response) -> Result<(), String> {
        let frame = match encode_frame(&ServerFrame {
            v: PROTOCOL_VERSION,
            msg: ServerMessage::Response { id, response },
        }) {
            Ok(f) => f,
            Err(e) => {
                // An answer too big for a frame (a huge table list): tell the
                // client rather than dropping the connection.
                let small = ServerFrame {
                    v: PROTOCOL_VERSION,
                    msg: ServerMessage::Response {
                        id,
                        response: Response::Error(WireError::from(&e)),
                    },
                };
                encode_frame(&small).map_err(|e| e.to_string())?
            }
        };
        self.handle
            .out
            .send(frame)
            .await
            .map_err(|_| "writer task ended".to_string())
    }

    async fn respond_result(
        &self,
        id: u64,
        result: Result<Response, ShoalError>,
    ) -> Result<(), String> {
        let response = match result {
            Ok(r) => r,
            Err(e) => Response::Error(WireError::from(&e)),
        };
        self.respond(id, response).await
    }

    /// Handles one frame. Err(reason) = the peer broke the protocol and the
    /// connection must be closed.
    async fn handle_frame(&mut self, body: &[u8]) -> Result<(), String> {
        let probe: VersionProbe =
            serde_json::from_slice(body).map_err(|e| format!("malformed frame: {e}"))?;
        if probe.v != PROTOCOL_VERSION {
            let err = ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!(
                    "mgmd protocol version {} is not supported; this mgmd speaks version {PROTOCOL_VERSION}",
                    probe.v
                ),
            );
            self.respond(0, Response::Error(WireError::from(&err)))
                .await?;
            return Err(format!("protocol version {} refused", probe.v));
        }
        let frame: ClientFrame =
            serde_json::from_slice(body).map_err(|e| format!("malformed request: {e}"))?;
        let id = frame.id;
        let shared = self.shared.clone();
        match frame.request {
            Request::Show => self.respond(id, Response::Status(shared.status())).await,
            Request::RegisterDataNode { node_id } => {
                let result = match self.role {
                    Role::Unregistered => shared
                        .register_data_node(node_id, &self.handle)
                        .await
                        .map(|r| {
                            self.role = Role::DataNode(r.node_id);
                            info!(
                                node_id = r.node_id,
                                incarnation = r.incarnation,
                                peer = %self.handle.peer,
                                tables = r.tables.len(),
                                "data node registered"
                            );
                            Response::DataNodeRegistered {
                                node_id: r.node_id,
                                cluster_id: shared.config.cluster_id,
                                config: r.config,
                                tables: r.tables,
                                incarnation: r.incarnation,
                            }
                        }),
                    role => Err(already_registered(role)),
                };
                self.respond_result(id, result).await
            }
            Request::ReattachDataNode {
                node_id,
                incarnation,
                cluster_id,
            } => {
                let result = match self.role {
                    Role::Unregistered => shared
                        .reattach_data_node(node_id, incarnation, cluster_id, &self.handle)
                        .map(|r| {
                            self.role = Role::DataNode(r.node_id);
                            info!(
                                node_id = r.node_id,
                                incarnation = r.incarnation,
                                peer = %self.handle.peer,
                                tables = r.tables.len(),
                                "data node reattached (same start)"
                            );
                            Response::DataNodeRegistered {
                                node_id: r.node_id,
                                cluster_id: shared.config.cluster_id,
                                config: r.config,
                                tables: r.tables,
                                incarnation: r.incarnation,
                            }
                        }),
                    role => Err(already_registered(role)),
                };
                if let Err(e) = &result {
                    warn!(node_id, incarnation, peer = %self.handle.peer, "reattach refused: {e}");
                }
                self.respond_result(id, result).await
            }
            Request::RegisterApi => {
                let result = match self.role {
                    Role::Unregistered => shared.register_api(&self.handle).map(|node_id| {
                        self.role = Role::Api(node_id);
                        info!(node_id, peer = %self.handle.peer, "API node registered");
                        Response::ApiRegistered {
                            node_id,
                            cluster_id: shared.config.cluster_id,
                        }
                    }),
                    role => Err(already_registered(role)),
                };
                self.respond_result(id, result).await
            }
            Request::ReportStatus { status } => match self.role {
                Role::DataNode(node_id) => {
                    shared.report_status(node_id, self.handle.conn_id, status);
                    Ok(())
                }
                _ => Err("report_status from a connection that is not a data node".into()),
            },
            Request::AckEvent { event_id, error } => match self.role {
                Role::DataNode(node_id) => {
                    shared.ack_event(node_id, event_id, error.map_or(Ok(()), |e| Err(e.into())));
                    Ok(())
                }
                _ => Err("ack_event from a connection that is not a data node".into()),
            },
            Request::DataNodes => {
                let nodes = shared
                    .status()
                    .nodes
                    .into_iter()
                    .filter(|n| n.kind == KIND_DATANODE)
                    .collect();
                self.respond(id, Response::Nodes(nodes)).await
            }
            Request::GetTable { name } => {
                let result = shared.get_table(&name).map(Response::Table);
                self.respond_result(id, result).await
            }
            Request::CreateDatabase { name } => {
                let result = match self.require_api() {
                    Ok(_) => shared.create_database(&name).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::DropDatabase { name } => {
                let result = match self.require_api() {
                    Ok(_) => shared.drop_database(&name).await.map(Response::Tables),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::ListDatabases => {
                self.respond(id, Response::Databases(shared.list_databases()))
                    .await
            }
            Request::Users(request) => {
                let result = match self.require_api() {
                    Ok(_) => shared.users_request(request).await,
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::ListTables => {
                self.respond(id, Response::Tables(shared.list_tables()))
                    .await
            }
            Request::CreateTable { def } => {
                let result = match self.require_api() {
                    Ok(_) => shared.create_table(def).await.map(Response::Table),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::DropTable { name } => {
                let result = match self.require_api() {
                    Ok(_) => shared.drop_table(&name).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::CreateIndex { table, index } => {
                let result = match self.require_api() {
                    Ok(_) => shared
                        .create_index(&table, index)
                        .await
                        .map(Response::Table),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::DropIndex {
                table,
                index,
                index_table,
            } => {
                let result = match self.require_api() {
                    Ok(_) => shared
                        .drop_index(&table, &index, index_table)
                        .await
                        .map(Response::Table),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::CreateUniqueIndex { table, index } => {
                let result = match self.require_api() {
                    Ok(node_id) => {
                        let owner = BuildOwner {
                            node_id,
                            conn_id: self.handle.conn_id,
                        };
                        shared
                            .create_unique_index(&table, index, owner)
                            .await
                            .map(Response::Table)
                    }
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::UniqueIndexBuilt {
                table,
                index,
                index_table,
            } => {
                let result = match self.require_api() {
                    Ok(node_id) => {
                        let owner = BuildOwner {
                            node_id,
                            conn_id: self.handle.conn_id,
                        };
                        shared
                            .unique_index_built(&table, &index, index_table, owner)
                            .await
                            .map(Response::Table)
                    }
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::StopNode { node_id } => {
                let result = match self.require_api() {
                    Ok(_) => shared.stop_node(node_id).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::StartNode { node_id } => {
                let result = self
                    .require_api()
                    .and_then(|_| shared.start_node(node_id))
                    .map(|()| Response::Ok);
                self.respond_result(id, result).await
            }
            Request::RestartNode { node_id } => {
                let result = match self.require_api() {
                    Ok(_) => shared.restart_node(node_id).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::Supervise { nodes } => {
                let result = self
                    .require_api()
                    .and_then(|api_id| shared.supervise(api_id, nodes))
                    .map(|()| Response::Ok);
                self.respond_result(id, result).await
            }
            Request::Arbitrate {
                view,
                newest,
                survivors,
            } => {
                let result = match self.role {
                    Role::DataNode(asker) => shared
                        .arbitrate(asker, view, newest, survivors)
                        .await
                        .map(|granted| Response::Arbitration { granted }),
                    _ => Err(ShoalError::with_detail(
                        ErrorCode::BadRequest,
                        "only a registered data node may ask the arbitrator",
                    )),
                };
                self.respond_result(id, result).await
            }
        }
    }

    /// The API node id of this connection, or the error for anyone else.
    fn require_api(&self) -> Result<u16, ShoalError> {
        match self.role {
            Role::Api(id) => Ok(id),
            _ => Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                "register as an API node before changing the schema or the SQL accounts, \
                 stopping, starting, restarting or supervising nodes",
            )),
        }
    }
}

fn already_registered(role: Role) -> ShoalError {
    let what = match role {
        Role::DataNode(id) => format!("data node {id}"),
        Role::Api(id) => format!("API node {id}"),
        Role::Unregistered => "nothing".into(),
    };
    ShoalError::with_detail(
        ErrorCode::BadRequest,
        format!("this connection is already registered as {what}"),
    )
}
