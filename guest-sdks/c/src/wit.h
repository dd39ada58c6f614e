/*
 * The SDK's glue to the generated bindings: conversions between the canonical ABI's
 * types and the SDK's. Only the sources that call the platform include it.
 *
 * The bindings of each world name the WIT's anonymous types (`string`, `list<u8>`, ...)
 * after the world: `function_string_t` in bindings/function.h, `http_function_string_t`
 * in bindings/http_function.h, the same type under two names. The sources shared by
 * both worlds use the `wit_*` names below, and are compiled against the world's
 * bindings: the http-function world's with `-DTALLY_HTTP_FUNCTION`, else the function
 * world's. Everything else the bindings declare (the interfaces' functions and types)
 * has the same name in both.
 */
#ifndef TALLY_WIT_H
#define TALLY_WIT_H

#ifdef TALLY_HTTP_FUNCTION
#include "../bindings/http_function.h"
#define TALLY__WORLD(name) http_function_##name
#else
#include "../bindings/function.h"
#define TALLY__WORLD(name) function_##name
#endif
#include "internal.h"

typedef TALLY__WORLD(string_t) wit_string_t;
typedef TALLY__WORLD(list_u8_t) wit_list_u8_t;
typedef TALLY__WORLD(option_list_u8_t) wit_option_list_u8_t;
typedef TALLY__WORLD(list_list_u8_t) wit_list_list_u8_t;
typedef TALLY__WORLD(option_string_t) wit_option_string_t;
typedef TALLY__WORLD(list_tuple2_string_string_t) wit_list_tuple2_string_string_t;
#define wit_string_free TALLY__WORLD(string_free)
#define wit_list_u8_free TALLY__WORLD(list_u8_free)
#define wit_list_tuple2_string_string_free TALLY__WORLD(list_tuple2_string_string_free)

/**
 * Fills `*err` (when not NULL) from a WIT error, taking over its message, and returns
 * the error's status.
 */
int tally__error_from_wit(tally_platform_types_error_t *wit, tally_error *err);

/** A byte string argument, which the import only reads. */
static inline wit_list_u8_t tally__wit_bytes(const void *data, size_t len) {
    wit_list_u8_t list = {(uint8_t *)data, len};
    return list;
}

/** A NUL-terminated text argument, which the import only reads. */
wit_string_t tally__wit_string(const char *text);

/** A byte string that the import returned, now the caller's. */
static inline tally_bytes tally__bytes_from_wit(wit_list_u8_t *list) {
    return tally__bytes_from_abi(list->ptr, list->len);
}

/** A NUL-terminated copy of a string that the import returned, taking it over. */
char *tally__cstr_from_wit(wit_string_t *text);

#endif /* TALLY_WIT_H */
