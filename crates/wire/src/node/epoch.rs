//! Node signals of the epoch protocol (NDB's global checkpoint, run by
//! the president's DIH): every committed transaction belongs to one
//! epoch on all its replicas; an epoch is durable once every live node
//! has synced its redo log through it; a whole-cluster restart restores
//! the newest epoch every node group holds whole. docs/PROTOCOL.md §11.
//!
//! Every signal names the node it is for (`to`, written by
//! `ClusterSignal::encode_body` before the body here).

use crate::frame::WireError;
use crate::signals::{put_u64, Reader};

pub const GSN_EPOCH_PREPARE: u16 = 55;
pub const GSN_EPOCH_PREPARE_CONF: u16 = 56;
pub const GSN_EPOCH_COMMIT: u16 = 57;
pub const GSN_EPOCH_PROGRESS: u16 = 58;
pub const GSN_EPOCH_SAVE: u16 = 59;
pub const GSN_EPOCH_DURABLE: u16 = 60;
pub const GSN_EPOCH_RESTORE: u16 = 61;
/// The last epoch GSN.
pub const GSN_EPOCH_LAST: u16 = GSN_EPOCH_RESTORE;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpochSignal {
    /// President → members: hold every new commit decision; the next
    /// epoch will be `epoch`.
    Prepare { to: u16, epoch: u64 },
    /// Member → president: holding for `epoch`.
    PrepareConf { to: u16, epoch: u64 },
    /// President → members: commits decided from now on belong to
    /// `epoch`; release the held ones.
    Commit { to: u16, epoch: u64 },
    /// Member → president: every transaction this node coordinates of an
    /// epoch up to `completed` is committed on every replica, and this
    /// node's redo log is synced through epoch `saved`. Both only grow,
    /// so a repeat or a copy to a new president is harmless.
    Progress { to: u16, completed: u64, saved: u64 },
    /// President → members: every transaction of epochs up to `epoch` is
    /// complete everywhere; log the end of `epoch` and sync the log.
    Save { to: u16, epoch: u64 },
    /// President → members: `epoch` is durable on every live node.
    Durable { to: u16, epoch: u64 },
    /// President → members of a cluster just formed: bring your rows to
    /// the end of `epoch` (the newest one every node group holds whole)
    /// before serving; the next epoch is `epoch + 1`.
    Restore { to: u16, epoch: u64 },
}

impl EpochSignal {
    pub fn to(&self) -> u16 {
        match self {
            EpochSignal::Prepare { to, .. }
            | EpochSignal::PrepareConf { to, .. }
            | EpochSignal::Commit { to, .. }
            | EpochSignal::Progress { to, .. }
            | EpochSignal::Save { to, .. }
            | EpochSignal::Durable { to, .. }
            | EpochSignal::Restore { to, .. } => *to,
        }
    }

    pub(crate) fn set_to(&mut self, node: u16) {
        match self {
            EpochSignal::Prepare { to, .. }
            | EpochSignal::PrepareConf { to, .. }
            | EpochSignal::Commit { to, .. }
            | EpochSignal::Progress { to, .. }
            | EpochSignal::Save { to, .. }
            | EpochSignal::Durable { to, .. }
            | EpochSignal::Restore { to, .. } => *to = node,
        }
    }

    pub fn gsn(&self) -> u16 {
        match self {
            EpochSignal::Prepare { .. } => GSN_EPOCH_PREPARE,
            EpochSignal::PrepareConf { .. } => GSN_EPOCH_PREPARE_CONF,
            EpochSignal::Commit { .. } => GSN_EPOCH_COMMIT,
            EpochSignal::Progress { .. } => GSN_EPOCH_PROGRESS,
            EpochSignal::Save { .. } => GSN_EPOCH_SAVE,
            EpochSignal::Durable { .. } => GSN_EPOCH_DURABLE,
            EpochSignal::Restore { .. } => GSN_EPOCH_RESTORE,
        }
    }

    /// The body after `to`.
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            EpochSignal::Prepare { epoch, .. }
            | EpochSignal::PrepareConf { epoch, .. }
            | EpochSignal::Commit { epoch, .. }
            | EpochSignal::Save { epoch, .. }
            | EpochSignal::Durable { epoch, .. }
            | EpochSignal::Restore { epoch, .. } => put_u64(out, *epoch),
            EpochSignal::Progress {
                completed, saved, ..
            } => {
                put_u64(out, *completed);
                put_u64(out, *saved);
            }
        }
    }

    /// Decodes the body of epoch signal `gsn` after `to`; `None` if
    /// `gsn` is not an epoch signal.
    pub(crate) fn decode(
        gsn: u16,
        to: u16,
        r: &mut Reader<'_>,
    ) -> Result<Option<EpochSignal>, WireError> {
        Ok(Some(match gsn {
            GSN_EPOCH_PREPARE => EpochSignal::Prepare {
                to,
                epoch: r.u64("epoch")?,
            },
            GSN_EPOCH_PREPARE_CONF => EpochSignal::PrepareConf {
                to,
                epoch: r.u64("epoch")?,
            },
            GSN_EPOCH_COMMIT => EpochSignal::Commit {
                to,
                epoch: r.u64("epoch")?,
            },
            GSN_EPOCH_PROGRESS => EpochSignal::Progress {
                to,
                completed: r.u64("completed")?,
                saved: r.u64("saved")?,
            },
            GSN_EPOCH_SAVE => EpochSignal::Save {
                to,
                epoch: r.u64("epoch")?,
            },
            GSN_EPOCH_DURABLE => EpochSignal::Durable {
                to,
                epoch: r.u64("epoch")?,
            },
            GSN_EPOCH_RESTORE => EpochSignal::Restore {
                to,
                epoch: r.u64("epoch")?,
            },
            _ => return Ok(None),
        }))
    }
}

#[cfg(test)]
pub(crate) fn samples() -> Vec<EpochSignal> {
    vec![
        EpochSignal::Prepare { to: 2, epoch: 7 },
        EpochSignal::PrepareConf { to: 1, epoch: 7 },
        EpochSignal::Commit { to: 3, epoch: 7 },
        EpochSignal::Progress {
            to: 1,
            completed: 5,
            saved: 4,
        },
        EpochSignal::Save { to: 4, epoch: 5 },
        EpochSignal::Durable {
            to: 4,
            epoch: 1 << 40,
        },
        EpochSignal::Restore { to: 2, epoch: 0 },
    ]
}
