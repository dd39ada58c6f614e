//! Tally's gateway and processes, over the node (`tally-runtime`): the HTTP gateway in
//! front of a [`Runtime`](tally_runtime::Runtime) (`gateway`), the cluster gateway that
//! forwards a book's requests to its owner (`proxy`), and the processes that compose a
//! node with them: the all-in-one development node behind `tally dev` (`dev`), one role
//! process of a cluster behind `tally node` (`node`), and local clusters of such
//! processes (`cluster`). The `tally` binary's CLI is in `main.rs` and `cli/`. This is
//! the crate that knows HTTP (axum) and the command line (clap); the node does not
//! depend on it. See ARCHITECTURE.md for how the parts fit.

pub mod auth;
pub mod cluster;
pub mod dev;
pub mod gateway;
pub mod node;
pub mod proxy;
pub mod shares;
pub mod tls;
