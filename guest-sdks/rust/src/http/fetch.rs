//! Calls out: requests to other services through `wasi:http/outgoing-handler`.

use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, OutgoingRequest, Scheme};

use super::wasi::{error_code_name, fields_from, headers_from, method, read_body, write_body};
use super::{Request, Response};

/// Why [`fetch`] got no response.
///
/// The messages name the destination by its origin (`https://api.example.com`), never
/// the whole URL, whose path or query may hold a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The request could not be made: its URI is not an absolute `http` or `https`
    /// URL, or wasi:http refused a header or the method.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// wasi:http failed the request with an error code, such as `HTTP-request-denied`
    /// for a destination the function may not reach (`tally deploy --outbound`),
    /// `connection-refused` or `HTTP-response-body-size`.
    #[error("{method} {origin}: {code}")]
    Http {
        /// The request's method.
        method: String,
        /// The destination's scheme and authority.
        origin: String,
        /// The wasi:http `error-code`, as the WIT names it.
        code: String,
    },
}

/// Sends `request` (its `uri` an absolute `http` or `https` URL) and returns the
/// response, whatever its status.
///
/// Only the destinations named at deploy (`tally deploy --outbound
/// https://api.example.com`) may be reached; any other fails with
/// `HTTP-request-denied`. Each call is a step of the invocation: its response is logged
/// and a re-execution gets it again instead of sending the request twice, and the
/// platform adds an `Idempotency-Key` header unless the request has one.
///
/// Both bodies move whole; the platform bounds them (`outgoing_request_bytes_max`,
/// `outgoing_response_bytes_max`, at most 768 KiB). Redirects are not followed.
///
/// ```no_run
/// use tally_sdk::http::{fetch, Request};
///
/// let response = fetch(Request::post("http://127.0.0.1:9000/sink").header("content-type", "text/plain").body("hi"))?;
/// println!("{} {}", response.status, response.body_text());
/// # Ok::<(), tally_sdk::http::FetchError>(())
/// ```
pub fn fetch(request: Request) -> Result<Response, FetchError> {
    let url = Url::parse(&request.uri)?;
    let failed = |code: ErrorCode| FetchError::Http {
        method: request.method.clone(),
        origin: format!("{}://{}", url.scheme, url.authority),
        code: error_code_name(&code),
    };
    let outgoing = OutgoingRequest::new(fields_from(&request.headers).map_err(FetchError::Invalid)?);
    outgoing.set_method(&method(&request.method)).map_err(|()| invalid(format!("method {:?}", request.method)))?;
    let scheme = if url.scheme == "https" { Scheme::Https } else { Scheme::Http };
    outgoing.set_scheme(Some(&scheme)).map_err(|()| invalid("the scheme".into()))?;
    outgoing.set_authority(Some(url.authority)).map_err(|()| invalid(format!("the authority {:?}", url.authority)))?;
    outgoing.set_path_with_query(Some(url.path_with_query)).map_err(|()| invalid("the path".into()))?;
    let body = outgoing.body().expect("a new request's body is taken once");
    let future = outgoing_handler::handle(outgoing, None).map_err(failed)?;
    write_body(body, &request.body).map_err(failed)?;
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(failed(code)),
        Some(Err(())) | None => unreachable!("the response is ready after the wait and taken once"),
    };
    let status = response.status();
    let headers = headers_from(&response.headers());
    let body = response.consume().expect("a response's body is taken once");
    let body = read_body(body).map_err(failed)?;
    Ok(Response { status, headers, body })
}

fn invalid(what: String) -> FetchError {
    FetchError::Invalid(format!("{what} refused by wasi:http"))
}

/// An absolute URL, split as wasi:http takes it.
#[derive(Debug, PartialEq, Eq)]
struct Url<'a> {
    scheme: &'a str,
    authority: &'a str,
    path_with_query: &'a str,
}

impl<'a> Url<'a> {
    fn parse(url: &'a str) -> Result<Self, FetchError> {
        let not_url = || FetchError::Invalid("the URI is not an absolute http or https URL".into());
        let (scheme, rest) = url.split_once("://").ok_or_else(not_url)?;
        if scheme != "http" && scheme != "https" {
            return Err(not_url());
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        if authority.is_empty() || authority.contains('@') {
            return Err(FetchError::Invalid("the URL needs a host, and user information is not supported".into()));
        }
        // The fragment is the client's alone: it is never sent.
        let path_with_query = rest.split_once('#').map_or(rest, |(before, _)| before);
        let path_with_query = if path_with_query.is_empty() { "/" } else { path_with_query };
        Ok(Url { scheme, authority, path_with_query })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expect: Option<(&str, &str, &str)>) {
        let actual = Url::parse(url).ok().map(|url| (url.scheme, url.authority, url.path_with_query));
        assert_eq!(actual, expect, "{url}");
    }

    #[test]
    fn urls_split_as_wasi_http_takes_them() {
        check("http://127.0.0.1:9000/sink", Some(("http", "127.0.0.1:9000", "/sink")));
        check("https://api.example.com", Some(("https", "api.example.com", "/")));
        check("https://api.example.com?x=1", Some(("https", "api.example.com", "?x=1")));
        check("https://api.example.com/a/b?x=1&y=2#top", Some(("https", "api.example.com", "/a/b?x=1&y=2")));
        check("http://[::1]:8080/", Some(("http", "[::1]:8080", "/")));
    }

    #[test]
    fn other_uris_are_refused() {
        for url in ["/relative", "ftp://example.com/", "http:///path", "http://user:secret@example.com/", "example.com"] {
            check(url, None);
        }
    }

    #[test]
    fn messages_name_the_origin_only() {
        let error = FetchError::Http {
            method: "POST".into(),
            origin: "https://api.example.com".into(),
            code: "HTTP-request-denied".into(),
        };
        assert_eq!(error.to_string(), "POST https://api.example.com: HTTP-request-denied");
    }
}
