/* Durable FIFO queues (BokiQueue): the `tally:platform/queues` imports. */
#include <stdlib.h>

#include "wit.h"

int tally_queues_push(const char *queue, const void *message, size_t message_len, tally_error *err) {
    wit_string_t wit_queue = tally__wit_string(queue);
    wit_list_u8_t wit_message = tally__wit_bytes(message, message_len);
    tally_platform_queues_error_t wit_err;
    if (!tally_platform_queues_push(&wit_queue, &wit_message, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_queues_pop(const char *queue, uint64_t timeout_ms, tally_bytes *message, bool *found, tally_error *err) {
    wit_string_t wit_queue = tally__wit_string(queue);
    wit_option_list_u8_t ret;
    tally_platform_queues_error_t wit_err;
    if (!tally_platform_queues_pop(&wit_queue, timeout_ms, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *found = ret.is_some;
    if (ret.is_some) {
        *message = tally__bytes_from_wit(&ret.val);
    } else {
        tally_bytes empty = TALLY_BYTES_INIT;
        *message = empty;
    }
    return TALLY_OK;
}

int tally_queues_pop_many(const char *queue, uint32_t max, uint64_t timeout_ms, tally_bytes **messages, size_t *count,
                          tally_error *err) {
    wit_string_t wit_queue = tally__wit_string(queue);
    wit_list_list_u8_t ret;
    tally_platform_queues_error_t wit_err;
    if (!tally_platform_queues_pop_many(&wit_queue, max, timeout_ms, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    tally_bytes *list = tally__malloc(ret.len == 0 ? 1 : ret.len * sizeof list[0]);
    for (size_t i = 0; i < ret.len; i++)
        list[i] = tally__bytes_from_wit(&ret.ptr[i]);
    /* The messages are taken; only the list's own allocation is left. */
    if (ret.len > 0)
        free(ret.ptr);
    *messages = list;
    *count = ret.len;
    return TALLY_OK;
}

void tally_bytes_list_free(tally_bytes *list, size_t count) {
    if (list == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        tally_bytes_free(&list[i]);
    free(list);
}
