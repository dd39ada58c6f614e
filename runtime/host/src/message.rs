//! The HTTP request and response of an HTTP function as its invocation's input and
//! output: the exactly-once core logs an invocation's input and result as bytes, so an
//! HTTP function's request is encoded into its input (by the gateway, a schedule or the
//! CLI) and its response into its output (by the host), whole. A re-execution reads the
//! same request, and a retried or keyed request gets the logged response: status,
//! headers, body and trailers.
//!
//! The encoding is a magic prefix and a format byte, then bincode of the struct;
//! [`HttpRequest::decode`] refuses anything else, so an input that is not a request
//! (a plain `POST /v1/functions/{name}/invoke`) is told apart.

use bincode::Options;
use serde::{Deserialize, Serialize};

/// The first bytes of an encoded request or response, then its format.
const MAGIC: &[u8; 5] = b"TLYH\0";
const FORMAT: u8 = 1;

/// Header names and values, in order, repeated names kept.
pub type Fields = Vec<(String, Vec<u8>)>;

/// An HTTP request as the function sees it: `path_with_query` is the path below the
/// function's route (always starting with `/`), `authority` the host the client named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRequest {
    pub method: String,
    pub scheme: String,
    pub authority: String,
    pub path_with_query: String,
    pub headers: Fields,
    pub body: Vec<u8>,
}

/// What an HTTP function answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Fields,
    pub body: Vec<u8>,
    /// Trailers, if the body ended with some.
    pub trailers: Option<Fields>,
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .serialize_into(&mut out, value)
        .expect("serializing into a Vec does not fail");
    out
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (&format, rest) = rest.split_first()?;
    if format != FORMAT {
        return None;
    }
    // The limit keeps a crafted length from allocating more than the input holds.
    bincode::DefaultOptions::new().with_fixint_encoding().with_limit(rest.len() as u64).deserialize(rest).ok()
}

impl HttpRequest {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// The request `bytes` encode, or `None` if they are not one.
    pub fn decode(bytes: &[u8]) -> Option<HttpRequest> {
        decode(bytes)
    }

    /// A `POST /` carrying `body`: what a function's plain invocation input is to an
    /// HTTP function.
    pub fn post(body: Vec<u8>) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            scheme: "http".into(),
            authority: "localhost".into(),
            path_with_query: "/".into(),
            headers: vec![("content-type".into(), b"application/octet-stream".to_vec())],
            body,
        }
    }
}

impl HttpResponse {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Option<HttpResponse> {
        decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_responses_decode_as_encoded_and_nothing_else_does() {
        let request = HttpRequest {
            method: "PATCH".into(),
            scheme: "https".into(),
            authority: "example.com:8443".into(),
            path_with_query: "/a/b?x=1&x=2".into(),
            headers: vec![("x-a".into(), b"1".to_vec()), ("x-a".into(), vec![0xff, 0])],
            body: vec![0, 1, 2, 255],
        };
        assert_eq!(HttpRequest::decode(&request.encode()), Some(request.clone()));
        let response =
            HttpResponse { status: 418, headers: vec![], body: b"tea".to_vec(), trailers: Some(vec![("t".into(), vec![])]) };
        assert_eq!(HttpResponse::decode(&response.encode()), Some(response));
        for bytes in [&b""[..], b"hello", b"TLYH\0", b"TLYH\0\x02rest", &request.encode()[..8]] {
            assert_eq!(HttpRequest::decode(bytes), None, "{bytes:?}");
        }
    }
}
