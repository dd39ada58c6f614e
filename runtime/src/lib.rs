//! Tally's function runtime: the wasmtime host, the function registry in the shared
//! log, the HTTP gateway, and the all-in-one development node behind `tally dev`.
//! See ARCHITECTURE.md for how the parts fit.

pub mod config;
pub mod dev;
mod env;
pub mod error;
mod functions;
pub mod gateway;
pub mod host;
pub mod metrics;
pub mod registry;
pub mod runtime;

pub use config::{Config, Limits, NodeLimits};
pub use error::RuntimeError;
pub use runtime::Runtime;
