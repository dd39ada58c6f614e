//! `POST /v1/sql`: a read-only query (`tally_sql`) over every table of the node, now or
//! `AS OF` a seqnum: `{"sql", "as_of"?, "limit"?}` → `{"columns", "rows", "truncated",
//! "as_of", "elapsed_ms"}`, read from the client's `Tally-Position` on, answering the
//! position the reads reached.

use tally_sql::{Query, Sql, SqlError, SqlLimits};

use super::*;

/// The node's SQL engine, under its `[node]` limits.
pub(super) fn engine(rt: &Arc<Runtime>) -> Sql {
    let n = &rt.config.node;
    let limits = SqlLimits {
        time_ms: n.sql_time_ms,
        rows_max: n.sql_rows_max as usize,
        scan_rows_max: n.sql_scan_rows_max,
        concurrent_max: n.sql_concurrent_max.max(1) as usize,
        memory_bytes_max: i64::try_from(n.sql_memory_bytes_max).unwrap_or(i64::MAX),
    };
    Sql::new(rt.clone(), limits)
}

/// Bytes of a query request at most.
const REQUEST_BYTES_MAX: u64 = 128 << 10;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    sql: String,
    as_of: Option<u64>,
    limit: Option<usize>,
}

#[tracing::instrument(name = "http.sql", skip_all)]
pub(super) async fn query(Extension(sql): Extension<Arc<Sql>>, headers: HeaderMap, body: RequestBody) -> ApiResult<Response> {
    let position = position_of(&headers)?;
    let bytes = body.read("the query", REQUEST_BYTES_MAX).await?;
    let req: SqlRequest = serde_json::from_slice(&bytes).map_err(|e| {
        RuntimeError::InvalidArgument(format!("a query is JSON {{\"sql\": \"SELECT ...\", \"as_of\"?: seqnum}}: {e}"))
    })?;
    let answer = sql.query(Query { sql: req.sql, as_of: req.as_of, position, limit: req.limit }).await;
    let answer = match answer {
        Ok(a) => a,
        Err(SqlError::Runtime(e)) => return Err(e.into()),
        Err(e @ SqlError::Busy(_)) => {
            let mut r = error_response(StatusCode::TOO_MANY_REQUESTS, "busy", e.to_string());
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(r);
        }
        Err(e) => {
            let code = match e {
                SqlError::Refused(_) => "sql_refused",
                SqlError::Limit(_) => "sql_limit",
                _ => "invalid_argument",
            };
            return Ok(error_response(StatusCode::BAD_REQUEST, code, e.to_string()));
        }
    };
    let body = json!({
        "columns": answer.columns,
        "rows": answer.rows,
        "truncated": answer.truncated,
        "as_of": answer.as_of,
        "elapsed_ms": answer.elapsed_ms,
    });
    Ok(with_position(Json(body).into_response(), &answer.position))
}
