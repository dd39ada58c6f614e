//! Tokens and the audit listing (`auth/`): admins create, list and revoke tokens; a
//! holder of `invoke` on a book makes a link that completes one of its promises.
//!
//! | route                              | does                                                   |
//! |------------------------------------|--------------------------------------------------------|
//! | `POST /v1/tokens`                  | `{"role", "name", "functions", "books", "expires_in_ms"}`: 201 with the token, shown once |
//! | `GET /v1/tokens`                   | every token (no secrets), revoked ones with who revoked them |
//! | `DELETE /v1/tokens/{id}`           | revoke: refused on every node from now on               |
//! | `POST /v1/promises/{id}/link?book=N` | `{"expires_in_ms"}` (default 7 days): a token that completes this promise and nothing else |
//! | `GET /v1/audit`                    | who deployed, configured or deleted what, and made or revoked tokens, in log order |

use axum::extract::Extension;

use super::*;
use crate::auth::guard::{Access, Caller};
use crate::auth::{Role, Scope};

/// The largest body of a token's creation.
const TOKEN_BODY_MAX: u64 = 16 << 10;
/// How long a promise's link completes it, unless asked otherwise.
const LINK_EXPIRY_MS: u64 = 7 * 24 * 3_600_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    role: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    functions: Vec<String>,
    #[serde(default)]
    books: Vec<u64>,
    expires_in_ms: Option<u64>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn expiry(expires_in_ms: Option<u64>) -> ApiResult<Option<u64>> {
    match expires_in_ms {
        None => Ok(None),
        Some(0) => Err(RuntimeError::InvalidArgument("expires_in_ms must be positive".into()).into()),
        Some(ms) => Ok(Some(now_ms().saturating_add(ms))),
    }
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError(RuntimeError::Internal(e.to_string()))
}

/// Checks a function scope's entries: names, or prefixes ending in `*`.
fn check_scope(functions: &[String], books: &[u64]) -> ApiResult<()> {
    for f in functions {
        let name = f.strip_suffix('*').unwrap_or(f);
        if name.contains('*') || (!f.ends_with('*') && tally_host::check_name(name).is_err()) {
            return Err(RuntimeError::InvalidArgument(format!("functions: {f:?} is not a name or a prefix ending in *")).into());
        }
    }
    for &b in books {
        user_book(b)?;
    }
    Ok(())
}

pub(super) async fn create(
    Extension(access): Extension<Arc<Access>>,
    Extension(caller): Extension<Caller>,
    body: RequestBody,
) -> ApiResult<Response> {
    let body = body.read("the token's description", TOKEN_BODY_MAX).await?;
    let c: Create = serde_json::from_slice(&body).map_err(|e| {
        RuntimeError::InvalidArgument(format!(
            "expected {{\"role\": \"read|invoke|deploy|admin\", \"name\", \"functions\": [..], \"books\": [..], \"expires_in_ms\"}}: {e}"
        ))
    })?;
    let role = Role::parse(&c.role).map_err(RuntimeError::InvalidArgument)?;
    check_scope(&c.functions, &c.books)?;
    let scope = Scope { functions: c.functions, books: c.books.into_iter().collect(), promise: None };
    let (listed, token, at) =
        access.tokens.create(role, scope, expiry(c.expires_in_ms)?, c.name, &caller.id).await.map_err(internal)?;
    // A request that sends this position back is let in by any node at once.
    Ok(with_position((StatusCode::CREATED, Json(json!({ "token": token, "grant": listed }))).into_response(), &at))
}

pub(super) async fn list(Extension(access): Extension<Arc<Access>>, _: NoBody) -> ApiResult<Response> {
    let tokens = access.tokens.list().await?;
    Ok(Json(json!({ "tokens": tokens })).into_response())
}

pub(super) async fn revoke(
    Extension(access): Extension<Arc<Access>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    _: NoBody,
) -> ApiResult<Response> {
    let Some(at) = access.tokens.revoke(&id, &caller.id).await? else {
        return Ok(error_response(StatusCode::NOT_FOUND, "not_found", format!("no token {id:?}")));
    };
    // A request that sends this position back is checked against the revocation on
    // any node, at once.
    Ok(with_position(Json(json!({ "revoked": id })).into_response(), &at))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Link {
    expires_in_ms: Option<u64>,
}

/// A token that completes promise `id` of book N and does nothing else.
pub(super) async fn link(
    Extension(access): Extension<Arc<Access>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InvocationQuery>,
    body: RequestBody,
) -> ApiResult<Response> {
    let book = user_book(q.book)?;
    let body = body.read("the link's description", TOKEN_BODY_MAX).await?;
    let l: Link = if body.is_empty() {
        Link::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| RuntimeError::InvalidArgument(format!("expected {{\"expires_in_ms\": N}}: {e}")))?
    };
    let scope = Scope { functions: Vec::new(), books: [book.0].into(), promise: Some(id.clone()) };
    let expires = expiry(Some(l.expires_in_ms.unwrap_or(LINK_EXPIRY_MS)))?;
    let name = format!("completes promise {id} of book {}", book.0);
    let (listed, token, at) = access.tokens.create(Role::Invoke, scope, expires, name, &caller.id).await.map_err(internal)?;
    let path = format!("/v1/promises/{}?book={}", url_escape(&id), book.0);
    let created = (StatusCode::CREATED, Json(json!({ "token": token, "path": path, "grant": listed }))).into_response();
    Ok(with_position(created, &at))
}

/// Every change of the registry and of the tokens, merged in log order (both are in the
/// platform book, so their seqnums are one order).
pub(super) async fn audit(
    State(rt): State<Arc<Runtime>>,
    Extension(access): Extension<Arc<Access>>,
    _: NoBody,
) -> ApiResult<Response> {
    let mut changes: Vec<(u64, serde_json::Value)> =
        rt.registry.changes().await?.into_iter().map(|c| (c.seqnum, json!(c))).collect();
    changes.extend(access.tokens.changes().await?.into_iter().map(|c| (c.seqnum, json!(c))));
    changes.sort_by_key(|(seqnum, _)| *seqnum);
    Ok(Json(json!({ "changes": changes.into_iter().map(|(_, c)| c).collect::<Vec<_>>() })).into_response())
}
