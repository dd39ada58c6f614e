/* The book's shared log: the `tally:platform/log` imports. */
#include <stdlib.h>

#include "wit.h"

/** A record that the import returned, now the caller's. */
static void record_from_wit(tally_platform_log_log_record_t *wit, tally_record *record) {
    record->seqnum = wit->seqnum;
    record->tags = wit->tags.len == 0 ? NULL : wit->tags.ptr;
    record->tags_len = wit->tags.len;
    record->data = tally__bytes_from_wit(&wit->data);
    record->has_aux = wit->aux_data.is_some;
    if (wit->aux_data.is_some) {
        record->aux = tally__bytes_from_wit(&wit->aux_data.val);
    } else {
        tally_bytes empty = TALLY_BYTES_INIT;
        record->aux = empty;
    }
}

/** The outcome of a read: `*found` and `*record` on success, `*err` on failure. */
static int read_result(bool ok, tally_platform_log_option_log_record_t *wit, tally_platform_log_error_t *wit_err,
                       tally_record *record, bool *found, tally_error *err) {
    if (!ok)
        return tally__error_from_wit(wit_err, err);
    *found = wit->is_some;
    if (wit->is_some) {
        record_from_wit(&wit->val, record);
    } else {
        tally_record empty = {0, NULL, 0, TALLY_BYTES_INIT, false, TALLY_BYTES_INIT};
        *record = empty;
    }
    return TALLY_OK;
}

void tally_record_free(tally_record *record) {
    if (record == NULL)
        return;
    free(record->tags);
    record->tags = NULL;
    record->tags_len = 0;
    tally_bytes_free(&record->data);
    tally_bytes_free(&record->aux);
    record->has_aux = false;
}

int tally_log_append(const tally_tag *tags, size_t tags_len, const void *data, size_t data_len,
                     tally_seqnum *seqnum, tally_error *err) {
    tally_platform_log_list_tag_t wit_tags = {(tally_tag *)tags, tags_len};
    wit_list_u8_t wit_data = tally__wit_bytes(data, data_len);
    tally_platform_log_seqnum_t ret;
    tally_platform_log_error_t wit_err;
    if (!tally_platform_log_append(&wit_tags, &wit_data, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *seqnum = ret;
    return TALLY_OK;
}

int tally_log_cond_append(const tally_tag *tags, size_t tags_len, const void *data, size_t data_len,
                          tally_tag cond_tag, uint64_t cond_pos, tally_seqnum *seqnum, tally_error *err) {
    tally_platform_log_list_tag_t wit_tags = {(tally_tag *)tags, tags_len};
    wit_list_u8_t wit_data = tally__wit_bytes(data, data_len);
    tally_platform_log_seqnum_t ret;
    tally_platform_log_error_t wit_err;
    if (!tally_platform_log_cond_append(&wit_tags, &wit_data, cond_tag, cond_pos, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *seqnum = ret;
    return TALLY_OK;
}

int tally_log_read_next(tally_tag tag, tally_seqnum min, tally_record *record, bool *found, tally_error *err) {
    tally_platform_log_option_log_record_t ret;
    tally_platform_log_error_t wit_err;
    bool ok = tally_platform_log_read_next(tag, min, &ret, &wit_err);
    return read_result(ok, &ret, &wit_err, record, found, err);
}

int tally_log_read_prev(tally_tag tag, tally_seqnum max, tally_record *record, bool *found, tally_error *err) {
    tally_platform_log_option_log_record_t ret;
    tally_platform_log_error_t wit_err;
    bool ok = tally_platform_log_read_prev(tag, max, &ret, &wit_err);
    return read_result(ok, &ret, &wit_err, record, found, err);
}

int tally_log_check_tail(tally_tag tag, tally_record *record, bool *found, tally_error *err) {
    tally_platform_log_option_log_record_t ret;
    tally_platform_log_error_t wit_err;
    bool ok = tally_platform_log_check_tail(tag, &ret, &wit_err);
    return read_result(ok, &ret, &wit_err, record, found, err);
}

int tally_log_trim(tally_tag tag, tally_seqnum seqnum, tally_error *err) {
    tally_platform_log_error_t wit_err;
    if (!tally_platform_log_trim(tag, seqnum, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}

int tally_log_set_aux_data(tally_seqnum seqnum, const void *data, size_t data_len, tally_error *err) {
    wit_list_u8_t wit_data = tally__wit_bytes(data, data_len);
    tally_platform_log_error_t wit_err;
    if (!tally_platform_log_set_aux_data(seqnum, &wit_data, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    return TALLY_OK;
}
