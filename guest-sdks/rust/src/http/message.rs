use std::fmt;

use super::Headers;

/// An HTTP request: one that the function got ([`http_handler!`](crate::http_handler)),
/// or one it sends ([`fetch`](super::fetch)).
///
/// The `uri` is what the function saw for a request it got: the path below the
/// function's route, with the query (`/orders/17?expand=items`); and the absolute URL
/// for one it sends (`https://api.example.com/v1/orders?limit=10`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method, in upper case for the standard ones (`GET`, `POST`, ...).
    pub method: String,
    /// The path with the query, or an absolute URL (above).
    pub uri: String,
    /// The headers, repeated names kept.
    pub headers: Headers,
    /// The body, whole.
    pub body: Vec<u8>,
}

impl Request {
    /// A request with this method and URI, no headers and an empty body.
    pub fn new(method: impl Into<String>, uri: impl Into<String>) -> Self {
        Self { method: method.into(), uri: uri.into(), headers: Headers::new(), body: Vec::new() }
    }

    /// A `GET` of `uri`.
    pub fn get(uri: impl Into<String>) -> Self {
        Self::new("GET", uri)
    }

    /// A `POST` to `uri`.
    pub fn post(uri: impl Into<String>) -> Self {
        Self::new("POST", uri)
    }

    /// The request with a header appended.
    pub fn header(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Self {
        self.headers.append(name, value);
        self
    }

    /// The request with this body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The URI without its query.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(&self.uri, |(path, _)| path)
    }

    /// The query, after the `?`, as the client sent it (still percent-encoded).
    pub fn query(&self) -> Option<&str> {
        self.uri.split_once('?').map(|(_, query)| query)
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An HTTP response: one that the function answers with, or one it got back from
/// [`fetch`](super::fetch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, repeated names kept.
    pub headers: Headers,
    /// The body, whole.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with this status, no headers and an empty body.
    pub fn new(status: u16) -> Self {
        Self { status, headers: Headers::new(), body: Vec::new() }
    }

    /// A response with this status and a `text/plain` body.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self::new(status).header("content-type", "text/plain").body(body.into())
    }

    /// The response with a header appended.
    pub fn header(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Self {
        self.headers.append(name, value);
        self
    }

    /// The response with this body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// True for a 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What an HTTP handler may return: a [`Response`], or a `Result` of one whose error
/// becomes a `500` with the error's message (formatted with `{:#}`, as
/// [`handler!`](crate::handler) does), so that `?` works in a handler.
pub trait IntoResponse {
    /// The response to send.
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    fn into_response(self) -> Response {
        self
    }
}

impl<R: IntoResponse, E: fmt::Display> IntoResponse for Result<R, E> {
    fn into_response(self) -> Response {
        match self {
            Ok(response) => response.into_response(),
            Err(error) => Response::text(500, format!("{error:#}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_query() {
        let check = |uri: &str, path: &str, query: Option<&str>| {
            let request = Request::get(uri);
            assert_eq!((request.path(), request.query()), (path, query), "{uri}");
        };
        check("/", "/", None);
        check("/orders/17?expand=items", "/orders/17", Some("expand=items"));
        check("/a?", "/a", Some(""));
        check("/a?b=1?c", "/a", Some("b=1?c"));
    }

    #[test]
    fn builders() {
        let request = Request::post("http://127.0.0.1:9000/sink").header("content-type", "application/octet-stream").body("hi");
        assert_eq!(request.method, "POST");
        assert_eq!(request.headers.get_str("content-type"), Some("application/octet-stream"));
        assert_eq!(request.body_text(), "hi");
        let response = Response::text(201, "3 ok-3").header("x-count", "3");
        assert_eq!(response.status, 201);
        assert_eq!(response.headers.iter().collect::<Vec<_>>(), [("content-type", &b"text/plain"[..]), ("x-count", b"3")]);
        assert_eq!(response.body_text(), "3 ok-3");
    }

    #[test]
    fn errors_become_500() {
        let ok: Result<Response, crate::Error> = Ok(Response::new(204));
        assert_eq!(ok.into_response(), Response::new(204));
        let failed: Result<Response, crate::Error> = Err(crate::Error::Unavailable("log".into()));
        assert_eq!(failed.into_response(), Response::text(500, "unavailable: log"));
    }

    #[test]
    fn success_is_2xx() {
        for (status, success) in [(199, false), (200, true), (201, true), (299, true), (300, false), (502, false)] {
            assert_eq!(Response::new(status).is_success(), success, "{status}");
        }
    }
}
