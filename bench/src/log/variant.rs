//! How the clusters of the append cases store records and metalog entries, and what a
//! case name says of it.

use tally_logsvc::store::RecordStoreKind;
use tally_logsvc::MetalogMode;

/// The record stores the clusters and raw stores run on: the default first.
pub(super) const STORES: [RecordStoreKind; 2] = [RecordStoreKind::Journal, RecordStoreKind::Rocksdb];

/// What a case name says of a record store: nothing for the default.
pub(super) fn store_suffix(store: RecordStoreKind) -> &'static str {
    match store {
        RecordStoreKind::Journal => "",
        RecordStoreKind::Rocksdb => ",store=rocksdb",
    }
}

/// How a cluster of the append cases stores records and metalog entries.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct Variant {
    pub(super) store: RecordStoreKind,
    pub(super) metalog: MetalogMode,
}

/// The clusters of the append cases, the default first: each record store, and the
/// replicated metalog (the cluster's other choice) on the default one.
pub(super) const VARIANTS: [Variant; 3] = [
    Variant { store: RecordStoreKind::Journal, metalog: MetalogMode::Synced },
    Variant { store: RecordStoreKind::Rocksdb, metalog: MetalogMode::Synced },
    Variant { store: RecordStoreKind::Journal, metalog: MetalogMode::Replicated },
];

impl Variant {
    /// What a case name says of it: nothing for the default.
    pub(super) fn suffix(self) -> String {
        let metalog = match self.metalog {
            MetalogMode::Synced => "",
            MetalogMode::Replicated => ",metalog=replicated",
        };
        format!("{}{metalog}", store_suffix(self.store))
    }
}
