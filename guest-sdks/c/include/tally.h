/*
 * tally.h: write Tally functions in C.
 *
 * A Tally function is a WebAssembly component of world `tally:platform/function`
 * (`wit/platform.wit`): it gets the invocation's input as bytes and returns bytes or an
 * error message. While it runs it may use the shared log of the book it is bound to
 * (`tally_log_*`), keep exactly-once key-value state in the book's tables
 * (`tally_state_*`), keep durable JSON objects with transactions (`tally_objects_*`),
 * push to and pop from durable queues (`tally_queues_*`), hold locks (`tally_locks_*`),
 * call other functions (`tally_invoke_call`), ask what the invocation is
 * (`tally_context_*`), sleep durably (`tally_context_sleep*`) and wait for promises the
 * outside world completes (`tally_context_promise_*`).
 *
 * A function defines one entry point, `tally_handle` (see "The handler" below):
 *
 *     #include <tally.h>
 *
 *     // Records the order in the input and returns its seqnum.
 *     int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
 *         tally_tag orders = tally_tag_named("orders");
 *         tally_seqnum seqnum;
 *         tally_error err;
 *         if (tally_log_append(&orders, 1, input, input_len, &seqnum, &err) != TALLY_OK)
 *             return tally_fail_error(out, &err);
 *         tally_output_u64(out, seqnum);
 *         return 0;
 *     }
 *
 * Conventions, the same for every function below:
 *
 * - Calls to the platform return an `int` status: `TALLY_OK` (0), or the `tally_status`
 *   named after the WIT `error` variant, with the details in the `tally_error *err`
 *   argument (which may be NULL to ignore them). A status is something the function can
 *   handle (a lost conditional append, an unavailable log, a failed child, a malformed
 *   value); the platform traps the invocation only for a broken guest or a host bug.
 * - Outputs go through pointer arguments and are written only on success; then every
 *   buffer output is filled, so releasing it is always right.
 * - Byte strings are (pointer, length) pairs; text arguments such as table and function
 *   names are NUL-terminated UTF-8.
 * - Every buffer the SDK returns is allocated with malloc and owned by the caller, who
 *   releases it with the free function named on the type: `tally_bytes_free`,
 *   `tally_record_free`, `tally_error_free`, or `free` for a `char *`.
 * - Running out of memory traps the invocation (as a Rust function's allocation failure
 *   does), so no function reports it.
 *
 * An HTTP function (world `tally:platform/http-function`) defines `tally_http_handle`
 * instead, from tally_http.h, and has every call below too.
 *
 * An instance serves one invocation and is then thrown away, so a function keeps no
 * memory between invocations: what must last goes in the log or the state.
 */
#ifndef TALLY_H
#define TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The SDK's version. */
#define TALLY_SDK_VERSION "0.1.0"

/* ------------------------------------------------------------------------------------ */
/* Errors                                                                                */
/* ------------------------------------------------------------------------------------ */

/**
 * Why a call to the platform failed: one status per case of the WIT `error` variant of
 * `tally:platform/types`, plus `TALLY_OK`.
 */
typedef enum tally_status {
    /** The call succeeded. */
    TALLY_OK = 0,
    /**
     * The arguments were refused: a tag with the top bit set, tag 0 as the condition of
     * `tally_log_cond_append`, a malformed table name, ... Also a stored value that is
     * not what the SDK reads it as, such as one that is not a decimal integer for
     * `tally_state_get_i64`.
     */
    TALLY_INVALID_ARGUMENT = 1,
    /** A named thing does not exist, such as an unknown function for `tally_invoke_call`. */
    TALLY_NOT_FOUND = 2,
    /**
     * A conditional append lost: its position in the condition tag's stream is held by
     * another record, named by `tally_error.holder` unless it has since been trimmed.
     */
    TALLY_CONFLICT = 3,
    /** The log or a node is unavailable right now; retrying later may succeed. */
    TALLY_UNAVAILABLE = 4,
    /** A record, payload or result is larger than its limit. */
    TALLY_TOO_LARGE = 5,
    /** The operation did not finish in time; it may still have taken effect. */
    TALLY_TIMEOUT = 6,
    /** A child invocation failed: its handler returned an error, or it trapped. */
    TALLY_FAILED = 7,
    /**
     * A call out (`tally_fetch`, tally_http.h) got no response: the message is the
     * wasi:http `error-code` case, such as `HTTP-request-denied` or
     * `connection-refused`. Not a case of the WIT `error` variant: wasi:http has its own.
     */
    TALLY_HTTP = 8,
} tally_status;

/**
 * The details of a failed call. Every function that takes a `tally_error *err` fills it
 * when it fails and leaves it alone when it succeeds; release a filled one with
 * `tally_error_free` (which also makes it safe to reuse).
 */
typedef struct tally_error {
    /** What went wrong: never `TALLY_OK` in a filled error. */
    tally_status kind;
    /**
     * The platform's message, NUL-terminated (it is also `message_len` bytes long).
     * An empty string for `TALLY_CONFLICT`, which has no message.
     */
    char *message;
    /** The length of `message` in bytes, without the NUL. */
    size_t message_len;
    /** For `TALLY_CONFLICT`: whether the record that holds the position is known. */
    bool has_holder;
    /** For `TALLY_CONFLICT` with `has_holder`: the seqnum of the record that holds it. */
    uint64_t holder;
} tally_error;

/** Releases an error's message and resets it to an empty error. NULL is accepted. */
void tally_error_free(tally_error *err);

/**
 * The error as text, the same text as the Rust SDK's `Error` displays, so that messages
 * agree across languages:
 *
 *     invalid argument: <message>     not found: <message>
 *     unavailable: <message>          too large: <message>
 *     timeout: <message>              failed: <message>
 *     http: <message>
 *     conflict: the position is held by record <holder>
 *     conflict: the position is held by a trimmed record
 *
 * Returns a NUL-terminated string that the caller releases with `free`.
 */
char *tally_error_text(const tally_error *err);

/**
 * The status's code name: "ok", "invalid_argument", "not_found", "conflict",
 * "unavailable", "too_large", "timeout", "failed", "http", or "unknown" for anything
 * else.
 * A static string.
 */
const char *tally_status_name(int status);

/* ------------------------------------------------------------------------------------ */
/* Byte buffers                                                                          */
/* ------------------------------------------------------------------------------------ */

/**
 * A byte buffer owned by whoever holds it: `len` bytes at `data`, in an allocation of
 * `cap` bytes. An empty buffer may have `data == NULL`. The SDK returns values, records'
 * data and call outputs in one; `tally_bytes_append*` grow one, which makes it a string
 * builder too. Release it with `tally_bytes_free`.
 *
 * The bytes are not NUL-terminated unless `tally_bytes_cstr` made them so.
 */
typedef struct tally_bytes {
    /** The bytes, or NULL when the buffer has never held any. */
    uint8_t *data;
    /** The number of bytes. */
    size_t len;
    /** The size of the allocation at `data`. */
    size_t cap;
} tally_bytes;

/** An empty buffer, for initializing a `tally_bytes` variable. */
#define TALLY_BYTES_INIT {NULL, 0, 0}

/** Releases the buffer's bytes and makes it empty. NULL is accepted. */
void tally_bytes_free(tally_bytes *bytes);

/** Appends `len` bytes from `data` to the buffer. */
void tally_bytes_append(tally_bytes *bytes, const void *data, size_t len);

/** Appends a NUL-terminated string, without its NUL. */
void tally_bytes_append_str(tally_bytes *bytes, const char *text);

/** Appends an integer in decimal. */
void tally_bytes_append_i64(tally_bytes *bytes, int64_t value);

/** Appends an unsigned integer in decimal. */
void tally_bytes_append_u64(tally_bytes *bytes, uint64_t value);

/**
 * Puts a NUL after the bytes (not counted in `len`) and returns them as a C string,
 * which stays valid until the buffer next changes. Text that itself contains a NUL
 * byte is cut short there when read as a C string.
 */
const char *tally_bytes_cstr(tally_bytes *bytes);

/* ------------------------------------------------------------------------------------ */
/* The handler                                                                           */
/* ------------------------------------------------------------------------------------ */

/**
 * Where the handler puts its output or its error message. The platform gives one to
 * `tally_handle`, empty; fill it with the `tally_output_*` functions, or fail with
 * `tally_fail*`. Its fields belong to the SDK.
 */
typedef struct tally_output {
    /** The output so far. */
    tally_bytes data;
    /** The error message, once one of the `tally_fail*` functions set it. */
    tally_bytes message;
    /** Whether `message` was set. */
    bool failed;
} tally_output;

/**
 * The function's entry point, which the user defines (exactly once per component):
 *
 *     int tally_handle(const uint8_t *input, size_t input_len, tally_output *out);
 *
 * `input` is the invocation's input, `input_len` bytes that stay valid during the call
 * (and are not NUL-terminated). Returning 0 makes the output written into `out` the
 * invocation's output. Returning anything else fails the invocation with the message
 * set by `tally_fail*` (or "tally_handle returned <status>" if none was set): the
 * caller gets an error carrying that message (HTTP 500 `function_error`), and a child
 * invocation's caller gets `TALLY_FAILED`. Calling `abort()` (or crashing) traps the
 * invocation (HTTP 500 `trap`).
 *
 * A message that is not valid UTF-8 is passed on with each invalid sequence replaced by
 * U+FFFD, because the WIT string it travels in must be UTF-8.
 */
int tally_handle(const uint8_t *input, size_t input_len, tally_output *out);

/** Appends `len` bytes from `data` to the output. */
void tally_output_write(tally_output *out, const void *data, size_t len);

/** Appends a NUL-terminated string to the output. */
void tally_output_str(tally_output *out, const char *text);

/** Appends an integer in decimal to the output. */
void tally_output_i64(tally_output *out, int64_t value);

/** Appends an unsigned integer in decimal to the output. */
void tally_output_u64(tally_output *out, uint64_t value);

/**
 * Makes `bytes` the output, replacing what was written so far, without copying: the
 * output takes over the buffer and leaves `*bytes` empty.
 */
void tally_output_take(tally_output *out, tally_bytes *bytes);

/**
 * Sets the handler's error message to the NUL-terminated `message` and returns 1, so
 * that a handler fails with `return tally_fail(out, "...");`. The message replaces any
 * set before.
 */
int tally_fail(tally_output *out, const char *message);

/** `tally_fail` with a message of `len` bytes that need not be NUL-terminated. */
int tally_fail_bytes(tally_output *out, const void *message, size_t len);

/**
 * `tally_fail` with the message built in `message`, which it takes over (leaving
 * `*message` empty): build a message with `tally_bytes_append*`, then
 * `return tally_fail_take(out, &message);`.
 */
int tally_fail_take(tally_output *out, tally_bytes *message);

/**
 * `tally_fail` with a printf-style message: `return tally_failf(out, "bad %s", word);`.
 * It links the C library's printf machinery (tens of KB), which the rest of the SDK
 * avoids.
 */
int tally_failf(tally_output *out, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * Fails with the error's text (`tally_error_text`), and releases the error: a call's
 * failure is passed on with `return tally_fail_error(out, &err);`. Returns 1.
 */
int tally_fail_error(tally_output *out, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Settings                                                                              */
/* ------------------------------------------------------------------------------------ */

/**
 * Sets `*value` to the function's setting `key` (`tally deploy --config K=V` or
 * `--secret K=V`, `tally config set F K=V`): a NUL-terminated string to `free`, or NULL
 * when the function has no such setting. A secret reads like any other value; keep it
 * out of logs, outputs and error messages. Settings are read once per execution and
 * recorded, so a re-execution sees the same values. Works in both worlds (the host's
 * `wasi:config/store`); fails with `TALLY_UNAVAILABLE` if the store cannot be read.
 *
 *     char *upstream;
 *     if (tally_config_get("upstream", &upstream, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     if (upstream == NULL)
 *         return tally_fail(out, "set upstream: tally config set NAME upstream=URL");
 *     ...
 *     free(upstream);
 */
int tally_config_get(const char *key, char **value, tally_error *err);

/** One setting: a key and its value, both NUL-terminated. */
typedef struct tally_config_entry {
    char *key;
    char *value;
} tally_config_entry;

/**
 * Sets `*entries` to every setting of the function (`*len` of them, in no particular
 * order), an array to release with `tally_config_entries_free`.
 */
int tally_config_get_all(tally_config_entry **entries, size_t *len, tally_error *err);

/** Releases what `tally_config_get_all` returned. NULL is accepted. */
void tally_config_entries_free(tally_config_entry *entries, size_t len);

/* ------------------------------------------------------------------------------------ */
/* Tags and seqnums                                                                      */
/* ------------------------------------------------------------------------------------ */

/**
 * A record's position in its book: seqnums are totally ordered across the whole book,
 * whatever the record's tags.
 */
typedef uint64_t tally_seqnum;

/** The smallest seqnum: `tally_log_read_next(tag, TALLY_SEQNUM_MIN, ...)` reads a stream's first record. */
#define TALLY_SEQNUM_MIN ((tally_seqnum)0)
/** The largest seqnum: `tally_log_read_prev(tag, TALLY_SEQNUM_MAX, ...)` reads a stream's last record. */
#define TALLY_SEQNUM_MAX ((tally_seqnum)UINT64_MAX)

/**
 * Selects a sub-stream of the book: every record carries a set of tags, and reads name
 * the one tag whose stream they walk. Tag 0 (`TALLY_TAG_ALL`) is the whole book. Tags
 * with the top bit (bit 63) set are reserved for the platform: appending with one fails
 * with `TALLY_INVALID_ARGUMENT`. Any other number is a tag; `tally_tag_named` makes one
 * from a name.
 */
typedef uint64_t tally_tag;

/**
 * The whole book: every record is in tag 0's stream. It is only for reading and
 * trimming; a record's own tags never include it.
 */
#define TALLY_TAG_ALL ((tally_tag)0)

/**
 * The tag for a name of `len` bytes, so functions agree on tags by name without a
 * registry.
 *
 * The tag is the 64-bit FNV-1a hash of the name's UTF-8 bytes (offset basis
 * 0xcbf29ce484222325, prime 0x100000001b3: for each byte, xor it in, then multiply,
 * wrapping), with the top bit cleared because it is reserved for the platform, and 1 in
 * place of 0 because 0 is `TALLY_TAG_ALL`. The gateway uses the same function for
 * `?tag=name`, and so does every SDK, so these must not change:
 *
 *     name       FNV-1a 64            tag (hex)            tag (decimal)
 *     ""         0xcbf29ce484222325   0x4bf29ce484222325   5472609002491880229
 *     "a"        0xaf63dc4c8601ec8c   0x2f63dc4c8601ec8c   3414815163700866188
 *     "orders"   0x00125d9250be8b4c   0x00125d9250be8b4c   5169432582064972
 *
 * It is inline, so with optimization a call on a string literal folds to a constant.
 */
static inline tally_tag tally_tag_named_bytes(const void *name, size_t len) {
    const uint8_t *bytes = (const uint8_t *)name;
    uint64_t hash = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++) {
        hash ^= bytes[i];
        hash *= UINT64_C(0x100000001b3);
    }
    hash &= ~(UINT64_C(1) << 63);
    return hash == 0 ? 1 : hash;
}

/** `tally_tag_named_bytes` of a NUL-terminated name: `tally_tag_named("orders")`. */
static inline tally_tag tally_tag_named(const char *name) {
    size_t len = 0;
    while (name[len] != '\0')
        len++;
    return tally_tag_named_bytes(name, len);
}

/* ------------------------------------------------------------------------------------ */
/* The log                                                                               */
/* ------------------------------------------------------------------------------------ */

/*
 * The book's shared log: the LogBook API of Boki (section 3).
 *
 * Every invocation is bound to one book, and these calls act on it; a function never
 * names a book, so it cannot read or write another one. Seqnums are totally ordered
 * across the book; a tag selects a sub-stream of it, and TALLY_TAG_ALL is the whole
 * book.
 *
 *   tag 0 (ALL):  1   2   3   4   5   6   7        every record, by seqnum
 *   tag "a":      1       3           6            records that carry "a"
 *   tag "b":          2   3       5                records that carry "b"
 *                             ^
 *   read_next("a", 4) = 6     read_prev("b", 4) = 3     check_tail("a") = 6
 *
 *     tally_tag a = tally_tag_named("a");
 *     tally_record record;
 *     bool found;
 *     tally_error err;
 *     if (tally_log_read_next(a, 4, &record, &found, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     if (found) {
 *         ... record.seqnum, record.data.data, record.data.len ...
 *         tally_record_free(&record);
 *     }
 */

/** A record read from the log. Release it with `tally_record_free`. */
typedef struct tally_record {
    /** The record's position in the book. */
    tally_seqnum seqnum;
    /** The tags the record was appended with, sorted, without `TALLY_TAG_ALL`. */
    tally_tag *tags;
    /** The number of tags. */
    size_t tags_len;
    /** The record's payload, as appended. */
    tally_bytes data;
    /**
     * Whether the record has aux data: data attached later by `tally_log_set_aux_data`,
     * if the node that served the read has it. It is a cache: it may be missing even
     * after it was set.
     */
    bool has_aux;
    /** The aux data when `has_aux`; empty otherwise. */
    tally_bytes aux;
} tally_record;

/** Releases the record's tags, data and aux data. NULL is accepted. */
void tally_record_free(tally_record *record);

/**
 * Appends a record with `data_len` bytes of `data` to the streams of the `tags_len`
 * tags at `tags`, and stores its seqnum in `*seqnum`.
 *
 * With no tags the record is only in the whole book's stream. Tags with the top bit
 * set are refused with `TALLY_INVALID_ARGUMENT`.
 */
int tally_log_append(const tally_tag *tags, size_t tags_len, const void *data, size_t data_len,
                     tally_seqnum *seqnum, tally_error *err);

/**
 * Appends like `tally_log_append`, but only if the record becomes entry number
 * `cond_pos` (counting from 0) of `cond_tag`'s stream.
 *
 * When another record holds that position, the append fails with `TALLY_CONFLICT`, and
 * `err->holder` names the holder unless it has been trimmed since. This is the building
 * block for exactly-once steps and log-based locks; `cond_tag` must not be
 * `TALLY_TAG_ALL`.
 */
int tally_log_cond_append(const tally_tag *tags, size_t tags_len, const void *data, size_t data_len,
                          tally_tag cond_tag, uint64_t cond_pos, tally_seqnum *seqnum, tally_error *err);

/**
 * Reads the first record of `tag`'s stream at or after `min`. Sets `*found` to whether
 * there is one and fills `*record` with it (an empty record when there is none), which
 * the caller releases.
 */
int tally_log_read_next(tally_tag tag, tally_seqnum min, tally_record *record, bool *found, tally_error *err);

/**
 * Reads the last record of `tag`'s stream at or before `max`. Sets `*found` to whether
 * there is one and fills `*record` with it (an empty record when there is none), which
 * the caller releases.
 */
int tally_log_read_prev(tally_tag tag, tally_seqnum max, tally_record *record, bool *found, tally_error *err);

/**
 * Reads the last record of `tag`'s stream. Sets `*found` to whether the stream has one
 * and fills `*record` with it (an empty record when there is none), which the caller
 * releases.
 */
int tally_log_check_tail(tally_tag tag, tally_record *record, bool *found, tally_error *err);

/**
 * Removes the records of `tag`'s stream before `seqnum`; with `TALLY_TAG_ALL`, the
 * records of every stream before `seqnum`.
 */
int tally_log_trim(tally_tag tag, tally_seqnum seqnum, tally_error *err);

/**
 * Attaches `data_len` bytes of `data` to the record `seqnum` as its aux data, a
 * best-effort cache that later reads may return in `tally_record.aux` (Boki section 3).
 *
 * The typical use is a snapshot of a state machine's value as of this record, so that
 * the next reader replays the log from here instead of from the start (Boki 5.4).
 */
int tally_log_set_aux_data(tally_seqnum seqnum, const void *data, size_t data_len, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* State                                                                                 */
/* ------------------------------------------------------------------------------------ */

/*
 * Durable key-value state with exactly-once semantics (Halfmoon, SOSP '23).
 *
 * Values live under byte-string keys in named tables of the invocation's book. Every
 * operation is exactly-once across re-executions of the invocation: when the platform
 * runs a function again after a crash, with the same invocation ID, each get returns
 * what it returned the first time and each put and delete takes effect once.
 * Operations are told apart by their order within the invocation, so a function should
 * make the same calls in the same order when it runs again: decide from the input and
 * from what the platform returns, not from clocks or randomness.
 *
 * Each table has a protocol, chosen at deploy or in the node's configuration:
 * `read-optimized` (log-free reads), `write-optimized` (log-free writes), `symmetric`
 * (logs both), `unsafe` (no logging, no guarantee) or `auto`. The protocol changes the
 * cost of each operation, not the code that calls it.
 *
 * Operations are not transactions: two invocations that read and then write the same
 * key concurrently may lose an update.
 *
 * Table names are 1 to 64 of `a-z 0-9 - _`; keys are 1 to 1024 bytes; values are at
 * most 512 KiB. Anything else is refused with TALLY_INVALID_ARGUMENT or TALLY_TOO_LARGE.
 *
 *     // Adds 1 to the visits of a page, once per invocation however often it runs.
 *     int64_t visits = 0;
 *     bool found;
 *     tally_error err;
 *     if (tally_state_get_i64("pages", "index.html", 10, &visits, &found, &err) != TALLY_OK ||
 *         tally_state_put_i64("pages", "index.html", 10, visits + 1, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 */

/**
 * Reads the value of the `key_len`-byte `key` in `table`. Sets `*found` to whether the
 * key is present and fills `*value` with the value (an empty buffer when the key is
 * absent), which the caller releases.
 */
int tally_state_get(const char *table, const void *key, size_t key_len, tally_bytes *value, bool *found,
                    tally_error *err);

/** Sets the value of `key` in `table` to `value_len` bytes of `value`. */
int tally_state_put(const char *table, const void *key, size_t key_len, const void *value, size_t value_len,
                    tally_error *err);

/** Removes `key` from `table`; nothing happens if it is absent. */
int tally_state_delete(const char *table, const void *key, size_t key_len, tally_error *err);

/**
 * Reads the value of `key` in `table` as an integer in decimal text, as
 * `tally_state_put_i64` writes it. Sets `*found` to whether the key is present; if so,
 * stores the integer in `*value`.
 *
 * A value that is not a decimal i64 fails with `TALLY_INVALID_ARGUMENT` and the message
 * `the value of key "<key>" in table "<table>" is not a decimal i64: "<value>"`, with
 * the key and at most the first 32 bytes of the value escaped (as the Rust SDK does).
 */
int tally_state_get_i64(const char *table, const void *key, size_t key_len, int64_t *value, bool *found,
                        tally_error *err);

/**
 * Sets the value of `key` in `table` to `value` in decimal text, which
 * `tally_state_get_i64` reads back and other languages' SDKs read too.
 */
int tally_state_put_i64(const char *table, const void *key, size_t key_len, int64_t value, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Objects                                                                               */
/* ------------------------------------------------------------------------------------ */

/*
 * Durable JSON objects of the invocation's book, with transactions across them
 * (BokiStore, Boki section 5.2).
 *
 * An object is named by a string (1 to 256 bytes) and holds one JSON value, `null` until
 * it is first written. Paths are JSON pointers (RFC 6901): "" is the whole object,
 * "/a/0/b~1c" is field `b/c` of element 0 of field `a`; `tally_json_pointer_append`
 * builds one from keys that may hold `/` or `~`. Values go in and come out as JSON text
 * (`tally_json_quote` makes a string value); a write makes missing parent objects.
 * Every call is exactly-once across re-executions of the invocation, as the state
 * operations are: a read returns what it returned the first time, a write takes effect
 * once, and calls are told apart by their order.
 *
 * Outside a transaction, a read sees the object as of the invocation's last step (its
 * own writes included), and each write is logged on its own. Between
 * `tally_objects_begin` and `tally_objects_commit`, reads see one snapshot of every
 * object of the book, taken at the begin, with the transaction's own writes; writes are
 * buffered, and the commit logs them in one record and says whether they took effect.
 * Transactions are serializable: one commits exactly when no object it read was written
 * by someone else since its begin; otherwise nothing of it takes effect, and running it
 * again may succeed (`tally_objects_transaction` does that). Objects written but not
 * read never conflict: `tally_objects_increment` and `tally_objects_push` apply to
 * whatever the field holds when the commit is applied.
 *
 * An operation that does not fit the object as the caller sees it (incrementing a
 * string) fails with TALLY_INVALID_ARGUMENT; one that stops fitting because of a
 * concurrent write does nothing. A malformed name, path or JSON text is refused with
 * TALLY_INVALID_ARGUMENT, a value or a transaction too large with TALLY_TOO_LARGE.
 *
 *     // Moves `amount` from alice to bob, all or nothing: the body of a transaction.
 *     static int transfer(void *arg, tally_error *err) {
 *         int64_t amount = *(const int64_t *)arg, balance = 0;
 *         bool found;
 *         int status = tally_objects_get_i64("accounts", "/alice", &balance, &found, err);
 *         if (status != TALLY_OK)
 *             return status;
 *         if (balance < amount)
 *             return INSUFFICIENT_FUNDS;    // a code of the function's own, say -1: aborts
 *         status = tally_objects_increment("accounts", "/alice", -amount, err);
 *         if (status != TALLY_OK)
 *             return status;
 *         return tally_objects_increment("accounts", "/bob", amount, err);
 *     }
 *
 *     int64_t amount = 10;
 *     bool committed;
 *     int status = tally_objects_transaction(transfer, &amount, 10, &committed, &err);
 */

/**
 * Reads the JSON text at `path` of `object`. Sets `*found` to whether something is
 * there and `*json` to the text, NUL-terminated, which the caller releases with `free`
 * (NULL when nothing is there). A field holding `null` is found, as the text "null"; the
 * whole object is not while it holds `null` (as it does before its first write).
 */
int tally_objects_get(const char *object, const char *path, char **json, bool *found, tally_error *err);

/**
 * Reads the integer at `path` of `object`, as `tally_objects_increment` and
 * `tally_objects_set_i64` write it. Sets `*found` to whether something is there; if so,
 * stores the integer in `*value`.
 *
 * Anything else there (a string, a fraction, an integer beyond an i64, `null`) fails
 * with `TALLY_INVALID_ARGUMENT` and the message
 * `the value at "<path>" of object "<object>" is not an i64: <json>`, with at most the
 * first 32 bytes of the JSON text.
 */
int tally_objects_get_i64(const char *object, const char *path, int64_t *value, bool *found, tally_error *err);

/** Sets the value at `path` of `object` to the JSON text `json`. */
int tally_objects_set(const char *object, const char *path, const char *json, tally_error *err);

/** Sets the value at `path` of `object` to the integer `value`. */
int tally_objects_set_i64(const char *object, const char *path, int64_t value, tally_error *err);

/** Sets the value at `path` of `object` to an empty object: `tally_objects_set` of "{}". */
int tally_objects_make_object(const char *object, const char *path, tally_error *err);

/** Sets the value at `path` of `object` to an empty array: `tally_objects_set` of "[]". */
int tally_objects_make_array(const char *object, const char *path, tally_error *err);

/**
 * Adds `by` (which may be negative) to the number at `path` of `object`, 0 when
 * nothing is there. An integer saturates at the bounds of an i64 instead of wrapping.
 */
int tally_objects_increment(const char *object, const char *path, int64_t by, tally_error *err);

/** Appends the JSON text `json` to the array at `path` of `object` (an empty one when nothing is there). */
int tally_objects_push(const char *object, const char *path, const char *json, tally_error *err);

/** Removes the field or array element at `path` of `object`; the path "" empties the object. */
int tally_objects_remove(const char *object, const char *path, tally_error *err);

/**
 * Begins a transaction on the book's objects, which `tally_objects_commit` or
 * `tally_objects_abort` ends. An invocation has one transaction at a time: beginning
 * another before the end fails with `TALLY_INVALID_ARGUMENT`.
 */
int tally_objects_begin(tally_error *err);

/**
 * Begins a read-only transaction: its reads see one snapshot, it refuses writes with
 * `TALLY_INVALID_ARGUMENT`, and it always commits.
 */
int tally_objects_begin_read_only(tally_error *err);

/**
 * Ends the transaction: sets `*committed` to true if its writes took effect, false if
 * it conflicted with a concurrent write to an object it read (then nothing of it took
 * effect, and running it again from `tally_objects_begin` may succeed). A commit that
 * fails has ended the transaction too. Without a transaction in progress it fails
 * with `TALLY_INVALID_ARGUMENT`.
 */
int tally_objects_commit(bool *committed, tally_error *err);

/** Drops the transaction in progress: none of its writes take effect. */
int tally_objects_abort(tally_error *err);

/**
 * The body of a transaction for `tally_objects_transaction`: reads and writes objects
 * with the `tally_objects_*` calls (not begin, commit or abort), passing them `err`,
 * and returns `TALLY_OK` to commit, anything else to abort. `arg` is the helper's.
 */
typedef int (*tally_transaction_body)(void *arg, tally_error *err);

/**
 * Runs `body(arg, err)` in a read-write transaction and commits it; while the commit
 * conflicts, runs it again in a new transaction, at most `attempts_max` times in all.
 * Sets `*committed` to whether one of them committed: false means every attempt
 * conflicted, and nothing of any took effect.
 *
 * When the body returns anything but `TALLY_OK`, the helper aborts the transaction and
 * returns what the body returned, as it is: a `tally_status` of a call that failed,
 * whose details are in `err`, or a code of the function's own (a negative one is never
 * a `tally_status`), with `err` as the body left it. A failed begin or commit is
 * returned the same way. An `attempts_max` of 0 is refused with
 * `TALLY_INVALID_ARGUMENT`.
 *
 * The body runs once per attempt, so whatever it does besides the objects (output,
 * other calls) it does again on a retry. Commits are steps of the invocation: when the
 * invocation runs again, each attempt gets the outcome it got the first time.
 */
int tally_objects_transaction(tally_transaction_body body, void *arg, uint32_t attempts_max, bool *committed,
                              tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Queues                                                                                */
/* ------------------------------------------------------------------------------------ */

/*
 * Durable FIFO queues of the invocation's book (BokiQueue, Boki section 5.3).
 *
 * A queue is named by a string (1 to 256 bytes) and split into shards: the messages one
 * invocation pushes go to one shard, in order, and each shard is FIFO. Every message is
 * popped exactly once, by one invocation, whatever crashes and re-executions happen.
 *
 *     if (tally_queues_push("orders", input, input_len, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     ...
 *     tally_bytes order;
 *     bool found;
 *     if (tally_queues_pop("orders", 5000, &order, &found, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     if (found) {
 *         ... order.data, order.len ...
 *         tally_bytes_free(&order);
 *     }
 */

/** Pushes `message_len` bytes of `message` (at most 512 KiB) to `queue`. */
int tally_queues_push(const char *queue, const void *message, size_t message_len, tally_error *err);

/**
 * Pops the oldest message of one of the shards of `queue` (this invocation's own shard
 * first), waiting up to `timeout_ms` milliseconds for one without spinning (0 does not
 * wait, and the wait ends before the function's time limit whatever `timeout_ms` says).
 * Sets `*found` to whether there was one and fills `*message`
 * with it (an empty buffer when the queue stayed empty), which the caller releases.
 */
int tally_queues_pop(const char *queue, uint64_t timeout_ms, tally_bytes *message, bool *found, tally_error *err);

/**
 * Pops up to `max` (1 to 100, else `TALLY_INVALID_ARGUMENT`) of the oldest messages of
 * one of the shards of `queue`, in order, with one record of the log where `max` pops
 * would log `max`: waits up to `timeout_ms` for the first as `tally_queues_pop` does,
 * then takes what that shard holds, up to `max`. Sets `*messages` to an array of
 * `*count` messages (none when the queue stayed empty), which the caller releases with
 * `tally_bytes_list_free`.
 */
int tally_queues_pop_many(const char *queue, uint32_t max, uint64_t timeout_ms, tally_bytes **messages, size_t *count,
                          tally_error *err);

/** Releases an array of `count` buffers, each and the array (`tally_queues_pop_many`'s). NULL is accepted. */
void tally_bytes_list_free(tally_bytes *list, size_t count);

/* ------------------------------------------------------------------------------------ */
/* Locks                                                                                 */
/* ------------------------------------------------------------------------------------ */

/*
 * Locks of the invocation's book (BokiFlow, Boki section 5.1). A lock is named by a
 * string (1 to 256 bytes) and held by one invocation at a time. A holder that crashes
 * keeps it while the platform runs it again; an invocation's locks are released when it
 * finishes, whatever its outcome.
 *
 *     bool acquired;
 *     if (tally_locks_acquire("inventory", 10000, &acquired, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     if (!acquired)
 *         return tally_fail(out, "the inventory is busy");
 *     ...
 *     if (tally_locks_release("inventory", &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 */

/**
 * Acquires `lock` for this invocation, waiting up to `timeout_ms` milliseconds while
 * another invocation holds it (0 does not wait, and the wait ends before the function's
 * time limit whatever `timeout_ms` says). Sets `*acquired` to true if this invocation
 * holds it now (at once if it held it already), false if the wait timed out. Locks do
 * not count: one release frees a lock however often it was acquired.
 */
int tally_locks_acquire(const char *lock, uint64_t timeout_ms, bool *acquired, tally_error *err);

/** Releases `lock`; fails with `TALLY_INVALID_ARGUMENT` if this invocation does not hold it. */
int tally_locks_release(const char *lock, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Calls to other functions                                                              */
/* ------------------------------------------------------------------------------------ */

/**
 * Runs the function deployed as `function` on the same book with `input_len` bytes of
 * `input`, waits for it, and fills `*output` with its output, which the caller releases.
 *
 * The child sees everything this invocation has read or written on the log. When the
 * child's handler fails or the child traps, the call fails with `TALLY_FAILED`; an
 * unknown function fails with `TALLY_NOT_FOUND`.
 *
 * The call is exactly-once: the child's invocation ID is derived from this
 * invocation's ID and the call's step, and its outcome is logged, so when the platform
 * runs this invocation again after a crash, the call returns the logged outcome instead
 * of running the child again.
 *
 *     // A function may call itself, under the name it was deployed as.
 *     char *self = tally_context_function_name();
 *     tally_bytes output;
 *     int status = tally_invoke_call(self, "child", 5, &output, &err);
 *     free(self);
 */
int tally_invoke_call(const char *function, const void *input, size_t input_len, tally_bytes *output,
                      tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* The context                                                                           */
/* ------------------------------------------------------------------------------------ */

/**
 * The invocation's ID, a NUL-terminated string that the caller releases with `free`. It
 * stays the same when the platform runs the invocation again, so it can key work that
 * must happen once.
 */
char *tally_context_invocation_id(void);

/** The ID of the book the invocation is bound to, which every `tally_log_*` call acts on. */
uint64_t tally_context_book_id(void);

/**
 * Which execution of the invocation this is: 1 for the first, then 2, 3, ... when the
 * platform runs it again.
 */
uint32_t tally_context_attempt(void);

/** The name the function was deployed under, NUL-terminated; the caller releases it with `free`. */
char *tally_context_function_name(void);

/**
 * The key the invocation was addressed to (`?key=`), NUL-terminated, which the caller
 * releases with `free`; NULL if it has none. An exclusive keyed invocation runs alone
 * among the function's invocations with that key.
 */
char *tally_context_key(void);

/**
 * Sleeps durably for `ms` milliseconds (at most a year). The wake time is logged, so a
 * re-execution of the invocation wakes at the same time, and the sleep may outlast the
 * function's time limit and node restarts: a short sleep waits in place; a long one
 * suspends the invocation (nothing is held while it sleeps, and a synchronous caller is
 * answered HTTP 202 with the invocation's ID) and runs it again at the wake time, which
 * replays everything before this call and returns `TALLY_OK` here.
 *
 * Like the state operations, a sleep is a step of the invocation: it should come at the
 * same point when the invocation runs again. A sleep longer than a year fails with
 * `TALLY_INVALID_ARGUMENT`.
 *
 *     // Sends a reminder a day after the order, even across restarts.
 *     if (tally_context_sleep(24 * 3600 * 1000, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 */
int tally_context_sleep(uint64_t ms, tally_error *err);

/**
 * Sleeps durably until `unix_ms`, in milliseconds since the Unix epoch, as
 * `tally_context_sleep` does (at most a year from now); a time in the past returns at
 * once.
 */
int tally_context_sleep_until(uint64_t unix_ms, tally_error *err);

/**
 * Creates a promise that the outside world completes once, with
 * `POST /v1/promises/{id}?book=B` and the value as the body, and sets `*id` to its ID (the
 * same when the platform runs the invocation again), a NUL-terminated string that the
 * caller releases with `free`: hand it out (store it, append it to the log, pass it to a
 * call), then await it with `tally_context_promise_await`.
 *
 *     char *promise;
 *     if (tally_context_promise_create(&promise, &err) != TALLY_OK)
 *         return tally_fail_error(out, &err);
 *     // Where the approver finds it.
 *     tally_tag approvals = tally_tag_named("approvals");
 *     int status = tally_log_append(&approvals, 1, promise, strlen(promise), &seqnum, &err);
 *     ...
 *     tally_bytes decision;
 *     status = tally_context_promise_await(promise, &decision, &err);
 *     free(promise);
 */
int tally_context_promise_create(char **id, tally_error *err);

/**
 * Fills `*value` with the value of promise `id` (NUL-terminated) of this book, which the
 * caller releases with `tally_bytes_free`, waiting durably for it as
 * `tally_context_sleep` does, for as long as it takes: the promise may be completed
 * before, during or after the wait, and a long wait suspends the invocation (a
 * synchronous caller is answered HTTP 202 with the invocation's ID) until the completion
 * runs it again, which replays everything before this call. What the await got is
 * logged, so a re-execution of the invocation gets the same.
 *
 * A promise this book never created fails with `TALLY_NOT_FOUND`, an `id` that is not a
 * promise ID with `TALLY_INVALID_ARGUMENT`. Like a sleep, an await is a step of the
 * invocation: it should come at the same point when the invocation runs again.
 */
int tally_context_promise_await(const char *id, tally_bytes *value, tally_error *err);

/**
 * `tally_context_promise_await` for at most `timeout_ms` milliseconds: once that long
 * has passed without a completion it fails with `TALLY_TIMEOUT` (a later completion is
 * accepted and changes nothing). A timeout of 0 takes the value only if the promise is
 * already complete.
 *
 *     tally_bytes decision;
 *     int status = tally_context_promise_await_timeout(promise, 7 * 24 * 3600 * 1000ull, &decision, &err);
 *     if (status == TALLY_TIMEOUT)
 *         ...  // no answer within a week
 */
int tally_context_promise_await_timeout(const char *id, uint64_t timeout_ms, tally_bytes *value, tally_error *err);

/* ------------------------------------------------------------------------------------ */
/* Text                                                                                  */
/* ------------------------------------------------------------------------------------ */

/*
 * Integers and text in the formats the other SDKs use, so that stored values and
 * messages agree across languages: the integer helpers of `tally_state` store decimal
 * text, and these parse it exactly as Rust's `str::parse` does (an optional `+`, or `-`
 * for signed types, then ASCII digits; nothing else, not even whitespace).
 */

/** The size of a buffer that holds any i64 or u64 in decimal, with its NUL. */
#define TALLY_INT_TEXT_MAX 21

/** Why text is not an integer (the cases of Rust's `ParseIntError`). */
typedef enum tally_parse_status {
    /** The text is an integer. */
    TALLY_PARSE_OK = 0,
    /** The text is empty. */
    TALLY_PARSE_EMPTY = 1,
    /** The text has something other than a digit (after an optional sign). */
    TALLY_PARSE_INVALID_DIGIT = 2,
    /** The number is above the type's maximum. */
    TALLY_PARSE_POS_OVERFLOW = 3,
    /** The number is below the type's minimum. */
    TALLY_PARSE_NEG_OVERFLOW = 4,
} tally_parse_status;

/**
 * Parses `len` bytes of decimal text as an i64 into `*value`; returns a
 * `tally_parse_status` (`*value` is written only on `TALLY_PARSE_OK`).
 */
int tally_parse_i64(const void *text, size_t len, int64_t *value);

/** Parses `len` bytes of decimal text as a u64 into `*value`, like `tally_parse_i64`. */
int tally_parse_u64(const void *text, size_t len, uint64_t *value);

/**
 * The status's message as Rust prints it ("invalid digit found in string", "number too
 * large to fit in target type", ...). A static string.
 */
const char *tally_parse_status_message(int status);

/** Writes `value` in decimal into `text`, NUL-terminated, and returns its length. */
size_t tally_format_i64(int64_t value, char text[TALLY_INT_TEXT_MAX]);

/** Writes `value` in decimal into `text`, NUL-terminated, and returns its length. */
size_t tally_format_u64(uint64_t value, char text[TALLY_INT_TEXT_MAX]);

/** A view of `len` bytes at `data` that belong to someone else (nothing to free). */
typedef struct tally_slice {
    /** The first byte. */
    const uint8_t *data;
    /** The number of bytes. */
    size_t len;
} tally_slice;

/**
 * Splits UTF-8 text into the words between runs of whitespace, as Rust's
 * `str::split_whitespace` does (whitespace is Unicode's White_Space: ASCII space, tab,
 * newline, vertical tab, form feed and carriage return, U+0085, U+00A0, U+1680,
 * U+2000 to U+200A, U+2028, U+2029, U+202F, U+205F and U+3000). Stores the first
 * `words_max` words in `words` (which may be NULL when `words_max` is 0) as views into
 * `text`, and returns the number of words, which may be more than `words_max`: call it
 * once with 0 to count, or give it room for one more word than a command can have.
 */
size_t tally_split_whitespace(const void *text, size_t len, tally_slice *words, size_t words_max);

/** Whether the slice holds exactly the NUL-terminated `text`. */
bool tally_slice_eq(tally_slice slice, const char *text);

/**
 * Checks that `len` bytes are UTF-8, as Rust's `str::from_utf8` does. Returns true if
 * they are. If not, sets `*valid_up_to` to the length of the longest valid prefix and
 * `*error_len` to the length of the invalid sequence after it (1 to 3), or to 0 when the
 * text ends in the middle of a character. Either pointer may be NULL.
 */
bool tally_utf8_check(const void *text, size_t len, size_t *valid_up_to, size_t *error_len);

/**
 * Appends the text of a failed `tally_utf8_check` to `out`, as Rust's `Utf8Error`
 * displays it: "invalid utf-8 sequence of <error_len> bytes from index <valid_up_to>",
 * or "incomplete utf-8 byte sequence from index <valid_up_to>" when `error_len` is 0.
 */
void tally_utf8_error_text(size_t valid_up_to, size_t error_len, tally_bytes *out);

/**
 * Appends `len` bytes to `out` as UTF-8, each invalid sequence replaced by U+FFFD, the
 * same replacements as Rust's `String::from_utf8_lossy`.
 */
void tally_utf8_lossy(const void *text, size_t len, tally_bytes *out);

/**
 * Appends UTF-8 text to `out` quoted and escaped as Rust's `{:?}` shows a `str`:
 * `"` and `\` escaped, `\t \r \n \0`, other control characters as `\u{..}`. (Rust also
 * escapes a few non-ASCII characters, such as combining marks and format characters;
 * this covers the common ones.) Invalid UTF-8 is shown as by `tally_utf8_lossy`.
 */
void tally_quote(const void *text, size_t len, tally_bytes *out);

/**
 * Appends bytes to `out` escaped as Rust's `<[u8]>::escape_ascii` shows them (without
 * quotes): printable ASCII as is, `\t \r \n \\ \' \"`, anything else as `\xNN`.
 */
void tally_escape_ascii(const void *bytes, size_t len, tally_bytes *out);

/**
 * Appends `len` bytes of UTF-8 text to `out` as a JSON string, for `tally_objects_set`
 * and `tally_objects_push`: quoted, with `"`, `\`, `\b \f \n \r \t` and other control
 * characters (as `\u00XX`) escaped, as serde_json writes them. Invalid UTF-8 is replaced
 * as by `tally_utf8_lossy`.
 *
 *     tally_bytes name = TALLY_BYTES_INIT;
 *     tally_json_quote(input, input_len, &name);
 *     int status = tally_objects_set("user", "/name", tally_bytes_cstr(&name), &err);
 *     tally_bytes_free(&name);
 */
void tally_json_quote(const void *text, size_t len, tally_bytes *out);

/**
 * Appends `/` and `len` bytes of `token` to the JSON pointer `path` as one reference
 * token (RFC 6901): `~` becomes `~0` and `/` becomes `~1`, so any key names one field.
 * Invalid UTF-8 is replaced as by `tally_utf8_lossy`. An empty buffer is the path "".
 *
 *     tally_bytes path = TALLY_BYTES_INIT;
 *     tally_json_pointer_append(&path, "carts", 5);
 *     tally_json_pointer_append(&path, user, strlen(user));  // "/carts/a~1b" for "a/b"
 *     int status = tally_objects_push("shop", tally_bytes_cstr(&path), "1", &err);
 *     tally_bytes_free(&path);
 */
void tally_json_pointer_append(tally_bytes *path, const void *token, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_H */
