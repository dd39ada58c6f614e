/* HTTP methods: wasi:http's `method` variant and the SDK's method names. */
#ifndef TALLY_HTTP_METHOD_H
#define TALLY_HTTP_METHOD_H

#include "wasi_http.h"

/** The method's name, NUL-terminated, to free; takes over an `other` method's string. */
char *tally__method_name(wasi_http_types_method_t *method);

/** The variant for `name`: a known method's case, else `other`, borrowing `name`. */
wasi_http_types_method_t tally__method_from_name(const char *name);

#endif /* TALLY_HTTP_METHOD_H */
