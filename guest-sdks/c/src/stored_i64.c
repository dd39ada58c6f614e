/*
 * The text format of the state's integer helpers: an i64 in decimal, as Rust's
 * `to_string` writes it and `parse` reads it. Pure code: the unit tests build it
 * natively.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* At most this many bytes of a bad value go in the message: a value may be 512 KiB. */
#define PREVIEW_BYTES_MAX 32

int tally__parse_stored_i64(const char *table, const void *key, size_t key_len, const void *stored,
                            size_t stored_len, int64_t *value, tally_error *err) {
    /* The Rust SDK reads the value as UTF-8 and then parses it; every non-ASCII byte is
     * an invalid digit anyway, so parsing the bytes decides the same. */
    if (tally_parse_i64(stored, stored_len, value) == TALLY_PARSE_OK)
        return TALLY_OK;
    if (err == NULL)
        return TALLY_INVALID_ARGUMENT;
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, "the value of key \"");
    tally_escape_ascii(key, key_len, &message);
    tally_bytes_append_str(&message, "\" in table ");
    tally_quote(table, strlen(table), &message);
    tally_bytes_append_str(&message, " is not a decimal i64: \"");
    if (stored_len > PREVIEW_BYTES_MAX) {
        tally_escape_ascii(stored, PREVIEW_BYTES_MAX, &message);
        tally_bytes_append_str(&message, "...");
    } else {
        tally_escape_ascii(stored, stored_len, &message);
    }
    tally_bytes_append_str(&message, "\"");
    /* `append` always leaves room for a NUL, which `error_take` needs. */
    tally_bytes_cstr(&message);
    tally__error_take(err, TALLY_INVALID_ARGUMENT, message.data, message.len);
    return TALLY_INVALID_ARGUMENT;
}
