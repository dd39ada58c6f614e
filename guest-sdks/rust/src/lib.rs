//! Write Tally functions in Rust.
//!
//! A Tally function is a WebAssembly component of world `tally:platform/function`: it
//! gets the invocation's input as bytes and returns bytes or an error message. While it
//! runs it may use the shared log of the book it is bound to ([`log`]), keep
//! exactly-once key-value state in the book's tables ([`state`]) and JSON objects with
//! transactions across them ([`objects`]), pass messages through durable queues
//! ([`queues`]), take locks ([`locks`]), call other functions ([`invoke`]) and ask what
//! the invocation is ([`context`]). It reads its settings with [`config`].
//!
//! An HTTP function ([`http`]) answers requests with a handler declared by
//! [`http_handler!`], and any function may call out with [`http::fetch`].
//!
//! Declare the entry point with [`handler!`] and build the crate as a `cdylib` for
//! `wasm32-wasip2`; the resulting `.wasm` file is the component to deploy.
//!
//! ```
//! use tally_sdk::{log, Tag};
//!
//! /// Each order is a record in the `orders` stream of the book.
//! const ORDERS: Tag = Tag::named("orders");
//!
//! /// Records the order in the input and says which order came before it.
//! fn handle(order: Vec<u8>) -> tally_sdk::Result<String> {
//!     let seqnum = log::append(&[ORDERS], &order)?;
//!     let previous = match seqnum.checked_prev() {
//!         Some(before) => log::read_prev(ORDERS, before)?,
//!         None => None,
//!     };
//!     Ok(match previous {
//!         Some(record) => format!("order {seqnum} follows order {}", record.seqnum),
//!         None => format!("order {seqnum} is the first"),
//!     })
//! }
//!
//! tally_sdk::handler!(handle);
//! ```
//!
//! with this `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "orders"
//! edition = "2021"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! tally-sdk = { path = "../guest-sdks/rust" }
//! ```
//!
//! and `cargo build --release --target wasm32-wasip2` to get
//! `target/wasm32-wasip2/release/orders.wasm`.
//!
//! Calls to the platform return [`Result`]: an [`Error`] is something the function can
//! handle (a lost conditional append, an unavailable log, a failed child, a malformed
//! value). The platform traps the invocation only for a broken guest or a host bug.

#![warn(missing_docs)]

#[doc(hidden)]
pub mod bindings;
pub mod config;
pub mod context;
mod error;
#[cfg(test)]
mod fake;
mod handler;
pub mod http;
pub mod invoke;
pub mod locks;
pub mod log;
pub mod objects;
pub mod queues;
mod seqnum;
pub mod state;
mod tag;

pub use error::{Error, Result};
#[doc(hidden)]
pub use handler::handle_result as __handle_result;
pub use seqnum::SeqNum;
pub use tag::Tag;
#[doc(hidden)]
pub use wasip2 as __wasip2;
