/*
 * What the SDK's sources share and users do not see. The pure parts (text, buffers,
 * errors and the stored-integer format) do not include the generated bindings, so the
 * unit tests build them natively.
 */
#ifndef TALLY_INTERNAL_H
#define TALLY_INTERNAL_H

#include "tally.h"

/** malloc that traps (through abort) instead of returning NULL. */
void *tally__malloc(size_t size);

/** realloc that traps (through abort) instead of returning NULL. */
void *tally__realloc(void *ptr, size_t size);

/**
 * Fills `*err` (when not NULL) with `kind` and a copy of `len` bytes of `message`.
 */
void tally__error_set(tally_error *err, tally_status kind, const void *message, size_t len);

/**
 * Fills `*err` (when not NULL) with `kind` and the message at `message`, which it takes
 * over: `message` must come from malloc and have room for one more byte (the NUL).
 * Frees the message when `err` is NULL.
 */
void tally__error_take(tally_error *err, tally_status kind, uint8_t *message, size_t len);

/** Fills `*err` (when not NULL) with a conflict. */
void tally__error_conflict(tally_error *err, bool has_holder, uint64_t holder);

/**
 * Reads a value stored by `tally_state_put_i64`: on success stores it in `*value` and
 * returns TALLY_OK; otherwise fails with TALLY_INVALID_ARGUMENT and the Rust SDK's
 * message, in which `table` and `key` only name the value.
 */
int tally__parse_stored_i64(const char *table, const void *key, size_t key_len, const void *stored,
                            size_t stored_len, int64_t *value, tally_error *err);

/**
 * Makes a buffer of `len` bytes that came from the canonical ABI (through the
 * bindings' `cabi_realloc`) a `tally_bytes`. An empty list's pointer is not an
 * allocation (it is the list's alignment), so it becomes NULL.
 */
tally_bytes tally__bytes_from_abi(uint8_t *data, size_t len);

/** A URL split into the parts a wasi:http request takes. */
typedef struct tally__url {
    char *scheme;
    char *authority;
    char *path_with_query;
} tally__url;

/**
 * Splits `scheme://authority/path?query#fragment` (the fragment dropped, the path "/"
 * when there is none), allocating each part; false, with nothing allocated, for text
 * that has no scheme or no authority.
 */
bool tally__url_split(const char *url, tally__url *parts);

/** Releases the parts of a split URL. */
void tally__url_free(tally__url *parts);

#endif /* TALLY_INTERNAL_H */
