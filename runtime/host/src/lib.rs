//! Tally's wasmtime host: user functions (Wasm components of world
//! `tally:platform/function`) run in a fresh instance per invocation under their limits,
//! with the `log`, `state`, `objects`, `queues`, `locks`, `invoke` and `context` imports;
//! the function registry, kept in a platform book of the shared log, that deploys and loads
//! them; and [`HostFunctions`], the exactly-once core's `Functions` on both, with tokio as
//! its `Clock` and `Spawn` ([`Tokio`]). Beside them: [`Limits`] and [`NodeLimits`]
//! (`limits.rs`), which the node's configuration holds and the host applies, and
//! [`Metrics`] (`metrics.rs`), the node's one set of counters, which the host updates and
//! the gateway renders.
//!
//! ```text
//!   tally_durable::Durable ── Functions::run(Attempt) ──► HostFunctions (functions.rs)
//!                                                          │ version by manifest seqnum
//!                 Registry (registry.rs) ◄─────────────────┤
//!                   manifests and chunks in PLATFORM_BOOK   ▼
//!                                              WasmHost::run (host/): fresh Store and
//!                                              instance, deadline, memory limiter;
//!                                              imports: one file per WIT interface
//! ```
//!
//! **Architecture Invariant:** the host knows functions, not how they are reached or
//! where their state is: it depends on wasmtime, the exactly-once core (the guest's
//! `state` and `invoke` go to its `Attempt`), the log's client and tokio, and never on
//! an HTTP server, the configuration file's format, the command line or a state store
//! (no axum, toml, clap, rocksdb or tokio-postgres in its Cargo.toml; rocksdb and clap
//! still come in through `tally-logsvc`, for its nodes and its `sim` binary, unused
//! here). Those are `tally`'s, `tally-runtime`'s and `tally-state`'s; `tally-runtime` depends on
//! this crate, never the other way, and `tally-state` and this crate know nothing of
//! each other.
//!
//! This is the one crate that knows wasmtime: what an invocation means is the exactly-once
//! core's, how it arrives is the gateway's.

mod clock;
mod functions;
/// What the host takes from outside, for the fuzz targets of `tally-fuzz`.
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod host;
mod limits;
mod logs;
mod message;
mod metrics;
pub mod observe;
mod outbound;
mod registry;
mod routes;
mod settings;

pub use clock::Tokio;
pub use functions::HostFunctions;
pub use host::{Invocation, Line, Output, Prepared, WasmHost};
pub use limits::{Limits, NodeLimits, OUTGOING_RESPONSE_BYTES_CAP};
pub use logs::{LogEntry, LogQuery, LogSource, LogStore};
pub use message::{Fields, HttpRequest, HttpResponse};
pub use metrics::Metrics;
pub use outbound::{Destination, Outbound};
pub use registry::{
    check_name, decode_manifest, Change as RegistryChange, DeploySpec, FunctionInfo, Loaded, Registry, VersionInfo, REGISTRY_BOOK,
};
pub use routes::{parse_routes, Route};
pub use settings::{check_key, Listed, Listing, SecretsKey, Setting, Values};
