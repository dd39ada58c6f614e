//! Tally's control plane: what the processes of one cluster agree on through etcd v3.
//!
//! A cluster of `tally node` processes keeps four kinds of keys in etcd, all under
//! `/tally/<cluster>/`:
//!
//! ```text
//! /tally/<cluster>/config        the current Configuration: a format byte (2) + bincode.
//!                                Written only by the leading controller, always with a
//!                                compare-and-swap on the mod revision it loaded.
//! /tally/<cluster>/settings      Settings (JSON), written once by the first controller to
//!                                start (create-if-absent); read by every later one. Only
//!                                n_logs changes after that: set_n_logs raises it.
//! /tally/<cluster>/leader        the leading controller's node id (decimal), under the
//!                                leader's lease; created only if absent.
//! /tally/<cluster>/members/<id>  one Member (JSON) per registered node id, under that
//!                                node's lease; written by the node itself.
//! ```
//!
//! A [`ControlPlane`] talks to one etcd member at a time and fails over to the next
//! when that one fails; every call is bounded (2 s) and a failure to reach etcd is
//! [`Error::Etcd`], which [`Error::is_transient`] says is worth trying again.
//!
//! Ground truth is etcd; everything a [`ControlPlane`] hands out (a watched member map,
//! a [`Leadership`]'s `lost` flag) is derived from it and may lag behind.
//!
//! **Safety does not rest on leadership.** Two controllers that both believe they lead
//! (one lost its lease without noticing yet) can never install different next
//! configurations: [`ControlPlane::cas_config`] succeeds only against the revision its
//! caller loaded, so the second writer gets [`Error::Superseded`]. Leadership is for
//! liveness (one controller acts, the others stand by); a leader still checks
//! [`Leadership::lost`] before it writes, so that it stops acting as soon as it can know.
//!
//! Architecture Invariant: this crate knows etcd and the key layout; it knows nothing of
//! the log protocol beyond storing a [`Configuration`](tally_log_core::Configuration)
//! whole. The `testing` feature adds [`TempEtcd`], a throwaway etcd on loopback.

mod election;
mod endpoints;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod lease;
mod members;
mod plane;
#[cfg(feature = "testing")]
mod temp_etcd;

pub use election::Leadership;
pub use error::{Error, Result};
pub use members::{Member, MemberRole, Registration};
pub use plane::{ControlPlane, IndexShape, Revision, Settings};

/// The name etcd's members are certified for (besides their addresses): what a client
/// checks their certificates against.
pub const ETCD_SERVER_NAME: &str = "etcd.tally.local";

/// How a client reaches etcd over TLS: the CA that issued etcd's certificates, and the
/// client's own certificate and key (etcd asks for one), all PEM.
#[derive(Clone)]
pub struct EtcdTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}
#[cfg(feature = "testing")]
pub use temp_etcd::TempEtcd;
