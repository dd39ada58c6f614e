/*
 * The fake platform of `test_calls.c`: it defines the imports that the generated
 * bindings declare (`tally_platform_*`, `wasi_config_store_*`), so the SDK's sources
 * call it instead of the host. It writes each call it gets, with its arguments, into a
 * call log that the tests compare as text, and answers with the replies a test queued,
 * in order. Everything it hands over is allocated as the canonical ABI does (an empty
 * list is a dangling non-NULL pointer), so AddressSanitizer checks that the SDK takes
 * ownership as the bindings expect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_platform.h"
#include "internal.h"

/* ---- The fake platform --------------------------------------------------------------- */


#define REPLIES_MAX 16

static struct {
    reply replies[REPLIES_MAX];
    size_t replies_len, replies_next;
    /** The calls so far, each as `interface.name(arg,arg)` and a `;`. */
    tally_bytes calls;
    /** The number of arguments of the call being logged so far. */
    size_t args;
} fake;

/** Forgets the calls and the replies. */
void fake_reset(void) {
    tally_bytes_free(&fake.calls);
    fake.replies_len = 0;
    fake.replies_next = 0;
}

void queue_reply(reply r) {
    if (fake.replies_len == REPLIES_MAX)
        abort();
    fake.replies[fake.replies_len++] = r;
}

/** Queues a success carrying `text` (NULL for none) and `flag`. */
void reply_ok(const char *text, bool flag) {
    queue_reply((reply){SUCCESS, text, flag, false, 0});
}

/** Queues a failure with WIT error case `error` and `message`. */
void reply_error(int error, const char *message) {
    queue_reply((reply){error, message, false, false, 0});
}

/** The reply to the call being made: the next one queued, or an empty success. */
static reply next_reply(void) {
    if (fake.replies_next == fake.replies_len)
        return (reply){SUCCESS, NULL, false, false, 0};
    return fake.replies[fake.replies_next++];
}

/** Checks the call log against `expect` and starts a new one. */
void check_calls(const char *what, const char *expect) {
    check_text(what, fake.calls.data, fake.calls.len, expect);
    check(fake.replies_next == fake.replies_len, what, "a queued reply was not used");
    fake_reset();
}

/** Bytes as the canonical ABI returns them: allocated, except an empty list's. */
static uint8_t *abi_copy(const void *data, size_t len) {
    if (len == 0)
        return (uint8_t *)1;
    uint8_t *copy = malloc(len);
    if (copy == NULL)
        abort();
    memcpy(copy, data, len);
    return copy;
}

static function_string_t abi_string(const char *text) {
    function_string_t string = {abi_copy(text, strlen(text)), strlen(text)};
    return string;
}

/** Logs the start of a call: its name, then its arguments with `arg*`. */
static void call(const char *name) {
    tally_bytes_append_str(&fake.calls, name);
    tally_bytes_append_str(&fake.calls, "(");
    fake.args = 0;
}

static void arg_sep(void) {
    if (fake.args++ > 0)
        tally_bytes_append_str(&fake.calls, ",");
}

static void arg_string(const function_string_t *text) {
    arg_sep();
    tally_bytes_append(&fake.calls, text->ptr, text->len);
}

static void arg_bytes(const function_list_u8_t *bytes) {
    arg_sep();
    tally_escape_ascii(bytes->ptr, bytes->len, &fake.calls);
}

static void arg_i64(int64_t value) {
    arg_sep();
    tally_bytes_append_i64(&fake.calls, value);
}

static void arg_u64(uint64_t value) {
    arg_sep();
    tally_bytes_append_u64(&fake.calls, value);
}

static void arg_text(const char *text) {
    arg_sep();
    tally_bytes_append_str(&fake.calls, text);
}

/** Ends the call's log entry and fills `*err` if its reply is an error; returns whether it is. */
static bool failed(reply r, tally_platform_types_error_t *err) {
    tally_bytes_append_str(&fake.calls, ");");
    if (r.error == SUCCESS)
        return false;
    err->tag = (uint8_t)r.error;
    if (r.error == TALLY_PLATFORM_TYPES_ERROR_CONFLICT) {
        err->val.conflict.is_some = r.has_holder;
        err->val.conflict.val = r.holder;
    } else {
        err->val.invalid_argument = abi_string(r.text);
    }
    return true;
}

/* The bindings' own, which frees what the canonical ABI allocated. */
void function_string_free(function_string_t *ret) {
    if (ret->len > 0)
        free(ret->ptr);
    ret->ptr = NULL;
    ret->len = 0;
}

/* wasi:config/store: a reply's text is the value (get) or `k=v&k=v` (get-all); an error
 * reply's case is the config error's (0 upstream, 1 io). */

static bool config_failed(reply r, wasi_config_store_error_t *err) {
    tally_bytes_append_str(&fake.calls, ");");
    if (r.error == SUCCESS)
        return false;
    err->tag = (uint8_t)r.error;
    err->val.upstream = abi_string(r.text);
    return true;
}

bool wasi_config_store_get(function_string_t *key, function_option_string_t *ret, wasi_config_store_error_t *err) {
    call("config.get");
    arg_string(key);
    reply r = next_reply();
    if (config_failed(r, err))
        return false;
    ret->is_some = r.text != NULL;
    if (r.text != NULL)
        ret->val = abi_string(r.text);
    return true;
}

bool wasi_config_store_get_all(function_list_tuple2_string_string_t *ret, wasi_config_store_error_t *err) {
    call("config.get_all");
    reply r = next_reply();
    if (config_failed(r, err))
        return false;
    size_t len = r.text[0] == '\0' ? 0 : 1;
    for (const char *p = r.text; *p != '\0'; p++)
        len += *p == '&';
    ret->len = len;
    ret->ptr = len == 0 ? (void *)4 : malloc(len * sizeof ret->ptr[0]);
    const char *p = r.text;
    for (size_t i = 0; i < len; i++) {
        size_t pair_len = strcspn(p, "&");
        size_t key_len = strcspn(p, "=");
        size_t value_len = pair_len - key_len - 1;
        ret->ptr[i].f0 = (function_string_t){abi_copy(p, key_len), key_len};
        ret->ptr[i].f1 = (function_string_t){abi_copy(p + key_len + 1, value_len), value_len};
        p += pair_len + 1;
    }
    return true;
}

bool tally_platform_objects_get(function_string_t *object, function_string_t *path, function_option_string_t *ret,
                                tally_platform_objects_error_t *err) {
    call("objects.get");
    arg_string(object);
    arg_string(path);
    reply r = next_reply();
    if (failed(r, err))
        return false;
    ret->is_some = r.text != NULL;
    if (r.text != NULL)
        ret->val = abi_string(r.text);
    return true;
}

bool tally_platform_objects_set(function_string_t *object, function_string_t *path, function_string_t *json,
                                tally_platform_objects_error_t *err) {
    call("objects.set");
    arg_string(object);
    arg_string(path);
    arg_string(json);
    return !failed(next_reply(), err);
}

bool tally_platform_objects_increment(function_string_t *object, function_string_t *path, int64_t by,
                                      tally_platform_objects_error_t *err) {
    call("objects.increment");
    arg_string(object);
    arg_string(path);
    arg_i64(by);
    return !failed(next_reply(), err);
}

bool tally_platform_objects_push(function_string_t *object, function_string_t *path, function_string_t *json,
                                 tally_platform_objects_error_t *err) {
    call("objects.push");
    arg_string(object);
    arg_string(path);
    arg_string(json);
    return !failed(next_reply(), err);
}

bool tally_platform_objects_remove(function_string_t *object, function_string_t *path,
                                   tally_platform_objects_error_t *err) {
    call("objects.remove");
    arg_string(object);
    arg_string(path);
    return !failed(next_reply(), err);
}

bool tally_platform_objects_begin(bool read_only, tally_platform_objects_error_t *err) {
    call("objects.begin");
    arg_text(read_only ? "read-only" : "read-write");
    return !failed(next_reply(), err);
}

bool tally_platform_objects_commit(bool *ret, tally_platform_objects_error_t *err) {
    call("objects.commit");
    reply r = next_reply();
    if (failed(r, err))
        return false;
    *ret = r.flag;
    return true;
}

bool tally_platform_objects_abort(tally_platform_objects_error_t *err) {
    call("objects.abort");
    return !failed(next_reply(), err);
}

bool tally_platform_queues_push(function_string_t *queue, function_list_u8_t *message,
                                tally_platform_queues_error_t *err) {
    call("queues.push");
    arg_string(queue);
    arg_bytes(message);
    return !failed(next_reply(), err);
}

bool tally_platform_queues_pop_many(function_string_t *queue, uint32_t max, uint64_t timeout_ms,
                                    function_list_list_u8_t *ret, tally_platform_queues_error_t *err) {
    call("queues.pop_many");
    arg_string(queue);
    arg_u64(max);
    arg_u64(timeout_ms);
    reply r = next_reply();
    if (failed(r, err))
        return false;
    /* The reply's text is the messages, each ended by '|' (NULL: none). */
    size_t n = 0;
    for (const char *c = r.text; c != NULL && *c != '\0'; c++)
        n += *c == '|';
    ret->len = n;
    ret->ptr = n == 0 ? (function_list_u8_t *)4 : malloc(n * sizeof ret->ptr[0]);
    if (ret->ptr == NULL)
        abort();
    const char *start = r.text;
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(strchr(start, '|') - start);
        ret->ptr[i].ptr = abi_copy(start, len);
        ret->ptr[i].len = len;
        start += len + 1;
    }
    return true;
}

bool tally_platform_queues_pop(function_string_t *queue, uint64_t timeout_ms, function_option_list_u8_t *ret,
                               tally_platform_queues_error_t *err) {
    call("queues.pop");
    arg_string(queue);
    arg_u64(timeout_ms);
    reply r = next_reply();
    if (failed(r, err))
        return false;
    ret->is_some = r.text != NULL;
    if (r.text != NULL) {
        ret->val.ptr = abi_copy(r.text, strlen(r.text));
        ret->val.len = strlen(r.text);
    }
    return true;
}

bool tally_platform_locks_acquire(function_string_t *lock, uint64_t timeout_ms, bool *ret,
                                  tally_platform_locks_error_t *err) {
    call("locks.acquire");
    arg_string(lock);
    arg_u64(timeout_ms);
    reply r = next_reply();
    if (failed(r, err))
        return false;
    *ret = r.flag;
    return true;
}

bool tally_platform_locks_release(function_string_t *lock, tally_platform_locks_error_t *err) {
    call("locks.release");
    arg_string(lock);
    return !failed(next_reply(), err);
}

bool tally_platform_context_key(function_string_t *ret) {
    call("context.key");
    reply r = next_reply();
    tally_bytes_append_str(&fake.calls, ");");
    if (r.text == NULL)
        return false;
    *ret = abi_string(r.text);
    return true;
}

/* The rest of context.c's imports, which these tests do not call. */
void tally_platform_context_invocation_id(function_string_t *ret) {
    abort();
}

uint64_t tally_platform_context_book_id(void) {
    abort();
}

uint32_t tally_platform_context_attempt(void) {
    abort();
}

void tally_platform_context_function_name(function_string_t *ret) {
    abort();
}

bool tally_platform_context_sleep(uint64_t ms, tally_platform_context_error_t *err) {
    abort();
}

bool tally_platform_context_sleep_until(uint64_t unix_ms, tally_platform_context_error_t *err) {
    abort();
}

bool tally_platform_context_promise_create(function_string_t *ret, tally_platform_context_error_t *err) {
    abort();
}

bool tally_platform_context_promise_await(function_string_t *id, uint64_t *maybe_timeout_ms, function_list_u8_t *ret,
                                          tally_platform_context_error_t *err) {
    abort();
}
