/*
 * Unit tests of the calls to the platform (objects, queues, locks, the context's key,
 * settings), built natively against a fake platform: this file defines the imports that
 * the generated bindings declare (`tally_platform_*`, `wasi_config_store_*`), so the
 * SDK's sources call it instead of the host. The fake writes each call it gets, with its
 * arguments, into a call log that the tests compare as text, and answers with the
 * replies a test queued, in order.
 * Everything it hands over is allocated as the canonical ABI does (an empty list is a
 * dangling non-NULL pointer), so AddressSanitizer checks that the SDK takes ownership
 * as the bindings expect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bindings/function.h"
#include "check.h"
#include "internal.h"

/* ---- The fake platform --------------------------------------------------------------- */

/** No error: the reply is a success. */
#define SUCCESS (-1)

/** What the fake answers to one call. */
typedef struct reply {
    /** SUCCESS, or the `TALLY_PLATFORM_TYPES_ERROR_*` case to fail with. */
    int error;
    /** An error's message; a success's string or bytes (NULL for none). */
    const char *text;
    /** A success's bool. */
    bool flag;
    /** A conflict's holder, when `has_holder`. */
    bool has_holder;
    uint64_t holder;
} reply;

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
static void fake_reset(void) {
    tally_bytes_free(&fake.calls);
    fake.replies_len = 0;
    fake.replies_next = 0;
}

static void queue_reply(reply r) {
    if (fake.replies_len == REPLIES_MAX)
        abort();
    fake.replies[fake.replies_len++] = r;
}

/** Queues a success carrying `text` (NULL for none) and `flag`. */
static void reply_ok(const char *text, bool flag) {
    queue_reply((reply){SUCCESS, text, flag, false, 0});
}

/** Queues a failure with WIT error case `error` and `message`. */
static void reply_error(int error, const char *message) {
    queue_reply((reply){error, message, false, false, 0});
}

/** The reply to the call being made: the next one queued, or an empty success. */
static reply next_reply(void) {
    if (fake.replies_next == fake.replies_len)
        return (reply){SUCCESS, NULL, false, false, 0};
    return fake.replies[fake.replies_next++];
}

/** Checks the call log against `expect` and starts a new one. */
static void check_calls(const char *what, const char *expect) {
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

/* ---- Helpers ------------------------------------------------------------------------- */

/** An error with recognizable contents, to see that a call leaves it alone. */
static tally_error untouched(void) {
    tally_error err = {TALLY_FAILED, NULL, 12345, true, 6789};
    return err;
}

static bool is_untouched(const tally_error *err) {
    return err->kind == TALLY_FAILED && err->message == NULL && err->message_len == 12345 && err->has_holder &&
           err->holder == 6789;
}

/** Checks a filled error's kind and message, and releases it. */
static void check_error(const char *what, int status, tally_error *err, tally_status kind, const char *message) {
    check(status == (int)kind && err->kind == kind, what, tally_status_name(status));
    check_text(what, err->message ? err->message : "(null)", err->message ? err->message_len : 6, message);
    check(err->message && strlen(err->message) == err->message_len, what, "message not NUL-terminated");
    tally_error_free(err);
}

/* ---- Objects ------------------------------------------------------------------------- */

static void test_objects(void) {
    tally_error err = untouched();
    char *json = (char *)"sentinel";
    bool found = false;

    reply_ok("{\"n\":1}", false);
    check(tally_objects_get("accounts", "", &json, &found, &err) == TALLY_OK && found, "objects.get", "status");
    check_text("objects.get", json, strlen(json), "{\"n\":1}");
    free(json);
    reply_ok(NULL, false);
    check(tally_objects_get("accounts", "/a~1b/0", &json, &found, &err) == TALLY_OK && !found && json == NULL,
          "objects.get none", "found, or *json not NULL");
    check_calls("objects.get calls", "objects.get(accounts,);objects.get(accounts,/a~1b/0);");

    check(tally_objects_set("o", "/a", "[1,\"x\"]", &err) == TALLY_OK, "objects.set", "status");
    check(tally_objects_set_i64("o", "/n", INT64_MIN, &err) == TALLY_OK, "objects.set_i64", "status");
    check(tally_objects_make_object("o", "/m", &err) == TALLY_OK, "objects.make_object", "status");
    check(tally_objects_make_array("o", "", &err) == TALLY_OK, "objects.make_array", "status");
    check(tally_objects_increment("o", "/n", -3, &err) == TALLY_OK, "objects.increment", "status");
    check(tally_objects_increment("o", "/n", INT64_MAX, &err) == TALLY_OK, "objects.increment", "status");
    check(tally_objects_push("o", "/list", "{\"k\":null}", &err) == TALLY_OK, "objects.push", "status");
    check(tally_objects_remove("o", "/list/0", &err) == TALLY_OK, "objects.remove", "status");
    check_calls("objects writes",
                "objects.set(o,/a,[1,\"x\"]);objects.set(o,/n,-9223372036854775808);objects.set(o,/m,{});"
                "objects.set(o,,[]);objects.increment(o,/n,-3);objects.increment(o,/n,9223372036854775807);"
                "objects.push(o,/list,{\"k\":null});objects.remove(o,/list/0);");

    bool committed = false;
    check(tally_objects_begin(&err) == TALLY_OK, "objects.begin", "status");
    reply_ok(NULL, false);
    check(tally_objects_commit(&committed, &err) == TALLY_OK && !committed, "objects.commit conflict", "committed");
    check(tally_objects_begin_read_only(&err) == TALLY_OK, "objects.begin_read_only", "status");
    reply_ok(NULL, true);
    check(tally_objects_commit(&committed, &err) == TALLY_OK && committed, "objects.commit", "not committed");
    check(tally_objects_abort(&err) == TALLY_OK, "objects.abort", "status");
    check_calls("transaction calls",
                "objects.begin(read-write);objects.commit();objects.begin(read-only);objects.commit();"
                "objects.abort();");
    check(is_untouched(&err), "objects calls", "a success touched the error");

    /* A failure fills the error and leaves the outputs alone. */
    json = (char *)"sentinel";
    found = true;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "a path is a JSON pointer (\"\" or starting with '/'), not \"a\"");
    int status = tally_objects_get("o", "a", &json, &found, &err);
    check(strcmp(json, "sentinel") == 0 && found, "objects.get failed", "wrote an output");
    check_error("objects.get failed", status, &err, TALLY_INVALID_ARGUMENT,
                "a path is a JSON pointer (\"\" or starting with '/'), not \"a\"");
    committed = true;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_TOO_LARGE, "a transaction's writes");
    status = tally_objects_commit(&committed, &err);
    check(committed, "objects.commit failed", "wrote an output");
    check_error("objects.commit failed", status, &err, TALLY_TOO_LARGE, "a transaction's writes");
    check_calls("failed calls", "objects.get(o,a);objects.commit();");
}

static void check_get_i64_refused(const char *json, const char *message) {
    tally_error err = untouched();
    int64_t value = 7;
    bool found = false;
    reply_ok(json, false);
    int status = tally_objects_get_i64("acct", "/n", &value, &found, &err);
    check(value == 7 && !found, "objects.get_i64 refused", json);
    check_error("objects.get_i64 refused", status, &err, TALLY_INVALID_ARGUMENT, message);
    fake_reset();
}

static void test_objects_get_i64(void) {
    tally_error err = untouched();
    int64_t value = 7;
    bool found = false;
    reply_ok("-42", false);
    check(tally_objects_get_i64("acct", "/n", &value, &found, &err) == TALLY_OK && found && value == -42,
          "objects.get_i64", "-42");
    reply_ok("9223372036854775807", false);
    check(tally_objects_get_i64("acct", "/n", &value, &found, &err) == TALLY_OK && found && value == INT64_MAX,
          "objects.get_i64", "INT64_MAX");
    value = 7;
    reply_ok(NULL, false);
    check(tally_objects_get_i64("acct", "/n", &value, &found, &err) == TALLY_OK && !found && value == 7,
          "objects.get_i64 none", "found, or wrote the value");
    check_calls("objects.get_i64 calls", "objects.get(acct,/n);objects.get(acct,/n);objects.get(acct,/n);");
    check(is_untouched(&err), "objects.get_i64", "a success touched the error");

    check_get_i64_refused("1.5", "the value at \"/n\" of object \"acct\" is not an i64: 1.5");
    check_get_i64_refused("null", "the value at \"/n\" of object \"acct\" is not an i64: null");
    check_get_i64_refused("\"5\"", "the value at \"/n\" of object \"acct\" is not an i64: \"5\"");
    check_get_i64_refused("9223372036854775808",
                          "the value at \"/n\" of object \"acct\" is not an i64: 9223372036854775808");
    check_get_i64_refused("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]",
                          "the value at \"/n\" of object \"acct\" is not an i64: [1,2,3,4,5,6,7,8,9,10,11,12,13,1...");
    /* A NULL err still gets the status, and nothing leaks. */
    reply_ok("true", false);
    check(tally_objects_get_i64("acct", "/n", &value, &found, NULL) == TALLY_INVALID_ARGUMENT, "objects.get_i64",
          "NULL err");
    fake_reset();
}

/* ---- The transaction helper ---------------------------------------------------------- */

/** A body that adds 1 to `/n` of `acct` (get, then set) and counts its runs. */
static int add_one(void *arg, tally_error *err) {
    int *runs = arg;
    (*runs)++;
    int64_t n = 0;
    bool found;
    int status = tally_objects_get_i64("acct", "/n", &n, &found, err);
    if (status != TALLY_OK)
        return status;
    return tally_objects_set_i64("acct", "/n", n + 1, err);
}

/** A body that gives up with a code of the function's own. */
static int refuse(void *arg, tally_error *err) {
    (*(int *)arg)++;
    return -1;
}

static void test_transaction(void) {
    tally_error err = untouched();
    bool committed = false;
    int runs = 0;

    /* A conflict runs the body again in a new transaction, which commits. */
    reply_ok(NULL, false);
    reply_ok("5", false);
    reply_ok(NULL, false);
    reply_ok(NULL, false); /* the commit: a conflict */
    reply_ok(NULL, false);
    reply_ok("6", false);
    reply_ok(NULL, false);
    reply_ok(NULL, true);
    int status = tally_objects_transaction(add_one, &runs, 3, &committed, &err);
    check(status == TALLY_OK && committed && runs == 2, "transaction retried", tally_status_name(status));
    check_calls("transaction retried",
                "objects.begin(read-write);objects.get(acct,/n);objects.set(acct,/n,6);objects.commit();"
                "objects.begin(read-write);objects.get(acct,/n);objects.set(acct,/n,7);objects.commit();");
    check(is_untouched(&err), "transaction retried", "touched the error");

    /* Every attempt conflicts: no error, not committed. */
    committed = true;
    runs = 0;
    status = tally_objects_transaction(add_one, &runs, 2, &committed, &err);
    check(status == TALLY_OK && !committed && runs == 2, "transaction conflicted", tally_status_name(status));
    check_calls("transaction conflicted",
                "objects.begin(read-write);objects.get(acct,/n);objects.set(acct,/n,1);objects.commit();"
                "objects.begin(read-write);objects.get(acct,/n);objects.set(acct,/n,1);objects.commit();");

    /* A platform error in the body aborts, and is returned with its details. */
    committed = true;
    runs = 0;
    reply_ok(NULL, false);
    reply_error(TALLY_PLATFORM_TYPES_ERROR_UNAVAILABLE, "no quorum");
    status = tally_objects_transaction(add_one, &runs, 3, &committed, &err);
    check(committed && runs == 1, "transaction body failed", "wrote committed, or ran again");
    check_error("transaction body failed", status, &err, TALLY_UNAVAILABLE, "no quorum");
    check_calls("transaction body failed", "objects.begin(read-write);objects.get(acct,/n);objects.abort();");

    /* A code of the function's own aborts too, and the error is as the body left it. */
    err = untouched();
    runs = 0;
    status = tally_objects_transaction(refuse, &runs, 3, &committed, &err);
    check(status == -1 && runs == 1 && is_untouched(&err), "transaction refused", "not the body's code");
    check_calls("transaction refused", "objects.begin(read-write);objects.abort();");

    /* The body's failure wins over a failed abort (the body may have ended the transaction). */
    reply_ok(NULL, false);
    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "no transaction is in progress");
    status = tally_objects_transaction(refuse, &runs, 3, &committed, &err);
    check(status == -1 && is_untouched(&err), "transaction abort failed", "not the body's code");
    check_calls("transaction abort failed", "objects.begin(read-write);objects.abort();");

    /* A failed begin runs no body; a failed commit is not followed by an abort. */
    runs = 0;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "a transaction is in progress already");
    status = tally_objects_transaction(add_one, &runs, 3, &committed, &err);
    check(runs == 0 && committed, "transaction begin failed", "ran the body, or wrote committed");
    check_error("transaction begin failed", status, &err, TALLY_INVALID_ARGUMENT, "a transaction is in progress already");
    check_calls("transaction begin failed", "objects.begin(read-write);");
    reply_ok(NULL, false);
    reply_ok("1", false);
    reply_ok(NULL, false);
    reply_error(TALLY_PLATFORM_TYPES_ERROR_TIMEOUT, "commit");
    status = tally_objects_transaction(add_one, &runs, 3, &committed, &err);
    check(runs == 1 && committed, "transaction commit failed", "ran again, or wrote committed");
    check_error("transaction commit failed", status, &err, TALLY_TIMEOUT, "commit");
    check_calls("transaction commit failed",
                "objects.begin(read-write);objects.get(acct,/n);objects.set(acct,/n,2);objects.commit();");

    /* No attempt at all is refused before any call. */
    err = untouched();
    status = tally_objects_transaction(add_one, &runs, 0, &committed, &err);
    check_error("transaction of 0 attempts", status, &err, TALLY_INVALID_ARGUMENT,
                "a transaction takes at least 1 attempt, not 0");
    check_calls("transaction of 0 attempts", "");
    check(tally_objects_transaction(add_one, &runs, 0, &committed, NULL) == TALLY_INVALID_ARGUMENT,
          "transaction of 0 attempts", "NULL err");

    /* A NULL err reaches the body, and the failure's message is freed. */
    reply_ok(NULL, false);
    reply_error(TALLY_PLATFORM_TYPES_ERROR_NOT_FOUND, "gone");
    check(tally_objects_transaction(add_one, &runs, 1, &committed, NULL) == TALLY_NOT_FOUND,
          "transaction with NULL err", "status");
    fake_reset();
}

/* ---- Queues, locks and the key ------------------------------------------------------- */

static void test_queues(void) {
    tally_error err = untouched();
    check(tally_queues_push("orders", "a\0b\n", 4, &err) == TALLY_OK, "queues.push", "status");
    check(tally_queues_push("orders", NULL, 0, &err) == TALLY_OK, "queues.push empty", "status");

    tally_bytes message;
    bool found = false;
    reply_ok("hello", false);
    check(tally_queues_pop("orders", 250, &message, &found, &err) == TALLY_OK && found, "queues.pop", "status");
    check_text("queues.pop", message.data, message.len, "hello");
    tally_bytes_free(&message);
    /* An empty message is found, in an empty buffer (the ABI's dangling pointer is not kept). */
    reply_ok("", false);
    check(tally_queues_pop("orders", 0, &message, &found, &err) == TALLY_OK && found && message.data == NULL &&
              message.len == 0,
          "queues.pop empty message", "not an empty buffer");
    reply_ok(NULL, false);
    check(tally_queues_pop("orders", UINT64_MAX, &message, &found, &err) == TALLY_OK && !found &&
              message.data == NULL && message.len == 0,
          "queues.pop none", "found, or not an empty buffer");
    check_calls("queues calls", "queues.push(orders,a\\x00b\\n);queues.push(orders,);queues.pop(orders,250);"
                                "queues.pop(orders,0);queues.pop(orders,18446744073709551615);");
    check(is_untouched(&err), "queues calls", "a success touched the error");

    reply_error(TALLY_PLATFORM_TYPES_ERROR_TOO_LARGE, "a message is at most 524288 bytes");
    check_error("queues.push failed", tally_queues_push("orders", "x", 1, &err), &err, TALLY_TOO_LARGE,
                "a message is at most 524288 bytes");
    found = true;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "");
    int status = tally_queues_pop("", 10, &message, &found, &err);
    check(found, "queues.pop failed", "wrote an output");
    check_error("queues.pop failed", status, &err, TALLY_INVALID_ARGUMENT, "");
    check_calls("failed queues calls", "queues.push(orders,x);queues.pop(,10);");
}

static void test_queues_pop_many(void) {
    tally_error err = untouched();
    tally_bytes *messages = NULL;
    size_t count = 9;
    reply_ok("ab||c|", false);
    check(tally_queues_pop_many("orders", 8, 20, &messages, &count, &err) == TALLY_OK && count == 3,
          "queues.pop_many", "not 3 messages");
    if (count == 3) {
        check_text("queues.pop_many first", messages[0].data, messages[0].len, "ab");
        check(messages[1].data == NULL && messages[1].len == 0, "queues.pop_many empty message", "not an empty buffer");
        check_text("queues.pop_many last", messages[2].data, messages[2].len, "c");
    }
    tally_bytes_list_free(messages, count);
    reply_ok(NULL, false);
    check(tally_queues_pop_many("orders", 100, 0, &messages, &count, &err) == TALLY_OK && count == 0 && messages != NULL,
          "queues.pop_many none", "not an empty array");
    tally_bytes_list_free(messages, count);
    tally_bytes_list_free(NULL, 0);
    check_calls("queues.pop_many calls", "queues.pop_many(orders,8,20);queues.pop_many(orders,100,0);");
    check(is_untouched(&err), "queues.pop_many calls", "a success touched the error");

    count = 9;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "a pop takes 1 to 100 messages, not 0");
    check_error("queues.pop_many failed", tally_queues_pop_many("orders", 0, 0, &messages, &count, &err), &err,
                TALLY_INVALID_ARGUMENT, "a pop takes 1 to 100 messages, not 0");
    check(count == 9, "queues.pop_many failed", "wrote an output");
    check_calls("failed queues.pop_many", "queues.pop_many(orders,0,0);");
}

static void test_locks(void) {
    tally_error err = untouched();
    bool acquired = false;
    reply_ok(NULL, true);
    check(tally_locks_acquire("inventory", 10000, &acquired, &err) == TALLY_OK && acquired, "locks.acquire",
          "not acquired");
    reply_ok(NULL, false);
    check(tally_locks_acquire("inventory", 0, &acquired, &err) == TALLY_OK && !acquired, "locks.acquire timed out",
          "acquired");
    check(tally_locks_release("inventory", &err) == TALLY_OK, "locks.release", "status");
    check_calls("locks calls", "locks.acquire(inventory,10000);locks.acquire(inventory,0);locks.release(inventory);");
    check(is_untouched(&err), "locks calls", "a success touched the error");

    reply_error(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, "this invocation does not hold lock \"inventory\"");
    check_error("locks.release failed", tally_locks_release("inventory", &err), &err, TALLY_INVALID_ARGUMENT,
                "this invocation does not hold lock \"inventory\"");
    acquired = true;
    reply_error(TALLY_PLATFORM_TYPES_ERROR_UNAVAILABLE, "no quorum");
    int status = tally_locks_acquire("inventory", 5, &acquired, &err);
    check(acquired, "locks.acquire failed", "wrote an output");
    check_error("locks.acquire failed", status, &err, TALLY_UNAVAILABLE, "no quorum");
    check_calls("failed locks calls", "locks.release(inventory);locks.acquire(inventory,5);");
}

static void test_key(void) {
    reply_ok("user-7", false);
    char *key = tally_context_key();
    check(key != NULL, "context.key", "NULL");
    if (key != NULL)
        check_text("context.key", key, strlen(key), "user-7");
    free(key);
    reply_ok("", false);
    key = tally_context_key();
    check(key != NULL && key[0] == '\0', "context.key empty", "not an empty string");
    free(key);
    reply_ok(NULL, false);
    check(tally_context_key() == NULL, "context.key none", "not NULL");
    check_calls("context.key calls", "context.key();context.key();context.key();");
}

/* ---- Every WIT error case through one call -------------------------------------------- */

static void check_mapped(int wit_case, tally_status kind, const char *text) {
    tally_error err = untouched();
    char what[64];
    snprintf(what, sizeof what, "error mapping %s", tally_status_name(kind));
    if (wit_case == TALLY_PLATFORM_TYPES_ERROR_CONFLICT)
        queue_reply((reply){wit_case, NULL, false, true, 41});
    else
        reply_error(wit_case, "the message");
    check(tally_objects_remove("o", "/x", &err) == (int)kind && err.kind == kind, what, "wrong status");
    char *shown = tally_error_text(&err);
    check_text(what, shown, strlen(shown), text);
    free(shown);
    tally_error_free(&err);
    /* With a NULL err the status is the same, and the message is freed. */
    if (wit_case == TALLY_PLATFORM_TYPES_ERROR_CONFLICT)
        queue_reply((reply){wit_case, NULL, false, false, 0});
    else
        reply_error(wit_case, "the message");
    check(tally_objects_remove("o", "/x", NULL) == (int)kind, what, "wrong status with a NULL err");
    fake_reset();
}

static void test_error_mapping(void) {
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT, TALLY_INVALID_ARGUMENT, "invalid argument: the message");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_NOT_FOUND, TALLY_NOT_FOUND, "not found: the message");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_CONFLICT, TALLY_CONFLICT, "conflict: the position is held by record 41");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_UNAVAILABLE, TALLY_UNAVAILABLE, "unavailable: the message");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_TOO_LARGE, TALLY_TOO_LARGE, "too large: the message");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_TIMEOUT, TALLY_TIMEOUT, "timeout: the message");
    check_mapped(TALLY_PLATFORM_TYPES_ERROR_FAILED, TALLY_FAILED, "failed: the message");
}

static void test_config(void) {
    tally_error err = untouched();
    char *value = (char *)"untouched";
    reply_ok("http://127.0.0.1:9/sink", false);
    check(tally_config_get("upstream", &value, &err) == TALLY_OK, "config.get", "status");
    check_text("config.get", value ? value : "(null)", value ? strlen(value) : 6, "http://127.0.0.1:9/sink");
    free(value);
    reply_ok(NULL, false);
    check(tally_config_get("missing", &value, &err) == TALLY_OK && value == NULL, "config.get missing", "not NULL");
    check(is_untouched(&err), "config.get", "a success touched the error");

    tally_config_entry *entries = NULL;
    size_t len = 99;
    reply_ok("a=1&webhook_secret=s3", false);
    check(tally_config_get_all(&entries, &len, &err) == TALLY_OK && len == 2, "config.get_all", "not 2 entries");
    if (len == 2) {
        check_text("config.get_all key", entries[1].key, strlen(entries[1].key), "webhook_secret");
        check_text("config.get_all value", entries[1].value, strlen(entries[1].value), "s3");
    }
    tally_config_entries_free(entries, len);
    reply_ok("", false);
    check(tally_config_get_all(&entries, &len, &err) == TALLY_OK && len == 0, "config.get_all empty", "entries");
    tally_config_entries_free(entries, len);
    check_calls("config calls", "config.get(upstream);config.get(missing);config.get_all();config.get_all();");

    value = (char *)"untouched";
    reply_error(WASI_CONFIG_STORE_ERROR_IO, "store offline");
    int status = tally_config_get("upstream", &value, &err);
    check(strcmp(value, "untouched") == 0, "config.get failed", "wrote an output");
    check_error("config.get failed", status, &err, TALLY_UNAVAILABLE, "store offline");
    reply_error(WASI_CONFIG_STORE_ERROR_UPSTREAM, "vault sealed");
    check_error("config.get_all failed", tally_config_get_all(&entries, &len, &err), &err, TALLY_UNAVAILABLE,
                "vault sealed");
    check_calls("failed config calls", "config.get(upstream);config.get_all();");
}

void test_calls(void) {
    test_objects();
    test_objects_get_i64();
    test_transaction();
    test_queues();
    test_queues_pop_many();
    test_locks();
    test_key();
    test_config();
    test_error_mapping();
}
