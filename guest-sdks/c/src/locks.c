/* Locks held by one invocation at a time (BokiFlow): the `tally:platform/locks` imports. */
#include "wit.h"

int tally_locks_acquire(const char *lock, uint64_t timeout_ms, bool *acquired, tally_error *err) {
    wit_string_t wit_lock = tally__wit_string(lock);
    bool ret;
    tally_platform_locks_error_t wit_err;
    if (!tally_platform_locks_acquire(&wit_lock, timeout_ms, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *acquired = ret;
    return TALLY_OK;
}

int tally_locks_release(const char *lock, tally_error *err) {
    wit_string_t wit_lock = tally__wit_string(lock);
    tally_platform_locks_error_t wit_err;
    if (!tally_platform_locks_release(&wit_lock, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}
