/*
 * What the http-function world's sources share: conversions between wasi:http's
 * fields, streams and bodies and the SDK's headers and buffers. Built only with
 * `-DTALLY_HTTP_FUNCTION`, against bindings/http_function.h.
 */
#ifndef TALLY_WASI_HTTP_H
#define TALLY_WASI_HTTP_H

#include "../wit.h"
#include "tally_http.h"

/** Appends every entry of `fields` to `headers`, and drops `fields`. */
void tally__headers_from_fields(wasi_http_types_own_fields_t fields, tally_http_headers *headers);

/**
 * New fields holding `headers` (NULL for none). On a field the platform refuses (a
 * malformed or forbidden name or value), returns false, with `*refused` the refused
 * field's name and no fields made.
 */
bool tally__fields_from_headers(const tally_http_headers *headers, wasi_http_types_own_fields_t *fields,
                                const char **refused);

/**
 * Reads `body` whole into `*out` (empty at first) and drops it, its stream and its
 * trailers. False if the stream failed before its end (what came is kept).
 */
bool tally__body_read(wasi_http_types_own_incoming_body_t body, tally_bytes *out);

/** Writes `len` bytes to `body` and finishes it (without trailers). False if the platform refused. */
bool tally__body_write(wasi_http_types_own_outgoing_body_t body, const uint8_t *data, size_t len);

#endif /* TALLY_WASI_HTTP_H */
