//! Identifier newtypes. Each wraps the fixed-width integer that goes on the
//! wire, so a table id can never be passed where a node id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A node of the cluster (mgmd, data node or API node), 1..=255.
    NodeId(u16)
);
id_type!(
    /// A table, assigned by mgmd when the table is created; never reused.
    TableId(u32)
);
id_type!(
    /// A table's schema version; bumped by every schema change to the table.
    SchemaVersion(u32)
);
id_type!(
    /// A transaction id, unique per API connection (chosen by the client).
    TransId(u64)
);

/// The largest node id a cluster may use (as in NDB).
pub const NODE_ID_MAX: u16 = 255;
