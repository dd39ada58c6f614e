/*
 * What the current invocation is (its key included), durable sleeps, and promises the
 * outside world completes: the `tally:platform/context` imports.
 */
#include "wit.h"

char *tally_context_invocation_id(void) {
    wit_string_t id;
    tally_platform_context_invocation_id(&id);
    return tally__cstr_from_wit(&id);
}

uint64_t tally_context_book_id(void) {
    return tally_platform_context_book_id();
}

uint32_t tally_context_attempt(void) {
    return tally_platform_context_attempt();
}

char *tally_context_function_name(void) {
    wit_string_t name;
    tally_platform_context_function_name(&name);
    return tally__cstr_from_wit(&name);
}

char *tally_context_key(void) {
    wit_string_t key;
    if (!tally_platform_context_key(&key))
        return NULL;
    return tally__cstr_from_wit(&key);
}

int tally_context_sleep(uint64_t ms, tally_error *err) {
    tally_platform_context_error_t wit_err;
    if (!tally_platform_context_sleep(ms, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_context_sleep_until(uint64_t unix_ms, tally_error *err) {
    tally_platform_context_error_t wit_err;
    if (!tally_platform_context_sleep_until(unix_ms, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_context_promise_create(char **id, tally_error *err) {
    wit_string_t ret;
    tally_platform_context_error_t wit_err;
    if (!tally_platform_context_promise_create(&ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *id = tally__cstr_from_wit(&ret);
    return TALLY_OK;
}

/* Both awaits: `timeout_ms` is the WIT's option<u64>, NULL for none. */
static int promise_await(const char *id, uint64_t *timeout_ms, tally_bytes *value, tally_error *err) {
    wit_string_t wit_id = tally__wit_string(id);
    wit_list_u8_t ret;
    tally_platform_context_error_t wit_err;
    if (!tally_platform_context_promise_await(&wit_id, timeout_ms, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *value = tally__bytes_from_wit(&ret);
    return TALLY_OK;
}

int tally_context_promise_await(const char *id, tally_bytes *value, tally_error *err) {
    return promise_await(id, NULL, value, err);
}

int tally_context_promise_await_timeout(const char *id, uint64_t timeout_ms, tally_bytes *value, tally_error *err) {
    return promise_await(id, &timeout_ms, value, err);
}
