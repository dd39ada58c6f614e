//! The routes under `/v1/books/{id}`: a book's records, its tables' protocols and
//! switches, and the state of its objects, queues and locks, each read at the client's
//! position or later.

use super::*;

/// Records a book listing returns at most.
const RECORDS_LIMIT_MAX: usize = 1000;
/// Bytes of a records page at most, unless its first record alone is larger: a record
/// carries up to 1 MiB of data and 1 MiB of aux data, each rendered as text (escaped)
/// and as base64, so a count limit alone would let one page reach gigabytes.
const RECORDS_PAGE_BYTES_MAX: usize = 4 << 20;
/// What a records page has after its last record at most: `],"next":<u64>}`.
const RECORDS_PAGE_END_BYTES_MAX: usize = 32;
/// Bytes of a table switch request at most; `{"protocol": "write-optimized"}` is 32.
const SWITCH_BYTES_MAX: u64 = 4 << 10;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecordsQuery {
    tag: Option<String>,
    from: Option<u64>,
    limit: Option<usize>,
}

/// `GET /v1/books`: the books exactly-once invocations used, on any node.
#[tracing::instrument(name = "http.books", skip_all)]
pub(super) async fn list(State(rt): State<Arc<Runtime>>, _: NoBody) -> ApiResult<Response> {
    let books: Vec<u64> = rt.tables().books().await?.into_iter().map(|b| b.0).collect();
    Ok(Json(json!({ "books": books })).into_response())
}

/// `GET /v1/books/{id}/tables`: the book's tables with their protocols.
#[tracing::instrument(name = "http.tables", skip_all)]
pub(super) async fn tables(State(rt): State<Arc<Runtime>>, ApiPath(book): ApiPath<u64>, _: NoBody) -> ApiResult<Response> {
    let book = user_book(book)?;
    let mut tables = Vec::new();
    for table in rt.tables().list(book).await? {
        let status = rt.tables().status(book, &table).await?;
        tables.push(json!({
            "table": table,
            "protocol": status.as_ref().map(|s| s.protocol.name()),
            "auto": status.as_ref().map(|s| s.auto),
            "switching": status.as_ref().and_then(|s| s.switching).map(|(from, to)| json!({ "from": from.name(), "to": to.name() })),
        }));
    }
    Ok(Json(json!({ "book": book.0, "tables": tables })).into_response())
}

/// A tag given as a number (decimal or 0x-hex) or as a name, hashed as the SDKs do.
pub fn parse_tag(s: &str) -> Tag {
    let number = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    };
    number.map_or_else(|| Tag::from_name(s), Tag)
}

/// One record of a page.
#[derive(Serialize)]
pub(super) struct RecordView {
    seqnum: u64,
    tags: Vec<u64>,
    data: Blob,
    aux: Option<Blob>,
}

/// A page of a book's records: at most `limit` of them and, past the first,
/// [`RECORDS_PAGE_BYTES_MAX`] bytes of JSON. `next` is where the following page starts;
/// null when this page reached the end of the stream.
#[tracing::instrument(name = "http.records", skip_all)]
pub(super) async fn records(
    State(rt): State<Arc<Runtime>>,
    ApiPath(book): ApiPath<u64>,
    ApiQuery(q): ApiQuery<RecordsQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let tag = q.tag.as_deref().map_or(Tag::ALL, parse_tag);
    let limit = q.limit.unwrap_or(100).min(RECORDS_LIMIT_MAX);
    if limit == 0 {
        return Err(RuntimeError::InvalidArgument("limit must be at least 1".into()).into());
    }
    let mut from = SeqNum(q.from.unwrap_or(0));
    let mut ctx = position_of(&headers)?;
    // The page is rendered as its records are read, so its size is known before each
    // record is added.
    let mut page = format!(r#"{{"book":{},"tag":{},"records":["#, book.0, tag.0).into_bytes();
    let mut count = 0;
    let next = loop {
        if count == limit {
            break Some(from.0);
        }
        let Some(r) = rt.log().read_next(&mut ctx, book, tag, from).await? else {
            break None;
        };
        let view = RecordView {
            seqnum: r.seqnum.0,
            tags: r.tags.iter().map(|t| t.0).collect(),
            data: Blob::new(&r.data),
            aux: r.aux.as_deref().map(Blob::new),
        };
        let record = serde_json::to_vec(&view).expect("numbers and strings render as JSON");
        if count > 0 && page.len() + 1 + record.len() + RECORDS_PAGE_END_BYTES_MAX > RECORDS_PAGE_BYTES_MAX {
            break Some(r.seqnum.0);
        }
        if count > 0 {
            page.push(b',');
        }
        page.extend_from_slice(&record);
        count += 1;
        from = SeqNum(r.seqnum.0 + 1);
    };
    let next = next.map_or_else(|| "null".to_string(), |n| n.to_string());
    page.extend_from_slice(format!(r#"],"next":{next}}}"#).as_bytes());
    Ok(with_position(([(header::CONTENT_TYPE, "application/json")], page).into_response(), &ctx))
}

fn table_json(book: u64, table: &str, status: Option<TableStatus>) -> serde_json::Value {
    let Some(st) = status else {
        return json!({ "book": book, "table": table, "used": false });
    };
    let history: Vec<_> = st
        .history
        .iter()
        .map(|(seqnum, t)| match t {
            Transition::End { protocol, auto, .. } => {
                json!({ "seqnum": seqnum, "end": protocol.name(), "auto": auto })
            }
            Transition::Begin { from, to, auto, .. } => {
                json!({ "seqnum": seqnum, "begin": { "from": from.name(), "to": to.name() }, "auto": auto })
            }
        })
        .collect();
    json!({
        "book": book,
        "table": table,
        "used": true,
        "protocol": st.protocol.name(),
        "auto": st.auto,
        "switching": st.switching.map(|(from, to)| json!({ "from": from.name(), "to": to.name() })),
        "history": history,
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ObjectQuery {
    /// A JSON pointer into the object (default: the whole object).
    #[serde(default)]
    path: String,
}

/// A durable object's value (at `?path=`), as of the client's position or later.
#[tracing::instrument(name = "http.object", skip_all)]
pub(super) async fn object(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, name)): ApiPath<(u64, String)>,
    ApiQuery(q): ApiQuery<ObjectQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let mut ctx = position_of(&headers)?;
    let text = rt.libraries().object(&mut ctx, book, &name, &q.path).await?;
    let value: serde_json::Value = match text {
        Some(t) => serde_json::from_str(&t).map_err(|e| RuntimeError::Internal(format!("an object's view: {e}")))?,
        None => serde_json::Value::Null,
    };
    let exists = !value.is_null();
    Ok(Json(json!({ "book": book.0, "object": name, "path": q.path, "exists": exists, "value": value })).into_response())
}

/// A queue's shards: how many messages wait in each.
#[tracing::instrument(name = "http.queue", skip_all)]
pub(super) async fn queue(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, name)): ApiPath<(u64, String)>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let mut ctx = position_of(&headers)?;
    let shards = rt.libraries().queue(&mut ctx, book, &name).await?;
    let pending: u64 = shards.iter().map(|s| s.pending).sum();
    Ok(Json(json!({ "book": book.0, "queue": name, "pending": pending, "shards": shards })).into_response())
}

/// Who holds a lock.
#[tracing::instrument(name = "http.lock", skip_all)]
pub(super) async fn lock(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, name)): ApiPath<(u64, String)>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let mut ctx = position_of(&headers)?;
    let holder = rt.libraries().lock_holder(&mut ctx, book, &name).await?;
    Ok(Json(json!({ "book": book.0, "lock": name, "held": holder.is_some(), "holder": holder })).into_response())
}

#[tracing::instrument(name = "http.table_status", skip_all)]
pub(super) async fn table_status(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, table)): ApiPath<(u64, String)>,
    _: NoBody,
) -> ApiResult<Response> {
    let status = rt.tables().status(user_book(book)?, &table).await?;
    Ok(Json(table_json(book, &table, status)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SwitchRequest {
    protocol: String,
}

#[tracing::instrument(name = "http.table_switch", skip_all)]
pub(super) async fn table_switch(
    State(rt): State<Arc<Runtime>>,
    ApiPath((book, table)): ApiPath<(u64, String)>,
    body: RequestBody,
) -> ApiResult<Response> {
    let book = user_book(book)?;
    let body = body.read("the request body", SWITCH_BYTES_MAX).await?;
    let req: SwitchRequest = serde_json::from_slice(&body)
        .map_err(|e| RuntimeError::InvalidArgument(format!("expected {{\"protocol\": \"...\"}}: {e}")))?;
    let protocol: Protocol = req.protocol.parse().map_err(RuntimeError::InvalidArgument)?;
    let status = rt.tables().switch(book, &table, protocol).await?;
    Ok((StatusCode::ACCEPTED, Json(table_json(book.0, &table, Some(status)))).into_response())
}
