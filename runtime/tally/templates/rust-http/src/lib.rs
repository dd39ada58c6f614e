//! {{name}}: a Tally HTTP function, served at `/fn/{{name}}/...`, that says which
//! request it got.

use std::error::Error;

use tally_sdk::http::{Request, Response};

/// Answers every request; an error (`?`) is answered `500` with its message.
fn handle(request: Request) -> Result<Response, Box<dyn Error>> {
    // Exactly-once state works here as in any function, for example a visit counter:
    //     let visits = tally_sdk::state::get_i64("visits", "all")?.unwrap_or(0) + 1;
    //     tally_sdk::state::put_i64("visits", "all", visits)?;
    // So do calls out, to the destinations named at deploy (`--outbound https://example.com`):
    //     let answer = tally_sdk::http::fetch(Request::get("https://example.com/"))?;
    Ok(Response::text(200, format!("hello from {{name}}: {} {}", request.method, request.uri)))
}

tally_sdk::http_handler!(handle);
