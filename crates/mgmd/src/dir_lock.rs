//! A data directory belongs to one process at a time: the process holds
//! an exclusive lock on a file in it for as long as it runs, and a second
//! one pointed at the same directory refuses to start instead of working
//! over the first one's files.
//!
//! The lock is the operating system's (`flock`), so it goes away with the
//! process however it ends (kill -9 included): a stale lock file never
//! blocks a restart. The file also records the holder's pid, for the
//! message the next one prints.

use shoal_types::{ErrorCode, ShoalError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Held while the directory is in use; dropping it releases the lock.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    _file: File,
}

impl DirLock {
    /// Locks `dir` (created if missing) through the file `name` in it, for
    /// `what` (e.g. "mgmd 49"). Fails with `DataDirInUse` if another
    /// process holds it.
    pub fn acquire(dir: &Path, name: &str, what: &str) -> Result<DirLock, ShoalError> {
        let fail = |detail: String| ShoalError::with_detail(ErrorCode::Internal, detail);
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(name);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(ShoalError::with_detail(
                    ErrorCode::DataDirInUse,
                    format!(
                        "{} is in use by another process ({}); stop it first, or give this {what} another directory",
                        dir.display(),
                        if holder.is_empty() { "see ".to_string() + &path.display().to_string() } else { holder.to_string() },
                    ),
                ));
            }
            Err(TryLockError::Error(e)) => {
                return Err(fail(format!("cannot lock {}: {e}", path.display())));
            }
        }
        // Ours now: say who holds it.
        let note = format!("{what}, pid {}\n", std::process::id());
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(note.as_bytes()));
        if let Err(e) = written {
            return Err(fail(format!("cannot write {}: {e}", path.display())));
        }
        Ok(DirLock { path, _file: file })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path(), "lock", "mgmd 49").unwrap();
        let err = DirLock::acquire(dir.path(), "lock", "mgmd 49").unwrap_err();
        assert_eq!(err.code, ErrorCode::DataDirInUse);
        assert!(
            err.detail
                .contains(&format!("mgmd 49, pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        let again = DirLock::acquire(dir.path(), "lock", "mgmd 49").unwrap();
        assert!(again.path().ends_with("lock"));
    }
}
