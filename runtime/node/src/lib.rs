//! Tally's node: the [`Runtime`] that joins the exactly-once core (`tally-durable`),
//! the wasmtime host and function registry (`tally-host`) and a state store
//! (`tally-state`) over the shared log, and the node's [`Config`]. It is the glue, and
//! knows the configuration file (toml) but not HTTP or the command line: the gateway,
//! the processes that serve it and the CLI are the `tally` crate's, above this one. See
//! ARCHITECTURE.md for how the parts fit.

pub mod config;
pub mod error;
pub mod runtime;

pub use config::{Config, Limits, NodeLimits};
pub use error::RuntimeError;
pub use runtime::Runtime;
