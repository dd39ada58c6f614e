/*
 * Settings: the `wasi:config/store` imports, which the host answers from the function's
 * settings (`tally deploy --config K=V --secret K=V`, `tally config set`). Both worlds
 * import the interface, so this file is shared.
 */
#include <stdlib.h>

#include "wit.h"

/**
 * Fills `*err` from a config error, taking over its message. Its two cases (an upstream
 * source failed, I/O failed) are both "try again later" to a function.
 */
static int error_from_config(wasi_config_store_error_t *wit, tally_error *err) {
    /* Both cases carry a string in the same place of the union. */
    wit_string_t *message = &wit->val.upstream;
    uint8_t *text = message->len == 0 ? NULL : tally__realloc(message->ptr, message->len + 1);
    tally__error_take(err, TALLY_UNAVAILABLE, text, message->len);
    return TALLY_UNAVAILABLE;
}

int tally_config_get(const char *key, char **value, tally_error *err) {
    wit_string_t wit_key = tally__wit_string(key);
    wit_option_string_t ret;
    wasi_config_store_error_t wit_err;
    if (!wasi_config_store_get(&wit_key, &ret, &wit_err))
        return error_from_config(&wit_err, err);
    *value = ret.is_some ? tally__cstr_from_wit(&ret.val) : NULL;
    return TALLY_OK;
}

int tally_config_get_all(tally_config_entry **entries, size_t *len, tally_error *err) {
    wit_list_tuple2_string_string_t ret;
    wasi_config_store_error_t wit_err;
    if (!wasi_config_store_get_all(&ret, &wit_err))
        return error_from_config(&wit_err, err);
    tally_config_entry *list = tally__malloc(ret.len == 0 ? 1 : ret.len * sizeof list[0]);
    for (size_t i = 0; i < ret.len; i++) {
        list[i].key = tally__cstr_from_wit(&ret.ptr[i].f0);
        list[i].value = tally__cstr_from_wit(&ret.ptr[i].f1);
    }
    /* The strings are taken; only the list's own allocation is left. */
    if (ret.len > 0)
        free(ret.ptr);
    *entries = list;
    *len = ret.len;
    return TALLY_OK;
}

void tally_config_entries_free(tally_config_entry *entries, size_t len) {
    if (entries == NULL)
        return;
    for (size_t i = 0; i < len; i++) {
        free(entries[i].key);
        free(entries[i].value);
    }
    free(entries);
}
