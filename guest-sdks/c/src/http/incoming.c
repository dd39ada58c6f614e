/*
 * The http-function world's export, `wasi:http/incoming-handler.handle`: collects the
 * request whole, calls the user's `tally_http_handle`, and sends the response it left.
 */
#include <stdlib.h>
#include <string.h>

#include "method.h"

/** Reads the request whole into `*req`, and drops it. */
static void request_read(wasi_http_types_own_incoming_request_t request, tally_http_request *req) {
    wasi_http_types_borrow_incoming_request_t borrowed = wasi_http_types_borrow_incoming_request(request);
    wasi_http_types_method_t method;
    wasi_http_types_method_incoming_request_method(borrowed, &method);
    req->method = tally__method_name(&method);
    /* A request without a path (never one from the gateway) asks for the root. */
    wit_string_t path;
    req->path = wasi_http_types_method_incoming_request_path_with_query(borrowed, &path)
                    ? tally__cstr_from_wit(&path)
                    : strdup("/");
    tally__headers_from_fields(wasi_http_types_method_incoming_request_headers(borrowed), &req->headers);
    wasi_http_types_own_incoming_body_t body;
    if (wasi_http_types_method_incoming_request_consume(borrowed, &body))
        tally__body_read(body, &req->body);
    /* The promised NUL after the body; an empty body still gets a buffer. */
    tally_bytes_cstr(&req->body);
    wasi_http_types_incoming_request_drop_own(request);
}

/** Sends `resp` through `response_out`; false, with nothing sent, if the platform refuses its head. */
static bool response_send(wasi_http_types_own_response_outparam_t response_out, tally_http_response *resp) {
    wasi_http_types_own_fields_t fields;
    const char *refused;
    if (!tally__fields_from_headers(&resp->headers, &fields, &refused))
        return false;
    wasi_http_types_own_outgoing_response_t response = wasi_http_types_constructor_outgoing_response(fields);
    wasi_http_types_borrow_outgoing_response_t borrowed = wasi_http_types_borrow_outgoing_response(response);
    wasi_http_types_own_outgoing_body_t body;
    if (!wasi_http_types_method_outgoing_response_set_status_code(borrowed, resp->status) ||
        !wasi_http_types_method_outgoing_response_body(borrowed, &body)) {
        wasi_http_types_outgoing_response_drop_own(response);
        return false;
    }
    /* The response goes out first, so the body's writes have a reader. */
    wasi_http_types_result_own_outgoing_response_error_code_t result = {.is_err = false, .val.ok = response};
    wasi_http_types_static_response_outparam_set(response_out, &result);
    tally__body_write(body, resp->body.data, resp->body.len);
    return true;
}

void exports_wasi_http_incoming_handler_handle(exports_wasi_http_incoming_handler_own_incoming_request_t request,
                                               exports_wasi_http_incoming_handler_own_response_outparam_t response_out) {
    tally_http_request req = {NULL, NULL, TALLY_HTTP_HEADERS_INIT, TALLY_BYTES_INIT};
    request_read(request, &req);
    tally_http_response resp = {200, TALLY_HTTP_HEADERS_INIT, TALLY_BYTES_INIT};
    tally_http_handle(&req, &resp);
    free((char *)req.method);
    free((char *)req.path);
    tally_http_headers_free(&req.headers);
    tally_bytes_free(&req.body);

    if (!response_send(response_out, &resp)) {
        /* A head the platform refuses (a forbidden header, a status out of range) is the
         * function's bug: say so rather than trap, so the client learns why. */
        tally_http_response_free(&resp);
        resp.status = 500;
        tally_http_text(&resp, 500, "tally_http_handle answered a status or header that wasi:http refuses");
        response_send(response_out, &resp);
    }
    tally_http_response_free(&resp);
}
