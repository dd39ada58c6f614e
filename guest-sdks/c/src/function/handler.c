/*
 * The handler: the world's `handle` export, which calls the user's `tally_handle`, and
 * the functions that fill its output or fail it.
 */
#include <stdlib.h>
#include <string.h>

#include "../wit.h"

/*
 * The export. The platform creates an instance per invocation, so this runs once per
 * instance; the bindings free the returned buffer after the host has copied it
 * (`cabi_post_handle`).
 */
bool exports_function_handle(function_list_u8_t *input, function_list_u8_t *ret, function_string_t *err) {
    tally_output out = {TALLY_BYTES_INIT, TALLY_BYTES_INIT, false};
    /* An empty list's pointer is its alignment, not memory: give the user a real one. */
    const uint8_t *input_data = input->len == 0 ? (const uint8_t *)"" : input->ptr;
    int status = tally_handle(input_data, input->len, &out);
    function_list_u8_free(input);

    if (status == 0) {
        tally_bytes_free(&out.message);
        if (out.data.len == 0)
            tally_bytes_free(&out.data);
        ret->ptr = out.data.data;
        ret->len = out.data.len;
        return true;
    }

    tally_bytes_free(&out.data);
    tally_bytes message = TALLY_BYTES_INIT;
    if (!out.failed) {
        tally_bytes_append_str(&message, "tally_handle returned ");
        tally_bytes_append_i64(&message, status);
    } else if (tally_utf8_check(out.message.data, out.message.len, NULL, NULL)) {
        message = out.message;
        out.message.data = NULL;
    } else {
        /* The WIT string must be UTF-8, or the host traps the invocation. */
        tally_utf8_lossy(out.message.data, out.message.len, &message);
    }
    tally_bytes_free(&out.message);
    if (message.len == 0)
        tally_bytes_free(&message);
    err->ptr = message.data;
    err->len = message.len;
    return false;
}

void tally_output_write(tally_output *out, const void *data, size_t len) {
    tally_bytes_append(&out->data, data, len);
}

void tally_output_str(tally_output *out, const char *text) {
    tally_bytes_append_str(&out->data, text);
}

void tally_output_i64(tally_output *out, int64_t value) {
    tally_bytes_append_i64(&out->data, value);
}

void tally_output_u64(tally_output *out, uint64_t value) {
    tally_bytes_append_u64(&out->data, value);
}

void tally_output_take(tally_output *out, tally_bytes *bytes) {
    tally_bytes_free(&out->data);
    out->data = *bytes;
    bytes->data = NULL;
    bytes->len = 0;
    bytes->cap = 0;
}

int tally_fail_bytes(tally_output *out, const void *message, size_t len) {
    out->message.len = 0;
    tally_bytes_append(&out->message, message, len);
    out->failed = true;
    return 1;
}

int tally_fail_take(tally_output *out, tally_bytes *message) {
    tally_bytes_free(&out->message);
    out->message = *message;
    out->failed = true;
    message->data = NULL;
    message->len = 0;
    message->cap = 0;
    return 1;
}

int tally_fail(tally_output *out, const char *message) {
    return tally_fail_bytes(out, message, strlen(message));
}

int tally_fail_error(tally_output *out, tally_error *err) {
    char *text = tally_error_text(err);
    tally_fail(out, text);
    free(text);
    tally_error_free(err);
    return 1;
}
