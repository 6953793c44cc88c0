//! The restore's skip set over a chain of checkpoint files read newest
//! first (see [`ChainIds`]).

use super::redo::RestoreError;
use crate::signal::FragKey;
use shoal_storage::{ChangedRows, RowId};
use std::collections::BTreeMap;

/// Which row ids the checkpoint files read so far hold, per fragment.
///
/// A chain is one full checkpoint and the partial ones after it, and a
/// partial one holds every id that changed since the checkpoint before it
/// passed that id (a row, or a delete for a freed id). So an id's record
/// in the newest file that has one is its state at the end of the chain,
/// and the restore reads the files newest first and skips every older
/// record of an id a newer file held: no row is copied in only to be
/// replaced (a chain holds up to 1 + `lcp_recovery_work_pct` / 100
/// images of a fragment's rows, about one and a half by default). This rests on two facts of the checkpoints: a file
/// holds at most one record per id (its scan passes each id once), and a
/// key is never committed at two ids at once (a transaction's changes to
/// a fragment are applied in one step, never across a scan's step).
///
/// One case needs more than the id: an older file's row whose key a newer
/// file put at another id (the row moved while the newer checkpoint's
/// scan ran). Read oldest first, the newer file would have removed it; so
/// it is dropped (`put_row`), and the chain restores what an oldest-first
/// read gives. (The log from the newest checkpoint's start holds that
/// move too, so the end of the restore would agree either way.)
/// Within one file, later records still win, as before.
#[derive(Default)]
pub(super) struct ChainIds {
    /// Ids held by the files newer than the one being read.
    pub(super) newer: BTreeMap<FragKey, ChangedRows>,
    /// Ids held by the file being read.
    current: BTreeMap<FragKey, ChangedRows>,
    /// The checkpoint id of the file being read (they must come down).
    file: Option<u64>,
}

impl ChainIds {
    /// The file with checkpoint id `id` begins.
    pub(super) fn begin_file(&mut self, id: u64) -> Result<(), RestoreError> {
        if let Some(newer) = self.file.filter(|&f| id >= f) {
            return Err(RestoreError::Failed(format!(
                "checkpoint {id} came after checkpoint {newer}: the files of a chain must be read newest first"
            )));
        }
        self.file = Some(id);
        for (frag, ids) in std::mem::take(&mut self.current) {
            self.newer.entry(frag).or_default().union_with(&ids);
        }
        Ok(())
    }

    /// Whether a file began (rows before any begin record are an error).
    pub(super) fn in_file(&self) -> bool {
        self.file.is_some()
    }

    /// Whether a newer file held `row` of `frag`; if not, the file being
    /// read now does.
    pub(super) fn superseded(&mut self, frag: FragKey, row: RowId) -> bool {
        if self.newer.get(&frag).is_some_and(|ids| ids.contains(row)) {
            return true;
        }
        self.current.entry(frag).or_default().mark(row);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::TableId;

    #[test]
    fn ids_of_newer_files_are_skipped_and_files_must_come_newest_first() {
        let frag = (TableId(7), 0);
        let other = (TableId(7), 1);
        let mut chain = ChainIds::default();
        chain.begin_file(5).unwrap();
        assert!(!chain.superseded(frag, 1));
        // Within the file being read, an id is never superseded.
        assert!(!chain.superseded(frag, 1));
        chain.begin_file(4).unwrap();
        assert!(chain.superseded(frag, 1));
        assert!(!chain.superseded(frag, 2));
        assert!(!chain.superseded(other, 1), "ids are per fragment");
        chain.begin_file(2).unwrap();
        assert!(chain.superseded(frag, 2) && chain.superseded(other, 1));
        for wrong in [2, 3, 9] {
            let err = chain.begin_file(wrong).unwrap_err();
            assert!(err.to_string().contains("newest first"), "{err}");
        }
    }
}
