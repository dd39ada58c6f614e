//! HTTP functions and calls out, on wasi:http.
//!
//! An HTTP function answers requests at `/fn/NAME/...` on the gateway (and at the
//! routes given at deploy). Write a handler from [`Request`] to [`Response`] and declare
//! it with [`http_handler!`](crate::http_handler); the component then exports
//! `wasi:http/incoming-handler`, and everything else in the SDK (state, the log,
//! invocations, objects, ...) works inside the handler as in any function. An HTTP
//! request is one invocation, exactly-once like the others.
//!
//! [`fetch`] sends a request out, from any function, to the destinations named at
//! deploy (`tally deploy --outbound https://api.example.com`).
//!
//! Bodies are read and sent whole, in memory: the platform's limits bound them
//! (`request_bytes_max` and `response_bytes_max` for the function's own request and
//! response, `outgoing_request_bytes_max` and `outgoing_response_bytes_max`, at most
//! 768 KiB, for calls out). A function that needs streaming or trailers can use
//! wasi:http directly (the `wasip2` crate), as any `wasmtime serve` component does.

mod fetch;
mod headers;
mod message;
mod serve;
mod wasi;

pub use fetch::{fetch, FetchError};
pub use headers::Headers;
pub use message::{IntoResponse, Request, Response};
#[doc(hidden)]
pub use serve::serve as __serve;
