//! Tally's node: the [`Runtime`] that joins the exactly-once core (`tally-durable`),
//! the wasmtime host and function registry (`tally-host`) and a state store
//! (`tally-state`) over the shared log; the HTTP gateway; and the all-in-one
//! development node behind `tally dev`. It is the glue, and the one crate that knows
//! HTTP (axum), the configuration file (toml) and the command line (clap, in the `tally`
//! binary). See ARCHITECTURE.md for how the parts fit.

pub mod cluster;
pub mod config;
pub mod dev;
pub mod error;
pub mod gateway;
pub mod node;
pub mod proxy;
pub mod runtime;

pub use config::{Config, Limits, NodeLimits};
pub use error::RuntimeError;
pub use runtime::Runtime;
