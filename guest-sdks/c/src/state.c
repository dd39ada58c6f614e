/* Durable key-value state: the `tally:platform/state` imports and the integer helpers. */
#include "wit.h"

int tally_state_get(const char *table, const void *key, size_t key_len, tally_bytes *value, bool *found,
                    tally_error *err) {
    wit_string_t wit_table = tally__wit_string(table);
    wit_list_u8_t wit_key = tally__wit_bytes(key, key_len);
    wit_option_list_u8_t ret;
    tally_platform_state_error_t wit_err;
    if (!tally_platform_state_get(&wit_table, &wit_key, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *found = ret.is_some;
    if (ret.is_some) {
        *value = tally__bytes_from_wit(&ret.val);
    } else {
        tally_bytes empty = TALLY_BYTES_INIT;
        *value = empty;
    }
    return TALLY_OK;
}

int tally_state_put(const char *table, const void *key, size_t key_len, const void *value, size_t value_len,
                    tally_error *err) {
    wit_string_t wit_table = tally__wit_string(table);
    wit_list_u8_t wit_key = tally__wit_bytes(key, key_len);
    wit_list_u8_t wit_value = tally__wit_bytes(value, value_len);
    tally_platform_state_error_t wit_err;
    if (!tally_platform_state_put(&wit_table, &wit_key, &wit_value, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_state_delete(const char *table, const void *key, size_t key_len, tally_error *err) {
    wit_string_t wit_table = tally__wit_string(table);
    wit_list_u8_t wit_key = tally__wit_bytes(key, key_len);
    tally_platform_state_error_t wit_err;
    if (!tally_platform_state_delete(&wit_table, &wit_key, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_state_get_i64(const char *table, const void *key, size_t key_len, int64_t *value, bool *found,
                        tally_error *err) {
    tally_bytes stored;
    bool present;
    int status = tally_state_get(table, key, key_len, &stored, &present, err);
    if (status != TALLY_OK)
        return status;
    if (present) {
        status = tally__parse_stored_i64(table, key, key_len, stored.data, stored.len, value, err);
        tally_bytes_free(&stored);
        if (status != TALLY_OK)
            return status;
    }
    *found = present;
    return TALLY_OK;
}

int tally_state_put_i64(const char *table, const void *key, size_t key_len, int64_t value, tally_error *err) {
    char text[TALLY_INT_TEXT_MAX];
    size_t len = tally_format_i64(value, text);
    return tally_state_put(table, key, key_len, text, len, err);
}
