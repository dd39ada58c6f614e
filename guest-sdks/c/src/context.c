/* What the current invocation is: the `tally:platform/context` imports. */
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
