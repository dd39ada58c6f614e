/*
 * tally_failf, alone in its file: it links the C library's printf machinery, which
 * costs tens of KB, so only functions that call it pay for it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"

int tally_failf(tally_output *out, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int len = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (len < 0)
        return tally_fail(out, format);
    char *message = tally__malloc((size_t)len + 1);
    va_start(args, format);
    vsnprintf(message, (size_t)len + 1, format, args);
    va_end(args);
    tally_fail_bytes(out, message, (size_t)len);
    free(message);
    return 1;
}
