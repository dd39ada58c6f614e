/*
 * Durable JSON objects with transactions (BokiStore): the `tally:platform/objects`
 * imports, the integer and empty-container conveniences, and the transaction-retry
 * helper.
 */
#include <stdlib.h>
#include <string.h>

#include "wit.h"

/* At most this many bytes of a value that is not an integer go in the message: a value
 * may be an object of 1 MiB. */
#define PREVIEW_BYTES_MAX 32

int tally_objects_get(const char *object, const char *path, char **json, bool *found, tally_error *err) {
    wit_string_t wit_object = tally__wit_string(object);
    wit_string_t wit_path = tally__wit_string(path);
    wit_option_string_t ret;
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_get(&wit_object, &wit_path, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *found = ret.is_some;
    *json = ret.is_some ? tally__cstr_from_wit(&ret.val) : NULL;
    return TALLY_OK;
}

int tally_objects_get_i64(const char *object, const char *path, int64_t *value, bool *found, tally_error *err) {
    char *json;
    bool present;
    int status = tally_objects_get(object, path, &json, &present, err);
    if (status != TALLY_OK)
        return status;
    if (present) {
        size_t len = strlen(json);
        if (tally_parse_i64(json, len, value) != TALLY_PARSE_OK) {
            if (err != NULL) {
                tally_bytes message = TALLY_BYTES_INIT;
                tally_bytes_append_str(&message, "the value at ");
                tally_quote(path, strlen(path), &message);
                tally_bytes_append_str(&message, " of object ");
                tally_quote(object, strlen(object), &message);
                tally_bytes_append_str(&message, " is not an i64: ");
                if (len > PREVIEW_BYTES_MAX) {
                    tally_bytes_append(&message, json, PREVIEW_BYTES_MAX);
                    tally_bytes_append_str(&message, "...");
                } else {
                    tally_bytes_append(&message, json, len);
                }
                /* `append` always leaves room for a NUL, which `error_take` needs. */
                tally_bytes_cstr(&message);
                tally__error_take(err, TALLY_INVALID_ARGUMENT, message.data, message.len);
            }
            free(json);
            return TALLY_INVALID_ARGUMENT;
        }
        free(json);
    }
    *found = present;
    return TALLY_OK;
}

int tally_objects_set(const char *object, const char *path, const char *json, tally_error *err) {
    wit_string_t wit_object = tally__wit_string(object);
    wit_string_t wit_path = tally__wit_string(path);
    wit_string_t wit_json = tally__wit_string(json);
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_set(&wit_object, &wit_path, &wit_json, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_objects_set_i64(const char *object, const char *path, int64_t value, tally_error *err) {
    char text[TALLY_INT_TEXT_MAX];
    tally_format_i64(value, text);
    return tally_objects_set(object, path, text, err);
}

int tally_objects_make_object(const char *object, const char *path, tally_error *err) {
    return tally_objects_set(object, path, "{}", err);
}

int tally_objects_make_array(const char *object, const char *path, tally_error *err) {
    return tally_objects_set(object, path, "[]", err);
}

int tally_objects_increment(const char *object, const char *path, int64_t by, tally_error *err) {
    wit_string_t wit_object = tally__wit_string(object);
    wit_string_t wit_path = tally__wit_string(path);
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_increment(&wit_object, &wit_path, by, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_objects_push(const char *object, const char *path, const char *json, tally_error *err) {
    wit_string_t wit_object = tally__wit_string(object);
    wit_string_t wit_path = tally__wit_string(path);
    wit_string_t wit_json = tally__wit_string(json);
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_push(&wit_object, &wit_path, &wit_json, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_objects_remove(const char *object, const char *path, tally_error *err) {
    wit_string_t wit_object = tally__wit_string(object);
    wit_string_t wit_path = tally__wit_string(path);
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_remove(&wit_object, &wit_path, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

/* Both begins: the WIT's `read-only` flag stays out of the public API. */
static int begin(bool read_only, tally_error *err) {
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_begin(read_only, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_objects_begin(tally_error *err) {
    return begin(false, err);
}

int tally_objects_begin_read_only(tally_error *err) {
    return begin(true, err);
}

int tally_objects_commit(bool *committed, tally_error *err) {
    bool ret;
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_commit(&ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *committed = ret;
    return TALLY_OK;
}

int tally_objects_abort(tally_error *err) {
    tally_platform_objects_error_t wit_err;
    if (!tally_platform_objects_abort(&wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_objects_transaction(tally_transaction_body body, void *arg, uint32_t attempts_max, bool *committed,
                              tally_error *err) {
    if (attempts_max == 0) {
        static const char message[] = "a transaction takes at least 1 attempt, not 0";
        tally__error_set(err, TALLY_INVALID_ARGUMENT, message, sizeof message - 1);
        return TALLY_INVALID_ARGUMENT;
    }
    bool done = false;
    for (uint32_t attempt = 0; attempt < attempts_max && !done; attempt++) {
        int status = tally_objects_begin(err);
        if (status != TALLY_OK)
            return status;
        status = body(arg, err);
        if (status != TALLY_OK) {
            /* The body's failure is the one to report. The abort is local to the
             * instance (nothing of the transaction was logged), so it fails only when
             * the body already ended the transaction, which leaves nothing to drop. */
            tally_objects_abort(NULL);
            return status;
        }
        /* A commit that fails has ended the transaction all the same. */
        status = tally_objects_commit(&done, err);
        if (status != TALLY_OK)
            return status;
    }
    *committed = done;
    return TALLY_OK;
}
