//! Serving: [`http_handler!`](crate::http_handler) exports wasi:http's incoming
//! handler through the `wasip2` crate and calls the function's handler with the request
//! read whole.

use wasip2::http::types::{IncomingRequest, OutgoingResponse, ResponseOutparam};

use super::wasi::{error_code_name, fields_from, headers_from, method_name, read_body, write_body};
use super::{Request, Response};

/// Declares the function's HTTP handler: the component exports
/// `wasi:http/incoming-handler` and answers every request with it.
///
/// `http_handler!(handle)` takes the path of a function `fn(Request) -> R` where `R`
/// is a [`Response`](crate::http::Response) or a `Result` of one whose error is
/// `Display` (answered as `500` with its message), so `?` works on the SDK's calls:
///
/// ```no_run
/// use tally_sdk::http::{Request, Response};
/// use tally_sdk::state;
///
/// fn handle(request: Request) -> tally_sdk::Result<Response> {
///     let visits = state::get_i64("visits", request.path())?.unwrap_or(0) + 1;
///     state::put_i64("visits", request.path(), visits)?;
///     Ok(Response::text(200, format!("{} visits to {}", visits, request.path())))
/// }
///
/// tally_sdk::http_handler!(handle);
/// ```
///
/// The request's body is read whole before the handler runs, and the response's body
/// is sent whole after; the platform bounds both (`request_bytes_max`,
/// `response_bytes_max`). Trailers are neither read nor sent. A panic traps the
/// invocation. Use it once per component, at the top level of the crate, and not with
/// [`handler!`](crate::handler): a component has one entry point.
#[macro_export]
macro_rules! http_handler {
    ($handle:path) => {
        const _: () = {
            struct HttpHandler;

            impl $crate::__wasip2::exports::http::incoming_handler::Guest for HttpHandler {
                fn handle(
                    request: $crate::__wasip2::http::types::IncomingRequest,
                    response_out: $crate::__wasip2::http::types::ResponseOutparam,
                ) {
                    $crate::http::__serve(request, response_out, |request| {
                        $crate::http::IntoResponse::into_response($handle(request))
                    })
                }
            }

            $crate::__wasip2::http::proxy::export! { HttpHandler with_types_in $crate::__wasip2 }
        };
    };
}

/// Reads the request, runs `handle` and sends its response; used by
/// [`http_handler!`](crate::http_handler).
#[doc(hidden)]
pub fn serve(request: IncomingRequest, response_out: ResponseOutparam, handle: impl FnOnce(Request) -> Response) {
    let request = match read_request(request) {
        Ok(request) => request,
        Err(message) => return send(response_out, Response::text(400, message)),
    };
    send(response_out, handle(request));
}

fn read_request(request: IncomingRequest) -> Result<Request, String> {
    let method = method_name(&request.method());
    let uri = request.path_with_query().unwrap_or_else(|| "/".to_owned());
    let headers = headers_from(&request.headers());
    let body = request.consume().map_err(|()| "the request's body was taken".to_owned())?;
    let body = read_body(body).map_err(|code| format!("reading the request's body: {}", error_code_name(&code)))?;
    Ok(Request { method, uri, headers, body })
}

/// Sends `response`; one that wasi:http refuses (a forbidden header, a status out of
/// range) becomes a `500` that says why, as the function would otherwise trap with no
/// answer at all.
fn send(response_out: ResponseOutparam, response: Response) {
    let (outgoing, body) = match outgoing(&response) {
        Ok(outgoing) => (outgoing, response.body),
        Err(message) => {
            let refused = Response::text(500, message);
            (outgoing(&refused).expect("a plain-text response is valid"), refused.body)
        }
    };
    let out = outgoing.body().expect("a new response's body is taken once");
    ResponseOutparam::set(response_out, Ok(outgoing));
    // The client is gone if this fails, and nobody is left to tell.
    let _ = write_body(out, &body);
}

fn outgoing(response: &Response) -> Result<OutgoingResponse, String> {
    let outgoing = OutgoingResponse::new(fields_from(&response.headers)?);
    outgoing.set_status_code(response.status).map_err(|()| format!("status {} refused", response.status))?;
    Ok(outgoing)
}
