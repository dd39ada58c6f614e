/*
 * tally_http.h: HTTP functions, calls out and webhook signatures in C.
 *
 * An HTTP function is a component of world `tally:platform/http-function` (its
 * tally.toml says `world = "http-function"`): a wasi:http proxy, served at
 * `/fn/NAME/...`, that may use every call of tally.h too. It defines one entry point,
 * `tally_http_handle`:
 *
 *     #include <tally_http.h>
 *
 *     void tally_http_handle(const tally_http_request *req, tally_http_response *resp) {
 *         tally_http_text(resp, 200, "hello");
 *     }
 *
 * `tally_fetch` sends a request out through wasi:http/outgoing-handler, which only the
 * http-function world imports. The signature helpers (`tally_hmac_sha256` and its
 * friends) are pure and work in either world.
 *
 * The conventions are tally.h's: statuses with a `tally_error *err`, buffers owned by
 * the caller and released with the free function their type names.
 */
#ifndef TALLY_HTTP_H
#define TALLY_HTTP_H

#include "tally.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Headers                                                                               */
/* ------------------------------------------------------------------------------------ */

/** One header field. */
typedef struct tally_http_header {
    /** The name, NUL-terminated. The platform gives a request's names in lowercase. */
    char *name;
    /**
     * The value, `value_len` bytes followed by a NUL that is not counted, so a value
     * without NUL bytes (every usual one) reads as a C string.
     */
    char *value;
    size_t value_len;
} tally_http_header;

/**
 * Header fields in order, a name repeated as often as it came (`set-cookie`). Grow one
 * with `tally_http_headers_add*`; release it with `tally_http_headers_free`.
 */
typedef struct tally_http_headers {
    tally_http_header *items;
    size_t len;
    /** The number of items the allocation at `items` holds. */
    size_t cap;
} tally_http_headers;

/** An empty list, for initializing a `tally_http_headers` variable. */
#define TALLY_HTTP_HEADERS_INIT {NULL, 0, 0}

/** Appends a field with a NUL-terminated value (copies both). */
void tally_http_headers_add(tally_http_headers *headers, const char *name, const char *value);

/** Appends a field whose value is `value_len` bytes (copies both). */
void tally_http_headers_add_bytes(tally_http_headers *headers, const char *name, const void *value, size_t value_len);

/**
 * The first field named `name`, compared without regard to ASCII case, or NULL. For a
 * repeated name, walk `items` from there.
 */
const tally_http_header *tally_http_headers_get(const tally_http_headers *headers, const char *name);

/** Releases every field and empties the list. NULL is accepted. */
void tally_http_headers_free(tally_http_headers *headers);

/* ------------------------------------------------------------------------------------ */
/* HTTP functions                                                                        */
/* ------------------------------------------------------------------------------------ */

/** A request to the function, which the SDK owns and releases after the handler. */
typedef struct tally_http_request {
    /** The method as sent: "GET", "POST", ... */
    const char *method;
    /**
     * The path below the function's route, with the query as the client sent it:
     * `/fn/web/orders/17?expand=items` arrives as "/orders/17?expand=items", `/fn/web`
     * as "/".
     */
    const char *path;
    /** The client's headers, repeated names kept. */
    tally_http_headers headers;
    /** The whole body (empty for none), with a NUL after it that is not counted. */
    tally_bytes body;
} tally_http_request;

/** A response: what the handler answers, or what `tally_fetch` got. */
typedef struct tally_http_response {
    /** The status code; the handler gets 200. */
    uint16_t status;
    tally_http_headers headers;
    tally_bytes body;
} tally_http_response;

/**
 * The function's entry point, which the user defines (exactly once per component):
 *
 *     void tally_http_handle(const tally_http_request *req, tally_http_response *resp);
 *
 * `resp` starts as status 200 with no headers and no body; what the handler leaves in
 * it is the answer, and the SDK releases it. Every call of tally.h works inside (state,
 * log, invoke, objects, ...), and an HTTP request is one invocation, as exactly-once as
 * any other. Calling `abort()` traps the invocation: the client gets Tally's 500.
 *
 * The SDK reads the request's body whole into memory before the call and sends the
 * response whole after it, so both are bounded by the platform's limits:
 * `request_bytes_max` (6 MiB by default) and `response_bytes_max`. A function that
 * streams is a plain wasi:http component instead, built outside `tally build`.
 */
void tally_http_handle(const tally_http_request *req, tally_http_response *resp);

/**
 * Sets the response to `status` with `content-type: text/plain` and the NUL-terminated
 * `text` as its body, replacing any body and content-type set before.
 */
void tally_http_text(tally_http_response *resp, uint16_t status, const char *text);

/** Releases a response's headers and body (a `tally_fetch` result). NULL is accepted. */
void tally_http_response_free(tally_http_response *resp);

/* ------------------------------------------------------------------------------------ */
/* Calls out                                                                             */
/* ------------------------------------------------------------------------------------ */

/**
 * Sends `method` to `url` (`http://host:port/path?query` or `https://...`) with
 * `headers` (NULL for none) and `body_len` bytes of `body`, waits for the answer and
 * reads it whole into `*resp`, which the caller releases with
 * `tally_http_response_free`. Any status is a success: a 404 is a response.
 *
 *     tally_http_response up;
 *     if (tally_fetch("POST", url, NULL, body, body_len, &up, &err) != TALLY_OK)
 *         ...                                  // "http: HTTP-request-denied"
 *
 * A deploy names the destinations a function may reach (`--outbound
 * http://127.0.0.1:9000`); anything else fails. Fails with `TALLY_HTTP` and the
 * wasi:http error code as the message (`HTTP-request-denied`, `connection-refused`,
 * `HTTP-response-body-size`, ..., `internal-error: <detail>`) when no response came, and
 * with `TALLY_INVALID_ARGUMENT` for a URL it cannot split or a method or header the
 * platform refuses. Each call is exactly-once across re-executions: its response is
 * logged, and the platform adds an `Idempotency-Key` header unless `headers` has one.
 * The response's body is bounded by the node's `outgoing_response_bytes_max` (512 KiB
 * by default). Only the http-function world has it.
 */
int tally_fetch(const char *method, const char *url, const tally_http_headers *headers, const void *body,
                size_t body_len, tally_http_response *resp, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Signatures                                                                            */
/* ------------------------------------------------------------------------------------ */

/** The length of a SHA-256 digest in bytes. */
#define TALLY_SHA256_LEN 32

/** The SHA-256 digest of `len` bytes at `data`. */
void tally_sha256(const void *data, size_t len, uint8_t digest[TALLY_SHA256_LEN]);

/** HMAC-SHA256 (RFC 2104) of `len` bytes at `data` under a key of `key_len` bytes. */
void tally_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                       uint8_t mac[TALLY_SHA256_LEN]);

/** Writes `len` bytes as lowercase hex to `hex`, which holds `2 * len + 1` chars (a NUL ends it). */
void tally_hex(const void *data, size_t len, char *hex);

/**
 * Whether two byte strings are equal, in a time that depends on their lengths only, not
 * on where they differ: compare a signature with this, never with `memcmp`.
 */
bool tally_equal_constant_time(const void *a, size_t a_len, const void *b, size_t b_len);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_HTTP_H */
