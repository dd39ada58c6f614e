//! The `http` suite's third group: the webhook of every SDK language, to the contract
//! of `runtime/tally/tests/webhooks.rs`.
//!
//! ```text
//!   C clients ──POST /fn/hook-<lang>/hook, x-signature: sha256=HMAC(secret, body)──►
//!       DevNode ──► <lang>-webhook: check the signature, ──POST /sink──► upstream,
//!                   count the webhook in the table `hooks` ──► 201 "<count> ok"
//! ```
//!
//! Each language's component is deployed under its own name, on its own book, with the
//! upstream as a setting and the secret as a secret setting; requests are signed and
//! carry no idempotency key. A component missing from the guests directory is reported
//! as missing and skipped.

use std::path::Path;

use anyhow::ensure;
use sha2::{Digest as _, Sha256};

use crate::http::Http;
use crate::http_fns::{deploy, Requester};
use crate::invoke::{measure_ops, Plan};
use crate::report::Report;

/// The webhook in every language: the case's target name and the component.
const LANGUAGES: [(&str, &str); 5] = [
    ("hook-rust", "webhook"),
    ("hook-python", "python-webhook"),
    ("hook-js", "js-webhook"),
    ("hook-go", "go-webhook"),
    ("hook-c", "c-webhook"),
];
/// The first language's book; the others follow.
const FIRST_BOOK: u64 = 11;
const SECRET: &str = "whsec-bench-shared-with-the-sender";
const EVENT: &[u8] = br#"{"type":"payment.succeeded","id":"evt_bench"}"#;

/// Deploys the webhook of every language found and measures them in interleaved slices.
pub(crate) fn measure(report: &mut Report, plan: &Plan, url: &str, guests: &Path, port: u16) -> anyhow::Result<()> {
    let settings = serde_json::json!({
        "upstream": { "value": format!("http://127.0.0.1:{port}/sink") },
        "webhook_secret": { "value": SECRET, "secret": true },
    })
    .to_string();
    let query = format!("?tables=hooks:read-optimized&outbound=http%3A%2F%2F127.0.0.1%3A{port}");
    let mut found = Vec::new();
    for (i, (name, file)) in LANGUAGES.into_iter().enumerate() {
        let path = guests.join(format!("{file}.wasm"));
        let Ok(component) = std::fs::read(&path) else {
            eprintln!("http: MISSING: {} (no {}); not measured", name, path.display());
            report.record(name, "component_missing", 1.0, "flag")?;
            continue;
        };
        eprintln!("http: deploying {file} as {name}");
        deploy(url, name, &query, &[("tally-settings", &settings)], &component)?;
        found.push((name, FIRST_BOOK + i as u64));
    }
    if found.is_empty() {
        return Ok(());
    }
    let signature = format!("x-signature: sha256={}\r\n", hmac_hex(SECRET.as_bytes(), EVENT));
    let names: Vec<&str> = found.iter().map(|(name, _)| *name).collect();
    let new_op = |i: usize| {
        let (name, book) = found[i];
        Ok(Requester {
            http: Http::new(&format!("{url}/fn/{name}/hook"))?,
            name,
            method: "POST",
            headers: format!("{signature}tally-book: {book}\r\n"),
            body: EVENT.to_vec(),
            check: check_webhook,
            keys: None,
        })
    };
    measure_ops(report, "http", &names, plan, new_op, |_, _| Ok(()))
}

/// A webhook's answer: 201 `<count> ok`, the count the webhooks so far (at least one).
fn check_webhook(name: &str, status: u16, body: &[u8]) -> anyhow::Result<()> {
    let text = String::from_utf8_lossy(body);
    let count = text.strip_suffix(" ok").and_then(|c| c.parse::<u64>().ok());
    ensure!(status == 201 && count.is_some_and(|c| c > 0), "{name} answered {status} with {text:?}, not 201 with \"<count> ok\"");
    Ok(())
}

/// HMAC-SHA256 (RFC 2104), as lowercase hex.
fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_rfc_4231_says() {
        assert_eq!(
            hmac_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn webhook_answers_are_checked() {
        assert!(check_webhook("h", 201, b"17 ok").is_ok());
        assert!(check_webhook("h", 201, b"0 ok").is_err());
        assert!(check_webhook("h", 200, b"1 ok").is_err());
        assert!(check_webhook("h", 201, b"bad signature").is_err());
    }
}
