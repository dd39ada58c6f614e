//! A wasi:http proxy component (world `wasi:http/proxy`, nothing of Tally's), for the
//! tests of HTTP functions: the same component runs on Tally and on `wasmtime serve`.
//! Every response carries `x-method` and `x-path` (the method and the path with its
//! query as the component saw them) and one `x-repeat` per `x-repeat` the request had.
//! By path:
//!
//! - `/status/N`: status N, empty body;
//! - `/big/N`: N bytes (byte i is i % 251), written 4 KiB at a time;
//! - `/trailers`: a body, then the trailer `x-trailer: yes`;
//! - `/trap`: panics;
//! - `/no-response`: returns without a response;
//! - `/print/N`: prints `line i` to stdout for i in 0..N and `done` to stderr (for
//!   the logs of functions), answers `printed N`;
//! - `/env/KEY`: the environment variable KEY (a function's setting on Tally), 404 if
//!   unset;
//! - `/fetch?to=URL` (URL percent-encoded): sends the request's body to URL with the
//!   method in `x-fetch-method` (default GET) through wasi:http's outgoing handler
//!   (writing the body `x-fetch-body-delay-ms` after handing the request over), and
//!   answers with the upstream's status and body, or 502 and the error it got;
//! - anything else: 200 with the request's body and content type.

use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingRequest, OutgoingResponse, ResponseOutparam, Scheme,
};
use wasip2::io::streams::StreamError;

wasip2::http::proxy::export!(HttpProbe);

/// The most one `blocking-write-and-flush` may carry, by the wasi:io contract.
const CHUNK_BYTES: usize = 4096;

struct HttpProbe;

impl wasip2::exports::http::incoming_handler::Guest for HttpProbe {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let route = path.split('?').next().unwrap_or("").to_owned();
        let headers = Fields::new();
        let method = method_name(&request.method());
        headers.append("x-method", method.as_bytes()).expect("a valid header");
        headers.append("x-path", path.as_bytes()).expect("a valid header");
        let request_headers = request.headers();
        for value in request_headers.get("x-repeat") {
            headers.append("x-repeat", &value).expect("a valid header");
        }
        let mut status = 200;
        let mut trailers = None;
        let body = if let Some(code) = route.strip_prefix("/status/") {
            status = code.parse().unwrap_or(400);
            Vec::new()
        } else if let Some(size) = route.strip_prefix("/big/") {
            let size: usize = size.parse().unwrap_or(0);
            (0..size).map(|i| (i % 251) as u8).collect()
        } else if route == "/trailers" {
            let t = Fields::new();
            t.append("x-trailer", b"yes").expect("a valid trailer");
            trailers = Some(t);
            b"with trailers".to_vec()
        } else if let Some(n) = route.strip_prefix("/print/") {
            let n: u64 = n.parse().unwrap_or(0);
            for i in 0..n {
                println!("line {i}");
            }
            eprintln!("done");
            format!("printed {n}").into_bytes()
        } else if let Some(key) = route.strip_prefix("/env/") {
            match std::env::var(key) {
                Ok(value) => value.into_bytes(),
                Err(_) => {
                    status = 404;
                    Vec::new()
                }
            }
        } else if route == "/trap" {
            panic!("trapped on purpose");
        } else if route == "/no-response" {
            return;
        } else if route == "/fetch" {
            let to = path.split_once("?to=").map(|(_, u)| percent_decode(u)).unwrap_or_default();
            let method = request_headers.get("x-fetch-method").first().map(|m| String::from_utf8_lossy(m).into_owned());
            let delay_ms =
                request_headers.get("x-fetch-body-delay-ms").first().and_then(|d| String::from_utf8_lossy(d).parse().ok());
            let sent = read_body(&request)
                .map_err(str::to_string)
                .and_then(|body| fetch(&to, method.as_deref(), &body, delay_ms.unwrap_or(0)));
            match sent {
                Ok((upstream, body)) => {
                    status = upstream;
                    body
                }
                Err(message) => {
                    status = 502;
                    message.into_bytes()
                }
            }
        } else {
            for value in request_headers.get("content-type") {
                headers.append("content-type", &value).expect("a valid header");
            }
            match read_body(&request) {
                Ok(body) => body,
                Err(message) => {
                    status = 400;
                    message.as_bytes().to_vec()
                }
            }
        };
        let response = OutgoingResponse::new(headers);
        response.set_status_code(status).expect("a valid status code");
        let outgoing = response.body().expect("the body is taken once");
        ResponseOutparam::set(response_out, Ok(response));
        let out = outgoing.write().expect("the stream is taken once");
        for chunk in body.chunks(CHUNK_BYTES) {
            if out.blocking_write_and_flush(chunk).is_err() {
                return;
            }
        }
        drop(out);
        let _ = OutgoingBody::finish(outgoing, trailers);
    }
}

fn method_name(method: &Method) -> String {
    match method {
        Method::Get => "GET".into(),
        Method::Head => "HEAD".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Connect => "CONNECT".into(),
        Method::Options => "OPTIONS".into(),
        Method::Trace => "TRACE".into(),
        Method::Patch => "PATCH".into(),
        Method::Other(other) => other.clone(),
    }
}

fn read_body(request: &IncomingRequest) -> Result<Vec<u8>, &'static str> {
    let incoming = request.consume().map_err(|()| "the body was already taken")?;
    let stream = incoming.stream().map_err(|()| "the body stream was already taken")?;
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(CHUNK_BYTES as u64) {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => return Err("reading the body failed"),
        }
    }
    Ok(body)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `body` to `url` (`http[s]://authority/path`); the status and body that came back.
/// Sends `body` to `url`, writing it `delay_ms` after handing the request over (as
/// wasi:http allows: the host may answer before, from a logged response).
fn fetch(url: &str, method: Option<&str>, body: &[u8], delay_ms: u64) -> Result<(u16, Vec<u8>), String> {
    let (scheme, rest) = url.split_once("://").ok_or(format!("not a URL: {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    let method = match method.unwrap_or("GET") {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        other => Method::Other(other.to_string()),
    };
    request.set_method(&method).map_err(|()| "bad method")?;
    request.set_scheme(Some(&if scheme == "https" { Scheme::Https } else { Scheme::Http })).map_err(|()| "bad scheme")?;
    request.set_authority(Some(authority)).map_err(|()| "bad authority")?;
    request.set_path_with_query(Some(path)).map_err(|()| "bad path")?;
    let outgoing = request.body().map_err(|()| "the body was taken")?;
    let future = wasip2::http::outgoing_handler::handle(request, None).map_err(|e| format!("refused: {e:?}"))?;
    if delay_ms > 0 {
        wasip2::clocks::monotonic_clock::subscribe_duration(delay_ms * 1_000_000).block();
    }
    {
        let stream = outgoing.write().map_err(|()| "the body stream was taken")?;
        for chunk in body.chunks(CHUNK_BYTES) {
            stream.blocking_write_and_flush(chunk).map_err(|e| format!("writing the body: {e:?}"))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| format!("finishing the body: {e:?}"))?;
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return Err(format!("error: {e:?}")),
        Some(Err(())) | None => return Err("no response".into()),
    };
    let status = response.status();
    let incoming = response.consume().map_err(|()| "the response body was taken")?;
    let stream = incoming.stream().map_err(|()| "the response stream was taken")?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(CHUNK_BYTES as u64) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => return Err(format!("reading the response: {}", e.to_debug_string())),
        }
    }
    Ok((status, out))
}
