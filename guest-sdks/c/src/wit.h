/*
 * The SDK's glue to the generated bindings (`bindings/function.h`): conversions between
 * the canonical ABI's types and the SDK's. Only the sources that call the platform
 * include it.
 */
#ifndef TALLY_WIT_H
#define TALLY_WIT_H

#include "../bindings/function.h"
#include "internal.h"

/**
 * Fills `*err` (when not NULL) from a WIT error, taking over its message, and returns
 * the error's status.
 */
int tally__error_from_wit(tally_platform_types_error_t *wit, tally_error *err);

/** A byte string argument, which the import only reads. */
static inline function_list_u8_t tally__wit_bytes(const void *data, size_t len) {
    function_list_u8_t list = {(uint8_t *)data, len};
    return list;
}

/** A NUL-terminated text argument, which the import only reads. */
function_string_t tally__wit_string(const char *text);

/** A byte string that the import returned, now the caller's. */
static inline tally_bytes tally__bytes_from_wit(function_list_u8_t *list) {
    return tally__bytes_from_abi(list->ptr, list->len);
}

/** A NUL-terminated copy of a string that the import returned, taking it over. */
char *tally__cstr_from_wit(function_string_t *text);

#endif /* TALLY_WIT_H */
