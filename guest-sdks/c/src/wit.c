/* Conversions between the generated bindings' types and the SDK's. */
#include <stdlib.h>
#include <string.h>

#include "wit.h"

int tally__error_from_wit(tally_platform_types_error_t *wit, tally_error *err) {
    /* The variant's cases in WIT order, the same order as tally_status from 1. */
    static const tally_status kinds[] = {
        [TALLY_PLATFORM_TYPES_ERROR_INVALID_ARGUMENT] = TALLY_INVALID_ARGUMENT,
        [TALLY_PLATFORM_TYPES_ERROR_NOT_FOUND] = TALLY_NOT_FOUND,
        [TALLY_PLATFORM_TYPES_ERROR_CONFLICT] = TALLY_CONFLICT,
        [TALLY_PLATFORM_TYPES_ERROR_UNAVAILABLE] = TALLY_UNAVAILABLE,
        [TALLY_PLATFORM_TYPES_ERROR_TOO_LARGE] = TALLY_TOO_LARGE,
        [TALLY_PLATFORM_TYPES_ERROR_TIMEOUT] = TALLY_TIMEOUT,
        [TALLY_PLATFORM_TYPES_ERROR_FAILED] = TALLY_FAILED,
    };
    /* The bindings only produce the cases above; anything else is a broken host. */
    if (wit->tag >= sizeof kinds / sizeof kinds[0])
        abort();
    tally_status kind = kinds[wit->tag];
    if (kind == TALLY_CONFLICT) {
        tally__error_conflict(err, wit->val.conflict.is_some, wit->val.conflict.val);
        return kind;
    }
    /* Every other case carries a message, in the same place of the union. */
    wit_string_t *message = &wit->val.invalid_argument;
    if (message->len == 0) {
        tally__error_take(err, kind, NULL, 0);
    } else {
        /* Room for the NUL that tally_error promises. */
        uint8_t *text = tally__realloc(message->ptr, message->len + 1);
        tally__error_take(err, kind, text, message->len);
    }
    return kind;
}

wit_string_t tally__wit_string(const char *text) {
    wit_string_t string = {(uint8_t *)text, strlen(text)};
    return string;
}

char *tally__cstr_from_wit(wit_string_t *text) {
    char *copy = tally__malloc(text->len + 1);
    memcpy(copy, text->ptr, text->len);
    copy[text->len] = '\0';
    wit_string_free(text);
    return copy;
}
