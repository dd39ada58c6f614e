/*
 * A counter kept as a replicated state machine on the book's log (Boki 5.4), in C: the
 * same function as `examples/counter` (Rust), with the same inputs, outputs and errors.
 *
 * Input `incr` or `incr N` adds 1 or N and returns the value as of that increment;
 * `get` returns the current value. The output is the value in decimal.
 *
 * The log is the ground truth: each increment is a record in the `counter` stream, and
 * the value as of a record is the sum of the increments up to and including it
 * (wrapping at 2^64, so replay never fails on a large sum). Replaying the whole stream
 * on every call would get slower as the log grows, and a function keeps no memory
 * between invocations, so the value is cached in the log instead: after a replay, the
 * reader attaches the value to the last record it replayed as aux data. The next reader
 * walks back from where it wants the value to the newest record carrying such a
 * snapshot, and replays forward only from there:
 *
 *   counter stream:   +1    +5    +2    +1    +3
 *   aux data:               6           9
 *                                       ^ walk back to here, replay +3, value 12,
 *                                         leave aux data 12 on the last record
 *
 * Record data and aux data are both a u64 in 8 little-endian bytes.
 */
#include <tally.h>

/** The stream of increments (the hash folds to a constant when optimized). */
static tally_tag counter_tag(void) {
    return tally_tag_named("counter");
}

/** Writes a u64 as 8 little-endian bytes. */
static void encode(uint64_t value, uint8_t bytes[8]) {
    for (int i = 0; i < 8; i++)
        bytes[i] = (uint8_t)(value >> (8 * i));
}

/**
 * Reads a u64 stored as 8 little-endian bytes; otherwise fails with
 * "<context>: expected 8 bytes, found <len>", where the context names what was read.
 */
static int decode(tally_output *out, const tally_bytes *bytes, const char *context, tally_seqnum seqnum,
                  uint64_t *value) {
    if (bytes->len != 8) {
        tally_bytes message = TALLY_BYTES_INIT;
        tally_bytes_append_str(&message, context);
        tally_bytes_append_u64(&message, seqnum);
        tally_bytes_append_str(&message, ": expected 8 bytes, found ");
        tally_bytes_append_u64(&message, bytes->len);
        return tally_fail_take(out, &message);
    }
    *value = 0;
    for (int i = 0; i < 8; i++)
        *value |= (uint64_t)bytes->data[i] << (8 * i);
    return 0;
}

/**
 * Walks back from `upto` to the newest increment carrying a snapshot of the value, and
 * sets `*found` with its seqnum and the value; `*found` is false when no increment at
 * or before `upto` has one.
 */
static int newest_snapshot(tally_output *out, tally_seqnum upto, bool *found, tally_seqnum *seqnum,
                           uint64_t *value) {
    tally_seqnum max = upto;
    *found = false;
    for (;;) {
        tally_record record;
        bool exists;
        tally_error err;
        if (tally_log_read_prev(counter_tag(), max, &record, &exists, &err) != TALLY_OK)
            return tally_fail_error(out, &err);
        if (!exists)
            return 0;
        tally_seqnum at = record.seqnum;
        if (record.has_aux) {
            int status = decode(out, &record.aux, "reading the snapshot in ", at, value);
            tally_record_free(&record);
            *seqnum = at;
            *found = status == 0;
            return status;
        }
        tally_record_free(&record);
        if (at == TALLY_SEQNUM_MIN)
            return 0;
        max = at - 1;
    }
}

/** The counter's value as of `upto`: the sum of the increments at or before it. */
static int value_at(tally_output *out, tally_seqnum upto, uint64_t *value) {
    bool has_snapshot, has_next = true;
    tally_seqnum snapshot, next = TALLY_SEQNUM_MIN;
    *value = 0;
    if (newest_snapshot(out, upto, &has_snapshot, &snapshot, value) != 0)
        return 1;
    if (has_snapshot) {
        has_next = snapshot != TALLY_SEQNUM_MAX;
        next = snapshot + 1;
    }
    bool replayed = false;
    tally_seqnum last_replayed = 0;
    while (has_next) {
        tally_record record;
        bool exists;
        tally_error err;
        if (tally_log_read_next(counter_tag(), next, &record, &exists, &err) != TALLY_OK)
            return tally_fail_error(out, &err);
        if (!exists)
            break;
        tally_seqnum at = record.seqnum;
        uint64_t amount;
        int status = at > upto ? 0 : decode(out, &record.data, "reading increment ", at, &amount);
        tally_record_free(&record);
        if (at > upto)
            break;
        if (status != 0)
            return status;
        *value += amount; /* unsigned, so it wraps */
        replayed = true;
        last_replayed = at;
        /* Stopping at `upto` itself saves `incr` a read past its own record. */
        has_next = at != TALLY_SEQNUM_MAX && at + 1 <= upto;
        next = at + 1;
    }
    if (replayed) {
        /* The snapshot is only a cache, so failing to leave one is not an error: the
         * value is right either way, and failing an `incr` whose increment is already
         * in the log would invite a retry that counts it twice. */
        uint8_t bytes[8];
        encode(*value, bytes);
        tally_log_set_aux_data(last_replayed, bytes, sizeof bytes, NULL);
    }
    return 0;
}

int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
    size_t valid_up_to, error_len;
    if (!tally_utf8_check(input, input_len, &valid_up_to, &error_len)) {
        tally_bytes message = TALLY_BYTES_INIT;
        tally_bytes_append_str(&message, "the input is not UTF-8: ");
        tally_utf8_error_text(valid_up_to, error_len, &message);
        return tally_fail_take(out, &message);
    }
    /* Splitting on whitespace also tolerates a trailing newline from `echo`. */
    tally_slice words[3];
    size_t count = tally_split_whitespace(input, input_len, words, 3);

    uint64_t value;
    if (count >= 1 && count <= 2 && tally_slice_eq(words[0], "incr")) {
        uint64_t amount = 1;
        if (count == 2) {
            int parsed = tally_parse_u64(words[1].data, words[1].len, &amount);
            if (parsed != TALLY_PARSE_OK) {
                tally_bytes message = TALLY_BYTES_INIT;
                tally_bytes_append_str(&message, "the amount ");
                tally_quote(words[1].data, words[1].len, &message);
                tally_bytes_append_str(&message, " is not a u64: ");
                tally_bytes_append_str(&message, tally_parse_status_message(parsed));
                return tally_fail_take(out, &message);
            }
        }
        uint8_t bytes[8];
        encode(amount, bytes);
        tally_tag tag = counter_tag();
        tally_seqnum seqnum;
        tally_error err;
        if (tally_log_append(&tag, 1, bytes, sizeof bytes, &seqnum, &err) != TALLY_OK)
            return tally_fail_error(out, &err);
        if (value_at(out, seqnum, &value) != 0)
            return 1;
    } else if (count == 1 && tally_slice_eq(words[0], "get")) {
        if (value_at(out, TALLY_SEQNUM_MAX, &value) != 0)
            return 1;
    } else {
        return tally_fail(out, "expected `incr`, `incr N` or `get`");
    }
    tally_output_u64(out, value);
    return 0;
}
