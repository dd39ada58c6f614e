//! Echoes the request body with status 200: the same work as Tally's `hello` function,
//! behind `wasmtime serve` instead of Tally's gateway.

use wasip2::http::types::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use wasip2::io::streams::StreamError;

wasip2::http::proxy::export!(HttpHello);

/// The largest body echoed; the rest is an error, as Tally's gateway refuses
/// oversized requests.
const BODY_BYTES_MAX: usize = 6 << 20;

/// Bytes per stream read and write: 4096 is the most one `blocking-write-and-flush` may
/// carry, by the wasi:io contract.
const CHUNK_BYTES: usize = 4096;

struct HttpHello;

impl wasip2::exports::http::incoming_handler::Guest for HttpHello {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let body = match read_body(&request) {
            Ok(body) => body,
            Err(message) => return respond(response_out, 400, message.as_bytes()),
        };
        respond(response_out, 200, &body);
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
        if body.len() > BODY_BYTES_MAX {
            return Err("the body is too large");
        }
    }
    Ok(body)
}

fn respond(response_out: ResponseOutparam, status: u16, body: &[u8]) {
    let response = OutgoingResponse::new(Fields::new());
    response.set_status_code(status).expect("a valid status code");
    let outgoing = response.body().expect("the body is taken once");
    ResponseOutparam::set(response_out, Ok(response));
    let out = outgoing.write().expect("the stream is taken once");
    for chunk in body.chunks(CHUNK_BYTES) {
        // The client may have gone away; there is nobody left to tell.
        if out.blocking_write_and_flush(chunk).is_err() {
            return;
        }
    }
    drop(out);
    let _ = OutgoingBody::finish(outgoing, None);
}
