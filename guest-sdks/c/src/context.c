/* What the current invocation is, and durable sleeps: the `tally:platform/context` imports. */
#include "wit.h"

char *tally_context_invocation_id(void) {
    function_string_t id;
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
    function_string_t name;
    tally_platform_context_function_name(&name);
    return tally__cstr_from_wit(&name);
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
