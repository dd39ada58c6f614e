//! Durable sleep. `sleep MS` sleeps for MS milliseconds and then answers `woke`: the
//! wake time is logged, so the sleep may outlast the function's time limit and a
//! restart of the node (a long one suspends the invocation; the caller gets 202 with
//! its ID, and `GET /v1/invocations/{id}` shows `sleeping` until it answers `woke`).
//! Any other input is appended to the book under the tag `reminder` (once, however
//! often the invocation runs again) and echoed.

use std::time::Duration;

use tally_sdk::{context, log, Tag};

fn handle(input: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let text = String::from_utf8_lossy(&input);
    if let Some(ms) = text.strip_prefix("sleep ") {
        let ms: u64 = ms.trim().parse().map_err(|_| anyhow::anyhow!("expected `sleep MS`, found {text:?}"))?;
        context::sleep(Duration::from_millis(ms))?;
        return Ok(b"woke".to_vec());
    }
    log::append(&[Tag::named("reminder")], &input)?;
    Ok(input)
}

tally_sdk::handler!(handle);
