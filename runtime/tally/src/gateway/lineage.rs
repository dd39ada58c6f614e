//! Lineage: `GET /v1/books/{id}/tables/{table}/why?key=K[&as_of=S]` and
//! `GET /v1/books/{id}/objects/{name}/why[?as_of=S]`: the value, the invocation, attempt
//! and step that wrote it, its seqnum, the writer's input, key and trace, and the value
//! before it (`tally_durable::Lineage`).

use tally_durable::Lineage;

use super::invocations::shown;
use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WhyQuery {
    /// The key as text, or `key_hex` for any bytes.
    key: Option<String>,
    key_hex: Option<String>,
    as_of: Option<u64>,
}

fn lineage_json(l: &Lineage) -> serde_json::Value {
    let writer = l.writer.as_ref().map(|w| {
        json!({
            "invocation_id": w.invocation_id,
            "function": w.function,
            "step": w.step,
            "attempt": w.attempt,
            "input": shown(&w.input),
            "key": w.key,
            "trace_id": w.trace_id,
            "init_seqnum": w.init_seqnum,
        })
    });
    json!({
        "value": l.value.as_deref().map(shown),
        "protocol": l.protocol,
        "written_at": l.written_at,
        "migrated_from": l.migrated_from,
        "writer": writer,
        "previous_kept": l.previous.is_some(),
        "previous": l.previous.as_ref().and_then(|p| p.as_deref()).map(shown),
    })
}

fn key_of(q: &WhyQuery) -> ApiResult<Vec<u8>> {
    match (&q.key, &q.key_hex) {
        (Some(k), None) => Ok(k.as_bytes().to_vec()),
        (None, Some(h)) if h.len() % 2 == 0 => (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or("x"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| RuntimeError::InvalidArgument(format!("key_hex {h:?} is not hex")).into()),
        _ => Err(RuntimeError::InvalidArgument("name the key: key=TEXT or key_hex=HEX".into()).into()),
    }
}

#[tracing::instrument(name = "http.why", skip_all)]
pub(super) async fn value(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, table)): ApiPath<(u64, String)>,
    ApiQuery(q): ApiQuery<WhyQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let key = key_of(&q)?;
    let mut ctx = position_of(&headers)?;
    let history = rt.tables().history(&mut ctx, book, &table).await?;
    let lineage = rt.tables().why(&mut ctx, book, &table, &history, &key, q.as_of).await?;
    let mut body = lineage_json(&lineage);
    body["book"] = json!(book.0);
    body["table"] = json!(table);
    body["key"] = shown(&key);
    body["as_of"] = json!(q.as_of);
    Ok(with_position(Json(body).into_response(), &ctx))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ObjectWhyQuery {
    as_of: Option<u64>,
}

#[tracing::instrument(name = "http.why_object", skip_all)]
pub(super) async fn object(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, name)): ApiPath<(u64, String)>,
    ApiQuery(q): ApiQuery<ObjectWhyQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let mut ctx = position_of(&headers)?;
    let lineage = rt.libraries().why_object(&mut ctx, book, &name, q.as_of).await?;
    let mut body = lineage_json(&lineage);
    body["book"] = json!(book.0);
    body["object"] = json!(name);
    body["as_of"] = json!(q.as_of);
    Ok(with_position(Json(body).into_response(), &ctx))
}
