//! mgmd's durable files, all in its data dir and all JSON:
//!
//! - `schema.json`: the tables, the next table id and the SQL databases;
//! - `starts.json`: per data node, how many times it registered (the
//!   incarnation handed to it, NDB's start number);
//! - `arbitration.json`: the arbitrator's last survival grant;
//! - `users.json`: the SQL accounts, with password hashes and grants
//!   (`server::users`).
//!
//! Invariants:
//! - Every file is replaced atomically (temp file, fsync, rename, fsync of
//!   the directory), so a crash leaves either the old or the new content.
//! - Each file carries a format version and the cluster id; a file with
//!   another version, another cluster id, bad JSON or inconsistent content
//!   is refused at start with an error that names it. mgmd never starts on
//!   a state it cannot trust (it could hand out an incarnation twice or
//!   grant both sides of a split).
//! - A missing file is an empty state (a fresh cluster); for `users.json`
//!   that is the fresh cluster's `root` accounts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shoal_types::arbitration::Grant;
use shoal_types::{ErrorCode, ShoalError, TableDef};

use crate::config::NODE_ID_MAX;
use crate::server::users::{self, Accounts};

/// Name of the schema file inside the mgmd data dir.
pub const SCHEMA_FILE: &str = "schema.json";
/// Version of the schema file layout; a file with another version is refused.
pub const SCHEMA_FORMAT_VERSION: u32 = 1;
/// Name of the start-number file inside the mgmd data dir.
pub const STARTS_FILE: &str = "starts.json";
pub const STARTS_FORMAT_VERSION: u32 = 1;
/// Name of the arbitration file inside the mgmd data dir.
pub const ARBITRATION_FILE: &str = "arbitration.json";
pub const ARBITRATION_FORMAT_VERSION: u32 = 1;
/// Name of the SQL accounts file inside the mgmd data dir.
pub const USERS_FILE: &str = "users.json";
pub const USERS_FORMAT_VERSION: u32 = 1;

fn mgmd_err(detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(ErrorCode::MgmdFailure, detail)
}

/// The schema file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SchemaFile {
    pub format_version: u32,
    pub cluster_id: u64,
    /// The id the next created table gets; ids are never reused.
    pub next_table_id: u32,
    pub tables: Vec<TableDef>,
    /// SQL databases (`CREATE DATABASE`); a table named `db.t` belongs to
    /// database `db`, which must be listed here. Absent in files written
    /// before databases existed: none.
    #[serde(default)]
    pub databases: BTreeSet<String>,
}

/// The start-number file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StartsFile {
    format_version: u32,
    cluster_id: u64,
    /// Data node id → registrations so far (the last incarnation handed out).
    starts: BTreeMap<u16, u32>,
}

/// The arbitration file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ArbitrationFile {
    format_version: u32,
    cluster_id: u64,
    /// `None` = the arbitrator never granted anything.
    grant: Option<GrantRecord>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct GrantRecord {
    view: u64,
    /// The newest view the granted side knew of (absent in files from
    /// before it was recorded: the view itself).
    #[serde(default)]
    newest: Option<u64>,
    survivors: BTreeSet<u16>,
    /// When it was granted (for an operator reading the file).
    #[serde(default)]
    granted_at_unix_ms: u64,
}

/// The accounts file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct UsersFile {
    format_version: u32,
    cluster_id: u64,
    /// By user, then host.
    accounts: Vec<crate::proto::UserAccount>,
}

/// The directory holding mgmd's files.
pub(crate) struct Store {
    pub dir: PathBuf,
}

impl Store {
    /// Creates the directory if needed.
    pub fn open(dir: &Path) -> Result<Store, ShoalError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            mgmd_err(format!(
                "cannot create mgmd data dir {}: {e}",
                dir.display()
            ))
        })?;
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    /// Reads `name`, `None` if it does not exist; bad JSON names the file.
    fn read<T: DeserializeOwned>(&self, name: &str, what: &str) -> Result<Option<T>, ShoalError> {
        let path = self.dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(mgmd_err(format!("cannot read {}: {e}", path.display()))),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| mgmd_err(format!("{what} file {} is corrupt: {e}", path.display())))
    }

    /// Refuses a file written by another layout or for another cluster.
    fn check_header(
        &self,
        name: &str,
        what: &str,
        (version, want_version): (u32, u32),
        (cluster_id, want_cluster_id): (u64, u64),
    ) -> Result<(), ShoalError> {
        let path = self.dir.join(name);
        if version != want_version {
            return Err(mgmd_err(format!(
                "{what} file {} has format version {version}, this mgmd reads version {want_version}",
                path.display()
            )));
        }
        if cluster_id != want_cluster_id {
            return Err(mgmd_err(format!(
                "{what} file {} belongs to cluster id {cluster_id}, the config says cluster id {want_cluster_id}",
                path.display()
            )));
        }
        Ok(())
    }

    fn inconsistent(&self, name: &str, what: &str, detail: String) -> ShoalError {
        mgmd_err(format!(
            "{what} file {} is inconsistent: {detail}",
            self.dir.join(name).display()
        ))
    }

    /// Reads the schema, or an empty one if the file does not exist yet.
    pub fn load_schema(&self, cluster_id: u64) -> Result<SchemaFile, ShoalError> {
        let Some(file) = self.read::<SchemaFile>(SCHEMA_FILE, "schema")? else {
            return Ok(SchemaFile {
                format_version: SCHEMA_FORMAT_VERSION,
                cluster_id,
                next_table_id: 1,
                tables: Vec::new(),
                databases: BTreeSet::new(),
            });
        };
        self.check_header(
            SCHEMA_FILE,
            "schema",
            (file.format_version, SCHEMA_FORMAT_VERSION),
            (file.cluster_id, cluster_id),
        )?;
        for d in &file.databases {
            if shoal_types::schema::check_database_name(d).is_err() {
                return Err(self.inconsistent(
                    SCHEMA_FILE,
                    "schema",
                    format!("at database {d:?} (not a valid name)"),
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for t in &file.tables {
            let orphan = shoal_types::schema::database_of(&t.name)
                .is_some_and(|d| !file.databases.contains(d));
            let bad = t.id.0 == 0
                || t.id.0 >= file.next_table_id
                || !seen.insert(t.name.clone())
                || orphan;
            if bad {
                return Err(self.inconsistent(
                    SCHEMA_FILE,
                    "schema",
                    format!("at table `{}` (id {})", t.name, t.id),
                ));
            }
        }
        Ok(file)
    }

    pub async fn save_schema(&self, file: SchemaFile) -> Result<(), ShoalError> {
        self.save(SCHEMA_FILE, file).await
    }

    /// Reads the start numbers (data node id → registrations so far).
    pub fn load_starts(&self, cluster_id: u64) -> Result<BTreeMap<u16, u32>, ShoalError> {
        let Some(file) = self.read::<StartsFile>(STARTS_FILE, "start-number")? else {
            return Ok(BTreeMap::new());
        };
        self.check_header(
            STARTS_FILE,
            "start-number",
            (file.format_version, STARTS_FORMAT_VERSION),
            (file.cluster_id, cluster_id),
        )?;
        for (&node_id, &starts) in &file.starts {
            if node_id == 0 || node_id > NODE_ID_MAX || starts == 0 {
                return Err(self.inconsistent(
                    STARTS_FILE,
                    "start-number",
                    format!("node {node_id} with {starts} start(s)"),
                ));
            }
        }
        Ok(file.starts)
    }

    pub async fn save_starts(
        &self,
        cluster_id: u64,
        starts: BTreeMap<u16, u32>,
    ) -> Result<(), ShoalError> {
        let file = StartsFile {
            format_version: STARTS_FORMAT_VERSION,
            cluster_id,
            starts,
        };
        self.save(STARTS_FILE, file).await
    }

    /// Reads the arbitrator's last grant.
    pub fn load_arbitration(&self, cluster_id: u64) -> Result<Option<Grant>, ShoalError> {
        let Some(file) = self.read::<ArbitrationFile>(ARBITRATION_FILE, "arbitration")? else {
            return Ok(None);
        };
        self.check_header(
            ARBITRATION_FILE,
            "arbitration",
            (file.format_version, ARBITRATION_FORMAT_VERSION),
            (file.cluster_id, cluster_id),
        )?;
        let Some(g) = file.grant else {
            return Ok(None);
        };
        if g.survivors.is_empty() || g.survivors.iter().any(|&n| n == 0 || n > NODE_ID_MAX) {
            return Err(self.inconsistent(
                ARBITRATION_FILE,
                "arbitration",
                format!("grant of view {} to nodes {:?}", g.view, g.survivors),
            ));
        }
        Ok(Some(Grant {
            view: g.view,
            newest: g.newest.unwrap_or(g.view).max(g.view),
            survivors: g.survivors,
        }))
    }

    pub async fn save_arbitration(&self, cluster_id: u64, grant: &Grant) -> Result<(), ShoalError> {
        let granted_at_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let file = ArbitrationFile {
            format_version: ARBITRATION_FORMAT_VERSION,
            cluster_id,
            grant: Some(GrantRecord {
                view: grant.view,
                newest: Some(grant.newest),
                survivors: grant.survivors.clone(),
                granted_at_unix_ms,
            }),
        };
        self.save(ARBITRATION_FILE, file).await
    }

    /// Reads the SQL accounts; without a file, a fresh cluster's.
    pub fn load_users(&self, cluster_id: u64) -> Result<Accounts, ShoalError> {
        let Some(file) = self.read::<UsersFile>(USERS_FILE, "accounts")? else {
            return Ok(users::default_accounts());
        };
        self.check_header(
            USERS_FILE,
            "accounts",
            (file.format_version, USERS_FORMAT_VERSION),
            (file.cluster_id, cluster_id),
        )?;
        let mut accounts = Accounts::new();
        for a in &file.accounts {
            let checked = users::checked_account(a).map_err(|e| {
                self.inconsistent(
                    USERS_FILE,
                    "accounts",
                    format!("at account {}: {}", a.name(), e.detail),
                )
            })?;
            if accounts.insert(checked.name(), checked).is_some() {
                return Err(self.inconsistent(
                    USERS_FILE,
                    "accounts",
                    format!("account {} is listed twice", a.name()),
                ));
            }
        }
        users::check_totals(&accounts)
            .map_err(|e| self.inconsistent(USERS_FILE, "accounts", e.detail))?;
        Ok(accounts)
    }

    pub async fn save_users(&self, cluster_id: u64, accounts: &Accounts) -> Result<(), ShoalError> {
        let file = UsersFile {
            format_version: USERS_FORMAT_VERSION,
            cluster_id,
            accounts: accounts.values().cloned().collect(),
        };
        self.save(USERS_FILE, file).await
    }

    /// Replaces `name` atomically on the blocking pool (fsync can take
    /// milliseconds; the async workers keep serving meanwhile).
    async fn save<T: Serialize + Send + 'static>(
        &self,
        name: &'static str,
        content: T,
    ) -> Result<(), ShoalError> {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || write_atomically(&dir, name, &content))
            .await
            .map_err(|e| mgmd_err(format!("writer task for {name} failed: {e}")))?
    }
}

/// Creates (or truncates) `path` readable and writable by its owner only:
/// users.json holds password hashes, and nothing mgmd keeps is for other
/// local users. The mode is set again on an existing file (a temp file a
/// crash left behind keeps the mode it was made with).
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let f = options.open(path)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(f)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Replaces `dir/name` with `content` as JSON: write a temp file, fsync it,
/// rename it over the old one, fsync the directory (so the rename itself
/// survives a crash).
pub(crate) fn write_atomically<T: Serialize>(
    dir: &Path,
    name: &str,
    content: &T,
) -> Result<(), ShoalError> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let fail =
        |what: &str, e: std::io::Error| mgmd_err(format!("cannot {what} {}: {e}", path.display()));
    let bytes = serde_json::to_vec_pretty(content)
        .map_err(|e| mgmd_err(format!("cannot encode {}: {e}", path.display())))?;
    let mut f = private_file(&tmp).map_err(|e| fail("create temp file for", e))?;
    f.write_all(&bytes).map_err(|e| fail("write", e))?;
    f.sync_all().map_err(|e| fail("fsync", e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| fail("rename temp file onto", e))?;
    let d = std::fs::File::open(dir).map_err(|e| fail("open directory of", e))?;
    d.sync_all().map_err(|e| fail("fsync directory of", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn written_files_are_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let mode = |name: &str| {
            std::fs::metadata(dir.path().join(name))
                .expect("metadata")
                .permissions()
                .mode()
                & 0o777
        };
        write_atomically(dir.path(), "users.json", &vec!["hash"]).expect("write");
        assert_eq!(mode("users.json"), 0o600);
        // A temp file a crash left world-readable does not stay so.
        let tmp = dir.path().join("users.json.tmp");
        std::fs::write(&tmp, b"old").expect("write tmp");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_atomically(dir.path(), "users.json", &vec!["hash2"]).expect("rewrite");
        assert_eq!(mode("users.json"), 0o600);
        let back: Vec<String> =
            serde_json::from_slice(&std::fs::read(dir.path().join("users.json")).expect("read"))
                .expect("json");
        assert_eq!(back, vec!["hash2".to_string()]);
    }
}
