//! `GET /v1/logs` through a cluster's gateway: every function node keeps the logs of what
//! it ran, so the gateway asks them all and merges. A page is every node's page, each
//! entry with its `node`, in time order, the last `limit` of them (the first after
//! `after`, which is a node's own position: use it with `node`); `next` is each node's
//! position. `follow=true` streams every node's new lines as they come, with their node.

use std::collections::BTreeMap;

use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::*;

/// Asks `http` for `path_and_query`; the response, or why not.
/// The client's token goes with it: each node checks it.
async fn ask(gw: &Gateway, http: &str, path_and_query: &str, token: &HeaderValue) -> Result<Response, String> {
    let uri: Uri = format!("{}://{http}{path_and_query}", gw.scheme).parse().map_err(|e| format!("{e}"))?;
    let mut request = Request::builder().uri(uri);
    request = request.header(axum::http::header::AUTHORIZATION, token);
    let request = request.body(Body::empty()).expect("a valid request");
    match tokio::time::timeout(NODE_TIMEOUT, gw.client.request(request)).await {
        Ok(Ok(response)) => Ok(response.map(Body::new)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {NODE_TIMEOUT:?}")),
    }
}

/// The entry with the node it came from.
fn tagged(mut entry: Value, node: NodeId) -> Value {
    entry["node"] = json!(node.0);
    entry
}

pub(super) async fn logs(State(gw): State<Arc<Gateway>>, uri: Uri, headers: axum::http::HeaderMap) -> Response {
    let Some(token) = headers.get(axum::http::header::AUTHORIZATION) else {
        return error_response(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "no valid token: send `Authorization: Bearer <token>`".into(),
        );
    };
    let path_and_query = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/v1/logs".into());
    let query: BTreeMap<String, String> = uri.query().map(|q| url_pairs(q).collect()).unwrap_or_default();
    let nodes = gw.candidates(None);
    if nodes.is_empty() {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "no function node is registered".into());
    }
    if query.get("follow").is_some_and(|f| f == "true") {
        return follow(&gw, nodes, &path_and_query, token).await;
    }
    let limit: usize = query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
    let mut entries = Vec::new();
    let mut next = BTreeMap::new();
    for (id, http) in nodes {
        let response = match ask(&gw, &http, &path_and_query, token).await {
            Ok(r) => r,
            Err(e) => {
                warn!(%id, error = %e, "a function node's logs are missing from a page");
                continue;
            }
        };
        let status = response.status();
        let body = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        if !status.is_success() {
            // A refusal (a bad query) is every node's: pass the first on.
            return Response::builder().status(status).body(Body::from(body)).expect("a valid response");
        }
        let page: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        next.insert(id.0.to_string(), page["next"].clone());
        entries.extend(page["entries"].as_array().cloned().unwrap_or_default().into_iter().map(|e| tagged(e, id)));
    }
    entries.sort_by_key(|e| (e["at_ms"].as_u64(), e["node"].as_u64(), e["seq"].as_u64()));
    if query.contains_key("after") {
        entries.truncate(limit);
    } else {
        entries.drain(..entries.len().saturating_sub(limit));
    }
    axum::Json(json!({ "entries": entries, "next": next })).into_response()
}

/// Every node's followed lines, as they come.
async fn follow(gw: &Gateway, nodes: Vec<(NodeId, String)>, path_and_query: &str, token: &HeaderValue) -> Response {
    let mut streams = Vec::new();
    for (id, http) in nodes {
        match ask(gw, &http, path_and_query, token).await {
            Ok(response) if response.status().is_success() => {
                let frames = response.into_body().into_data_stream();
                streams.push(lines(frames, id).boxed());
            }
            // A refused token is every node's refusal: pass it on.
            Ok(response) if matches!(response.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => return response,
            Ok(response) => warn!(%id, status = %response.status(), "a function node refused to follow its logs"),
            Err(e) => warn!(%id, error = %e, "a function node's logs are not followed"),
        }
    }
    if streams.is_empty() {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "no function node could be followed".into());
    }
    let merged = stream::select_all(streams).map(Ok::<_, std::convert::Infallible>);
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(merged)).into_response()
}

/// The JSON lines of one node's stream, each with its node.
fn lines<S>(frames: S, node: NodeId) -> impl futures_util::Stream<Item = Bytes>
where
    S: futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    stream::unfold((frames, Vec::new()), move |(mut frames, mut buffer)| async move {
        loop {
            if let Some(end) = buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let Ok(entry) = serde_json::from_slice::<Value>(&line) else { continue };
                let mut out = serde_json::to_vec(&tagged(entry, node)).unwrap_or_default();
                out.push(b'\n');
                return Some((Bytes::from(out), (frames, buffer)));
            }
            match frames.next().await {
                Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    })
}

/// `a=1&b=2` as pairs, percent-decoding left to the nodes (only `follow`, `limit` and
/// `after` are read here, which never need it).
fn url_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k.to_string(), v.to_string())
    })
}
