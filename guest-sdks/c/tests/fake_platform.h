/* The fake platform the calls' tests run against (`fake_platform.c`). */
#ifndef TALLY_TESTS_FAKE_PLATFORM_H
#define TALLY_TESTS_FAKE_PLATFORM_H

#include <stdbool.h>
#include <stdint.h>

#include "../bindings/function.h"

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

/** Forgets the calls and the replies. */
void fake_reset(void);

/** Queues `r` as the answer to a call to come. */
void queue_reply(reply r);

/** Queues a success carrying `text` (NULL for none) and `flag`. */
void reply_ok(const char *text, bool flag);

/** Queues a failure with WIT error case `error` and `message`. */
void reply_error(int error, const char *message);

/** Checks the call log against `expect` and starts a new one. */
void check_calls(const char *what, const char *expect);

#endif /* TALLY_TESTS_FAKE_PLATFORM_H */
