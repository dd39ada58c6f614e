//! {{name}}: a Tally HTTP function, served at `/fn/{{name}}/...`, that says which
//! request it got.

use tally_sdk::http::{Request, Response};

fn handle(request: Request) -> tally_sdk::Result<Response> {
    // Exactly-once state works here as in any function, for example a visit counter:
    //     let visits = tally_sdk::state::get_i64("visits", "all")?.unwrap_or(0) + 1;
    //     tally_sdk::state::put_i64("visits", "all", visits)?;
    // and so do calls out, to destinations named at deploy with `--outbound`:
    //     let answer = tally_sdk::http::fetch(Request::get("https://example.com/"))?;
    Ok(Response::text(200, format!("hello from {{name}}: {} {}", request.method, request.uri)))
}

tally_sdk::http_handler!(handle);
