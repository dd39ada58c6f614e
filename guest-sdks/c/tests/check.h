/*
 * What the unit tests share: the checks, which count passes and failures for the one
 * summary line, and the groups of tests each file runs.
 */
#ifndef TALLY_TESTS_CHECK_H
#define TALLY_TESTS_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/** Records one check; `what` names it when it fails, with `detail`. */
void check(bool ok, const char *what, const char *detail);

/** Checks that `actual` (`actual_len` bytes) is the NUL-terminated `expect`. */
void check_text(const char *what, const void *actual, size_t actual_len, const char *expect);

/** The tests of the calls to the platform, against a fake of it (test_calls.c). */
void test_calls(void);

#endif /* TALLY_TESTS_CHECK_H */
