//! Conversions between the SDK's HTTP types and wasi:http's, shared by serving and
//! fetching. Bodies move in chunks of at most [`CHUNK_BYTES`].

use wasip2::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingBody};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

use super::Headers;

/// The most one `blocking-write-and-flush` may carry, by the wasi:io contract, and the
/// size of each read.
const CHUNK_BYTES: usize = 4096;

pub(crate) fn method_name(method: &Method) -> String {
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

/// The wasi:http method for `name`; the standard ones are matched in upper case only,
/// as HTTP methods are case-sensitive.
pub(crate) fn method(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_owned()),
    }
}

pub(crate) fn headers_from(fields: &Fields) -> Headers {
    fields.entries().into_iter().collect()
}

/// The headers as wasi:http fields; the error names the first header wasi:http refused
/// (a forbidden or malformed one), by name only, as a value may be a secret.
pub(crate) fn fields_from(headers: &Headers) -> Result<Fields, String> {
    let fields = Fields::new();
    for (name, value) in headers.iter() {
        fields.append(name, value).map_err(|error| format!("header {name:?} refused: {error:?}"))?;
    }
    Ok(fields)
}

/// Reads a body to its end; the host bounds its size.
pub(crate) fn read_body(body: IncomingBody) -> Result<Vec<u8>, ErrorCode> {
    let mut bytes = Vec::new();
    {
        let stream: InputStream = body.stream().map_err(|()| internal("the body stream was taken"))?;
        loop {
            match stream.blocking_read(CHUNK_BYTES as u64) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(error)) => return Err(stream_error(&error)),
            }
        }
    }
    // The trailers, if any, are dropped: the SDK's types carry none.
    drop(IncomingBody::finish(body));
    Ok(bytes)
}

/// Writes `bytes` to a body and finishes it.
pub(crate) fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), ErrorCode> {
    {
        let stream: OutputStream = body.write().map_err(|()| internal("the body stream was taken"))?;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            stream.blocking_write_and_flush(chunk).map_err(|error| match error {
                StreamError::LastOperationFailed(error) => stream_error(&error),
                StreamError::Closed => internal("the body stream closed"),
            })?;
        }
    }
    OutgoingBody::finish(body, None)
}

fn stream_error(error: &wasip2::io::error::Error) -> ErrorCode {
    wasip2::http::types::http_error_code(error).unwrap_or_else(|| ErrorCode::InternalError(Some(error.to_debug_string())))
}

fn internal(message: &str) -> ErrorCode {
    ErrorCode::InternalError(Some(message.to_owned()))
}

/// The error code as the WIT names it (`HTTP-request-denied`), with its payload if it
/// has one that says more.
pub(crate) fn error_code_name(code: &ErrorCode) -> String {
    let name = match code {
        ErrorCode::DnsTimeout => "DNS-timeout",
        ErrorCode::DnsError(payload) => {
            return match &payload.rcode {
                Some(rcode) => format!("DNS-error ({rcode})"),
                None => "DNS-error".into(),
            }
        }
        ErrorCode::DestinationNotFound => "destination-not-found",
        ErrorCode::DestinationUnavailable => "destination-unavailable",
        ErrorCode::DestinationIpProhibited => "destination-IP-prohibited",
        ErrorCode::DestinationIpUnroutable => "destination-IP-unroutable",
        ErrorCode::ConnectionRefused => "connection-refused",
        ErrorCode::ConnectionTerminated => "connection-terminated",
        ErrorCode::ConnectionTimeout => "connection-timeout",
        ErrorCode::ConnectionReadTimeout => "connection-read-timeout",
        ErrorCode::ConnectionWriteTimeout => "connection-write-timeout",
        ErrorCode::ConnectionLimitReached => "connection-limit-reached",
        ErrorCode::TlsProtocolError => "TLS-protocol-error",
        ErrorCode::TlsCertificateError => "TLS-certificate-error",
        ErrorCode::TlsAlertReceived(_) => "TLS-alert-received",
        ErrorCode::HttpRequestDenied => "HTTP-request-denied",
        ErrorCode::HttpRequestLengthRequired => "HTTP-request-length-required",
        ErrorCode::HttpRequestBodySize(_) => "HTTP-request-body-size",
        ErrorCode::HttpRequestMethodInvalid => "HTTP-request-method-invalid",
        ErrorCode::HttpRequestUriInvalid => "HTTP-request-URI-invalid",
        ErrorCode::HttpRequestUriTooLong => "HTTP-request-URI-too-long",
        ErrorCode::HttpRequestHeaderSectionSize(_) => "HTTP-request-header-section-size",
        ErrorCode::HttpRequestHeaderSize(_) => "HTTP-request-header-size",
        ErrorCode::HttpRequestTrailerSectionSize(_) => "HTTP-request-trailer-section-size",
        ErrorCode::HttpRequestTrailerSize(_) => "HTTP-request-trailer-size",
        ErrorCode::HttpResponseIncomplete => "HTTP-response-incomplete",
        ErrorCode::HttpResponseHeaderSectionSize(_) => "HTTP-response-header-section-size",
        ErrorCode::HttpResponseHeaderSize(_) => "HTTP-response-header-size",
        ErrorCode::HttpResponseBodySize(_) => "HTTP-response-body-size",
        ErrorCode::HttpResponseTrailerSectionSize(_) => "HTTP-response-trailer-section-size",
        ErrorCode::HttpResponseTrailerSize(_) => "HTTP-response-trailer-size",
        ErrorCode::HttpResponseTransferCoding(_) => "HTTP-response-transfer-coding",
        ErrorCode::HttpResponseContentCoding(_) => "HTTP-response-content-coding",
        ErrorCode::HttpResponseTimeout => "HTTP-response-timeout",
        ErrorCode::HttpUpgradeFailed => "HTTP-upgrade-failed",
        ErrorCode::HttpProtocolError => "HTTP-protocol-error",
        ErrorCode::LoopDetected => "loop-detected",
        ErrorCode::ConfigurationError => "configuration-error",
        ErrorCode::InternalError(Some(message)) => return format!("internal-error ({message})"),
        ErrorCode::InternalError(None) => "internal-error",
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_round_trip() {
        for name in ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PROPFIND", "get"] {
            assert_eq!(method_name(&method(name)), name);
        }
        assert!(matches!(method("get"), Method::Other(_)));
    }

    #[test]
    fn error_codes_are_named_as_in_the_wit() {
        let check = |code: ErrorCode, expect: &str| assert_eq!(error_code_name(&code), expect);
        check(ErrorCode::HttpRequestDenied, "HTTP-request-denied");
        check(ErrorCode::ConnectionRefused, "connection-refused");
        check(ErrorCode::DestinationIpProhibited, "destination-IP-prohibited");
        check(ErrorCode::HttpResponseBodySize(Some(10)), "HTTP-response-body-size");
        check(ErrorCode::InternalError(None), "internal-error");
        check(ErrorCode::InternalError(Some("oops".into())), "internal-error (oops)");
    }
}
