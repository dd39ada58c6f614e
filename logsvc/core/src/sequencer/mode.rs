//! The cluster's choice of what an acknowledged append survives, and what a replica
//! that lost unsynced writes remembers of it (see the module docs on `replicated`
//! metalogs).

use crate::store::MetalogWrite;
use crate::types::Term;

/// What an acknowledged append survives: the cluster's choice (`metalog` in the
/// controller's settings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetalogMode {
    /// Every replica syncs an entry before it acknowledges it: an acknowledged append
    /// survives the loss of power of every machine.
    #[default]
    Synced,
    /// Entries are written, not synced, before they are acknowledged (Boki's failure
    /// model): an acknowledged append survives as long as a quorum of each metalog's
    /// sequencers keeps its memory; a power loss of all of them loses the entries none
    /// had synced (at most `unsynced_max_us` of them). Seal promises, lead marks and
    /// truncations are still synced.
    Replicated,
}

impl MetalogMode {
    /// Whether the driver syncs `writes` before the actions after them: always under
    /// `synced`; under `replicated` when they hold more than entries.
    pub fn syncs(self, writes: &[MetalogWrite]) -> bool {
        self == MetalogMode::Synced || writes.iter().any(|w| !matches!(w, MetalogWrite::Entry(_)))
    }
}

/// Which metalogs this replica may have lost unsynced writes of (see the module docs on
/// `replicated` metalogs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Amnesia {
    None,
    /// Lost, and no configuration seen since: any metalog.
    All,
    /// The metalogs of the terms up to this one.
    Through(Term),
}
