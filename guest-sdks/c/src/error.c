/* Errors: their text and their memory. Pure code: the unit tests build it natively. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void tally__error_take(tally_error *err, tally_status kind, uint8_t *message, size_t len) {
    if (err == NULL) {
        free(message);
        return;
    }
    if (message == NULL)
        message = tally__malloc(1);
    message[len] = '\0';
    err->kind = kind;
    err->message = (char *)message;
    err->message_len = len;
    err->has_holder = false;
    err->holder = 0;
}

void tally__error_set(tally_error *err, tally_status kind, const void *message, size_t len) {
    if (err == NULL)
        return;
    uint8_t *copy = tally__malloc(len + 1);
    memcpy(copy, message, len);
    tally__error_take(err, kind, copy, len);
}

void tally__error_conflict(tally_error *err, bool has_holder, uint64_t holder) {
    if (err == NULL)
        return;
    tally__error_set(err, TALLY_CONFLICT, "", 0);
    err->has_holder = has_holder;
    err->holder = holder;
}

void tally_error_free(tally_error *err) {
    if (err == NULL)
        return;
    free(err->message);
    err->kind = TALLY_OK;
    err->message = NULL;
    err->message_len = 0;
    err->has_holder = false;
    err->holder = 0;
}

const char *tally_status_name(int status) {
    switch (status) {
    case TALLY_OK:
        return "ok";
    case TALLY_INVALID_ARGUMENT:
        return "invalid_argument";
    case TALLY_NOT_FOUND:
        return "not_found";
    case TALLY_CONFLICT:
        return "conflict";
    case TALLY_UNAVAILABLE:
        return "unavailable";
    case TALLY_TOO_LARGE:
        return "too_large";
    case TALLY_TIMEOUT:
        return "timeout";
    case TALLY_FAILED:
        return "failed";
    case TALLY_HTTP:
        return "http";
    default:
        return "unknown";
    }
}

/** The prefix of the error's text: the Rust SDK's `Display` of each variant. */
static const char *text_prefix(tally_status kind) {
    switch (kind) {
    case TALLY_INVALID_ARGUMENT:
        return "invalid argument: ";
    case TALLY_NOT_FOUND:
        return "not found: ";
    case TALLY_UNAVAILABLE:
        return "unavailable: ";
    case TALLY_TOO_LARGE:
        return "too large: ";
    case TALLY_TIMEOUT:
        return "timeout: ";
    case TALLY_FAILED:
        return "failed: ";
    case TALLY_HTTP:
        return "http: ";
    default:
        return "error: ";
    }
}

char *tally_error_text(const tally_error *err) {
    tally_bytes text = TALLY_BYTES_INIT;
    if (err->kind == TALLY_CONFLICT) {
        tally_bytes_append_str(&text, "conflict: the position is held by ");
        if (err->has_holder) {
            tally_bytes_append_str(&text, "record ");
            tally_bytes_append_u64(&text, err->holder);
        } else {
            tally_bytes_append_str(&text, "a trimmed record");
        }
    } else {
        tally_bytes_append_str(&text, text_prefix(err->kind));
        if (err->message != NULL)
            tally_bytes_append(&text, err->message, err->message_len);
    }
    tally_bytes_cstr(&text);
    return (char *)text.data;
}
