//! The webhook contract, on the Rust SDK: the same test drives every SDK's webhook.
//!
//! - A request that is not a `POST` is answered `405`.
//! - A `POST` whose `x-signature` is not `sha256=<lowercase hex of HMAC-SHA256(key =
//!   setting webhook_secret, message = body)>` is answered `401 bad signature`.
//! - Otherwise the body goes to the setting `upstream` (a `POST`,
//!   `content-type: application/octet-stream`); a failed call or a non-2xx answer is a
//!   `502`. Then the count in state (table `hooks`, key `count`) goes up by one, key
//!   `last` keeps the upstream's answer R, and the function answers `201` with
//!   `<count> <R>`.
//!
//! Nothing is written and nothing is sent before the signature is checked.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tally_sdk::http::{fetch, Request, Response};
use tally_sdk::{config, state};

const TABLE: &str = "hooks";

fn handle(request: Request) -> tally_sdk::Result<Response> {
    if request.method != "POST" {
        return Ok(Response::text(405, "method not allowed"));
    }
    let secret = setting("webhook_secret")?;
    if !signed(&request, &secret) {
        return Ok(Response::text(401, "bad signature"));
    }
    let upstream = setting("upstream")?;
    let sent = Request::post(upstream).header("content-type", "application/octet-stream").body(request.body);
    let answer = match fetch(sent) {
        Ok(answer) if answer.is_success() => answer.body_text(),
        Ok(answer) => return Ok(Response::text(502, format!("upstream answered {}", answer.status))),
        Err(error) => return Ok(Response::text(502, error.to_string())),
    };
    let count = state::get_i64(TABLE, "count")?.unwrap_or(0) + 1;
    state::put_i64(TABLE, "count", count)?;
    state::put(TABLE, "last", &answer)?;
    Ok(Response::text(201, format!("{count} {answer}")))
}

tally_sdk::http_handler!(handle);

/// A setting the deploy must give; its absence is the deployer's mistake, a 500.
fn setting(key: &str) -> tally_sdk::Result<String> {
    config::get(key)?.ok_or_else(|| tally_sdk::Error::NotFound(format!("setting {key}")))
}

/// True if `x-signature` is `sha256=` and the body's HMAC in lowercase hex, compared
/// in constant time (by `verify_slice`), so that the time taken says nothing of how
/// much of a forged signature was right.
fn signed(request: &Request, secret: &str) -> bool {
    let Some(hex) = request.headers.get_str("x-signature").and_then(|value| value.strip_prefix("sha256=")) else {
        return false;
    };
    let Some(signature) = decode_hex(hex) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(&request.body);
    mac.verify_slice(&signature).is_ok()
}

/// Lowercase hex only, as the contract says.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes.chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}
