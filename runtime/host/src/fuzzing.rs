//! What the host takes from outside, as `tally-fuzz` calls it: an HTTP function's
//! request as wasi:http gets it, the origin of a guest's request out, and a function's
//! sealed secrets as the registry's manifests carry them.

use std::collections::BTreeMap;

use crate::message::HttpRequest;
use crate::settings::{SecretsKey, Setting, Settings, Stored};

/// The request an HTTP function's input encodes, built as the host hands it to the
/// guest (`Err`: refused as not a valid HTTP request).
pub fn request_to_guest(request: HttpRequest) -> Result<(), String> {
    crate::host::to_hyper(request).map(|_| ()).map_err(|e| e.to_string())
}

/// The host and port a guest's request to `scheme://authority` is checked as.
pub fn outgoing_origin(scheme: &str, authority: &str) -> (String, u16) {
    crate::host::origin(scheme, authority)
}

/// The node's secrets key the functions below seal and open with.
const KEY: [u8; 32] = [7; 32];

fn settings() -> Settings {
    Settings::new(Some(SecretsKey::new(&KEY).expect("a key of 32 bytes")))
}

/// Setting `key` of `function` sealed as a manifest carries it (hex of the nonce and
/// the sealed value), or why it is refused.
pub fn seal_secret(function: &str, key: &str, value: &str) -> Result<String, String> {
    let set = BTreeMap::from([(key.to_string(), Setting { value: value.to_string(), secret: true })]);
    match settings().seal(function, &set, &[]).map_err(|e| e.to_string())?.remove(key) {
        Some(Stored::Secret(sealed)) => Ok(sealed),
        other => panic!("a secret was sealed as {other:?}"),
    }
}

/// What a guest of `function` reads for `key` when a manifest carries `sealed` for it.
pub fn open_secret(function: &str, key: &str, sealed: &str) -> Result<String, String> {
    let settings = settings();
    settings.apply(function, 1, BTreeMap::from([(key.to_string(), Stored::Secret(sealed.to_string()))]), &[]);
    let values = settings.at(function, 1).expect("the version just applied");
    values.values.get(key).cloned().expect("the key just set")
}
