/*
 * Calls out: `tally_fetch` on `wasi:http/outgoing-handler`, waiting for the response
 * with `wasi:io/poll` and reading it whole.
 */
#include <stdlib.h>
#include <string.h>

#include "method.h"

/** The `error-code` cases' names as the WIT spells them, in the variant's order. */
static const char *const error_code_names[] = {
    "DNS-timeout", "DNS-error", "destination-not-found", "destination-unavailable",
    "destination-IP-prohibited", "destination-IP-unroutable", "connection-refused",
    "connection-terminated", "connection-timeout", "connection-read-timeout",
    "connection-write-timeout", "connection-limit-reached", "TLS-protocol-error",
    "TLS-certificate-error", "TLS-alert-received", "HTTP-request-denied",
    "HTTP-request-length-required", "HTTP-request-body-size", "HTTP-request-method-invalid",
    "HTTP-request-URI-invalid", "HTTP-request-URI-too-long", "HTTP-request-header-section-size",
    "HTTP-request-header-size", "HTTP-request-trailer-section-size", "HTTP-request-trailer-size",
    "HTTP-response-incomplete", "HTTP-response-header-section-size", "HTTP-response-header-size",
    "HTTP-response-body-size", "HTTP-response-trailer-section-size", "HTTP-response-trailer-size",
    "HTTP-response-transfer-coding", "HTTP-response-content-coding", "HTTP-response-timeout",
    "HTTP-upgrade-failed", "HTTP-protocol-error", "loop-detected", "configuration-error",
    "internal-error",
};
_Static_assert(sizeof error_code_names / sizeof error_code_names[0] == WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR + 1,
               "one name per error-code case");

/** Fails with TALLY_HTTP and the error code's name (and an internal error's detail); frees `code`. */
static int fail_error_code(wasi_http_types_error_code_t *code, tally_error *err) {
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, code->tag < sizeof error_code_names / sizeof error_code_names[0]
                                         ? error_code_names[code->tag]
                                         : "unknown-error");
    if (code->tag == WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR && code->val.internal_error.is_some) {
        tally_bytes_append_str(&message, ": ");
        tally_bytes_append(&message, code->val.internal_error.val.ptr, code->val.internal_error.val.len);
    }
    wasi_http_types_error_code_free(code);
    tally__error_set(err, TALLY_HTTP, message.data, message.len);
    tally_bytes_free(&message);
    return TALLY_HTTP;
}

/** Fails with TALLY_INVALID_ARGUMENT and `what`, then `detail`. */
static int fail_argument(const char *what, const char *detail, tally_error *err) {
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, what);
    tally_bytes_append_str(&message, detail);
    tally__error_set(err, TALLY_INVALID_ARGUMENT, message.data, message.len);
    tally_bytes_free(&message);
    return TALLY_INVALID_ARGUMENT;
}

/** Makes the request's head from the arguments, or fails for one wasi:http refuses. */
static int request_make(const char *method, const tally__url *url, const tally_http_headers *headers,
                        wasi_http_types_own_outgoing_request_t *request, tally_error *err) {
    wasi_http_types_own_fields_t fields;
    const char *refused;
    if (!tally__fields_from_headers(headers, &fields, &refused))
        return fail_argument("wasi:http refuses the header ", refused, err);
    *request = wasi_http_types_constructor_outgoing_request(fields);
    wasi_http_types_borrow_outgoing_request_t borrowed = wasi_http_types_borrow_outgoing_request(*request);
    wasi_http_types_method_t wit_method = tally__method_from_name(method);
    wasi_http_types_scheme_t scheme;
    scheme.tag = strcmp(url->scheme, "http") == 0    ? WASI_HTTP_TYPES_SCHEME_HTTP
                 : strcmp(url->scheme, "https") == 0 ? WASI_HTTP_TYPES_SCHEME_HTTPS
                                                     : WASI_HTTP_TYPES_SCHEME_OTHER;
    scheme.val.other = tally__wit_string(url->scheme);
    wit_string_t authority = tally__wit_string(url->authority);
    wit_string_t path = tally__wit_string(url->path_with_query);
    const char *part = NULL, *value = NULL;
    if (!wasi_http_types_method_outgoing_request_set_method(borrowed, &wit_method)) {
        part = "wasi:http refuses the method ";
        value = method;
    } else if (!wasi_http_types_method_outgoing_request_set_scheme(borrowed, &scheme)) {
        part = "wasi:http refuses the scheme ";
        value = url->scheme;
    } else if (!wasi_http_types_method_outgoing_request_set_authority(borrowed, &authority)) {
        part = "wasi:http refuses the authority ";
        value = url->authority;
    } else if (!wasi_http_types_method_outgoing_request_set_path_with_query(borrowed, &path)) {
        part = "wasi:http refuses the path ";
        value = url->path_with_query;
    }
    if (part != NULL) {
        wasi_http_types_outgoing_request_drop_own(*request);
        return fail_argument(part, value, err);
    }
    return TALLY_OK;
}

/** Waits for the response to `future` and drops it; fills `*response` or fails. */
static int response_wait(wasi_http_types_own_future_incoming_response_t future,
                         wasi_http_types_own_incoming_response_t *response, tally_error *err) {
    wasi_http_types_borrow_future_incoming_response_t borrowed = wasi_http_types_borrow_future_incoming_response(future);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t got;
    while (!wasi_http_types_method_future_incoming_response_get(borrowed, &got)) {
        wasi_io_poll_own_pollable_t ready = wasi_http_types_method_future_incoming_response_subscribe(borrowed);
        wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
        wasi_io_poll_pollable_drop_own(ready);
    }
    wasi_http_types_future_incoming_response_drop_own(future);
    /* The outer error means the response was taken before: never here, as it is read once. */
    if (got.is_err)
        abort();
    if (got.val.ok.is_err)
        return fail_error_code(&got.val.ok.val.err, err);
    *response = got.val.ok.val.ok;
    return TALLY_OK;
}

int tally_fetch(const char *method, const char *url, const tally_http_headers *headers, const void *body,
                size_t body_len, tally_http_response *resp, tally_error *err) {
    tally__url parts;
    if (!tally__url_split(url, &parts))
        return fail_argument("not a URL with a scheme and a host: ", url, err);
    wasi_http_types_own_outgoing_request_t request;
    int status = request_make(method, &parts, headers, &request, err);
    tally__url_free(&parts);
    if (status != TALLY_OK)
        return status;

    wasi_http_types_own_outgoing_body_t request_body;
    if (!wasi_http_types_method_outgoing_request_body(wasi_http_types_borrow_outgoing_request(request), &request_body))
        abort(); /* A new request's body is there to take once. */
    wasi_http_outgoing_handler_own_future_incoming_response_t future;
    wasi_http_types_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(request, NULL, &future, &code)) {
        wasi_http_types_outgoing_body_drop_own(request_body);
        return fail_error_code(&code, err);
    }
    /* The body goes after the request was handed over, so that its writes have a reader. */
    tally__body_write(request_body, body, body_len);

    wasi_http_types_own_incoming_response_t response;
    status = response_wait(future, &response, err);
    if (status != TALLY_OK)
        return status;
    wasi_http_types_borrow_incoming_response_t borrowed = wasi_http_types_borrow_incoming_response(response);
    tally_http_response got = {wasi_http_types_method_incoming_response_status(borrowed), TALLY_HTTP_HEADERS_INIT,
                               TALLY_BYTES_INIT};
    tally__headers_from_fields(wasi_http_types_method_incoming_response_headers(borrowed), &got.headers);
    wasi_http_types_own_incoming_body_t response_body;
    bool whole = wasi_http_types_method_incoming_response_consume(borrowed, &response_body) &&
                 tally__body_read(response_body, &got.body);
    wasi_http_types_incoming_response_drop_own(response);
    if (!whole) {
        tally_http_response_free(&got);
        /* The stream's own error is a wasi:io error, not an error code: name the case it means. */
        tally__error_set(err, TALLY_HTTP, "HTTP-response-incomplete", strlen("HTTP-response-incomplete"));
        return TALLY_HTTP;
    }
    *resp = got;
    return TALLY_OK;
}
