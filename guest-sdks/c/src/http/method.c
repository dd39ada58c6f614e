/* HTTP methods: wasi:http's `method` variant and the SDK's method names. */
#include <string.h>

#include "method.h"

/** The named cases, in the variant's order; `other` comes after them. */
static const char *const names[] = {
    [WASI_HTTP_TYPES_METHOD_GET] = "GET",         [WASI_HTTP_TYPES_METHOD_HEAD] = "HEAD",
    [WASI_HTTP_TYPES_METHOD_POST] = "POST",       [WASI_HTTP_TYPES_METHOD_PUT] = "PUT",
    [WASI_HTTP_TYPES_METHOD_DELETE] = "DELETE",   [WASI_HTTP_TYPES_METHOD_CONNECT] = "CONNECT",
    [WASI_HTTP_TYPES_METHOD_OPTIONS] = "OPTIONS", [WASI_HTTP_TYPES_METHOD_TRACE] = "TRACE",
    [WASI_HTTP_TYPES_METHOD_PATCH] = "PATCH",
};

char *tally__method_name(wasi_http_types_method_t *method) {
    if (method->tag == WASI_HTTP_TYPES_METHOD_OTHER)
        return tally__cstr_from_wit(&method->val.other);
    const char *name = names[method->tag];
    size_t len = strlen(name);
    char *copy = tally__malloc(len + 1);
    memcpy(copy, name, len + 1);
    return copy;
}

wasi_http_types_method_t tally__method_from_name(const char *name) {
    wasi_http_types_method_t method;
    for (uint8_t tag = 0; tag < sizeof names / sizeof names[0]; tag++) {
        if (strcmp(names[tag], name) == 0) {
            method.tag = tag;
            return method;
        }
    }
    method.tag = WASI_HTTP_TYPES_METHOD_OTHER;
    method.val.other = tally__wit_string(name);
    return method;
}
