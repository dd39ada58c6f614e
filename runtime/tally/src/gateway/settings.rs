//! The routes of a function's settings (`tally_host::Setting`s, read by guests through
//! `wasi:config/store` and the environment): list them, secrets without their values,
//! and change them without a redeploy.

use super::*;

/// Bytes of a change at most: a function's settings hold 256 KiB, a secret's value is
/// sent once in the clear (over the gateway's connection) and JSON escapes may double it.
const CHANGE_BYTES_MAX: u64 = 1 << 20;

/// A change: `{"set": {"KEY": {"value": "v", "secret": true}}, "unset": ["OTHER"]}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    #[serde(default)]
    set: BTreeMap<String, Setting>,
    #[serde(default)]
    unset: Vec<String>,
}

/// `{"version", "settings": [{"key", "secret", "value"?}]}`.
#[tracing::instrument(name = "http.settings", skip_all)]
pub(super) async fn list(State(rt): State<Arc<Runtime>>, ApiPath(name): ApiPath<String>, _: NoBody) -> ApiResult<Response> {
    Ok(Json(rt.registry.settings(&name).await?).into_response())
}

/// Applies a change and answers the settings after it.
#[tracing::instrument(name = "http.configure", skip_all)]
pub(super) async fn change(
    State(rt): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    body: RequestBody,
) -> ApiResult<Response> {
    let body = body.read("the change", CHANGE_BYTES_MAX).await?;
    let Change { set, unset } = serde_json::from_slice(&body).map_err(|e| {
        RuntimeError::InvalidArgument(format!(
            "expected {{\"set\": {{\"KEY\": {{\"value\": \"...\", \"secret\": false}}}}, \"unset\": [\"KEY\"]}}: {e}"
        ))
    })?;
    let listing = rt.registry.configure(&name, set, unset, Some(caller.id)).await?;
    Ok(with_position(Json(listing).into_response(), &rt.registry.position().await))
}

/// Settings a deploy carries in its `Tally-Settings` header: the `set` of a change, as
/// JSON (kept out of the query string, which proxies log).
pub(super) fn of_deploy(headers: &HeaderMap) -> Result<BTreeMap<String, Setting>, RuntimeError> {
    let Some(value) = headers.get(SETTINGS) else { return Ok(BTreeMap::new()) };
    serde_json::from_slice(value.as_bytes()).map_err(|e| {
        RuntimeError::InvalidArgument(format!(
            "the {SETTINGS} header: expected {{\"KEY\": {{\"value\": \"...\", \"secret\": false}}}}: {e}"
        ))
    })
}
