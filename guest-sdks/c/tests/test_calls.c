/*
 * Unit tests of the calls to the platform (objects, queues, locks, the context's key,
 * settings), built natively against the fake platform of `fake_platform.c`, whose call
 * log they compare as text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_platform.h"
#include "internal.h"

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
