/*
 * A function of several exactly-once steps, for the host's crash-injection tests, in C:
 * `tests/guests/STEPS.md` over the C SDK. The reference is `tests/guests/steps` (Rust);
 * the host's tests give both the same inputs and compare the outputs byte for byte, so
 * the messages below are the Rust guest's, formats included (`{:?}` is `tally_quote`).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally.h>

/* ---- Failing with a message --------------------------------------------------------- */

/** Fails with `before` + the quoted word + `after`, as Rust's `format!("{word:?}")`. */
static int fail_quoted(tally_output *out, const char *before, tally_slice word, const char *after) {
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, before);
    tally_quote(word.data, word.len, &message);
    tally_bytes_append_str(&message, after);
    return tally_fail_take(out, &message);
}

/* ---- Words -------------------------------------------------------------------------- */

/** The whitespace-separated words of `len` bytes of `text`, in a new array. */
static tally_slice *split_words(const void *text, size_t len, size_t *count) {
    *count = tally_split_whitespace(text, len, NULL, 0);
    tally_slice *words = malloc((*count + 1) * sizeof *words);
    if (words == NULL)
        abort();
    tally_split_whitespace(text, len, words, *count);
    return words;
}

/** A NUL-terminated copy of a word, for the SDK's table and function names. */
static char *cstr(tally_slice word) {
    char *text = malloc(word.len + 1);
    if (text == NULL)
        abort();
    memcpy(text, word.data, word.len);
    text[word.len] = '\0';
    return text;
}

static void sleep_ms(uint64_t ms) {
    struct timespec pause = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* ---- Counters ----------------------------------------------------------------------- */

/**
 * Adds 1 to the counter `key` in `table` and stores its new value in `*value`; on a
 * failure sets the message in `out` and returns non-zero.
 */
static int increment(tally_output *out, const char *table, tally_slice key, int64_t *value) {
    tally_error err;
    int64_t current = 0;
    bool found;
    if (tally_state_get_i64(table, key.data, key.len, &current, &found, &err) != TALLY_OK)
        return tally_fail_error(out, &err);
    if (current == INT64_MAX) {
        tally_bytes message = TALLY_BYTES_INIT;
        tally_bytes_append_str(&message, "the counter ");
        tally_quote(key.data, key.len, &message);
        tally_bytes_append_str(&message, " in table ");
        tally_quote(table, strlen(table), &message);
        tally_bytes_append_str(&message, " overflows an i64");
        return tally_fail_take(out, &message);
    }
    if (tally_state_put_i64(table, key.data, key.len, current + 1, &err) != TALLY_OK)
        return tally_fail_error(out, &err);
    *value = current + 1;
    return 0;
}

/** A word of the program's own, as a slice. */
static tally_slice word_of(const char *text) {
    tally_slice slice = {(const uint8_t *)text, strlen(text)};
    return slice;
}

/* ---- run ---------------------------------------------------------------------------- */

/** Takes the four steps of `run`, pausing `pause_ms` between them if `pause`. */
static int run(tally_output *out, const char *table, bool pause, uint64_t pause_ms) {
    tally_error err;
    int64_t a, b, c;
    if (increment(out, table, word_of("a"), &a) != 0)
        return 1;
    if (pause)
        sleep_ms(pause_ms);

    /* Calling the name this function was deployed under keeps the test independent of
     * how it is deployed. */
    tally_bytes input = TALLY_BYTES_INIT, output;
    tally_bytes_append_str(&input, "child ");
    tally_bytes_append_str(&input, table);
    char *self = tally_context_function_name();
    int status = tally_invoke_call(self, input.data, input.len, &output, &err);
    free(self);
    tally_bytes_free(&input);
    if (status != TALLY_OK)
        return tally_fail_error(out, &err);
    bool is_i64 = tally_utf8_check(output.data, output.len, NULL, NULL) &&
                  tally_parse_i64(output.data, output.len, &c) == TALLY_PARSE_OK;
    if (!is_i64) {
        tally_bytes shown = TALLY_BYTES_INIT;
        tally_utf8_lossy(output.data, output.len, &shown);
        tally_slice word = {shown.data, shown.len};
        fail_quoted(out, "the child returned ", word, ", not a decimal i64");
        tally_bytes_free(&shown);
        tally_bytes_free(&output);
        return 1;
    }
    tally_bytes_free(&output);
    if (pause)
        sleep_ms(pause_ms);

    if (increment(out, table, word_of("b"), &b) != 0)
        return 1;
    if (pause)
        sleep_ms(pause_ms);

    if (tally_state_put(table, "tmp", 3, "x", 1, &err) != TALLY_OK ||
        tally_state_delete(table, "tmp", 3, &err) != TALLY_OK)
        return tally_fail_error(out, &err);

    tally_output_str(out, "a=");
    tally_output_i64(out, a);
    tally_output_str(out, " b=");
    tally_output_i64(out, b);
    tally_output_str(out, " c=");
    tally_output_i64(out, c);
    return 0;
}

/* ---- script ------------------------------------------------------------------------- */

/** The tag of a name, with `*` for the whole book. */
static tally_tag named(tally_slice name) {
    if (tally_slice_eq(name, "*"))
        return TALLY_TAG_ALL;
    return tally_tag_named_bytes(name.data, name.len);
}

/** An op's result with a platform error as `error:<code>`. */
static void reported(tally_bytes *result, tally_error *err) {
    tally_bytes_append_str(result, "error:");
    tally_bytes_append_str(result, tally_status_name(err->kind));
    if (err->kind == TALLY_CONFLICT) {
        tally_bytes_append_str(result, ":");
        if (err->has_holder)
            tally_bytes_append_u64(result, err->holder);
        else
            tally_bytes_append_str(result, "none");
    }
    tally_error_free(err);
}

/** A record read by `next`, `prev` or `tail`: `<seqnum>:<data>:<aux or none>`. */
static void shown(tally_bytes *result, tally_record *record, bool found) {
    if (!found) {
        tally_bytes_append_str(result, "none");
        return;
    }
    tally_bytes_append_u64(result, record->seqnum);
    tally_bytes_append_str(result, ":");
    tally_utf8_lossy(record->data.data, record->data.len, result);
    tally_bytes_append_str(result, ":");
    if (record->has_aux)
        tally_utf8_lossy(record->aux.data, record->aux.len, result);
    else
        tally_bytes_append_str(result, "none");
    tally_record_free(record);
}

/** A JSON pointer word as a NUL-terminated path: `.` stands for "", the whole object. */
static char *path_of(tally_slice word) {
    if (tally_slice_eq(word, "."))
        word.len = 0;
    return cstr(word);
}

/** Parses the milliseconds word of op `op`, or fails the script. */
static int ms_of(tally_output *out, const char *op, tally_slice word, uint64_t *ms) {
    if (tally_parse_u64(word.data, word.len, ms) == TALLY_PARSE_OK)
        return 0;
    tally_bytes before = TALLY_BYTES_INIT;
    tally_bytes_append_str(&before, op);
    tally_bytes_append_str(&before, " ");
    int status = fail_quoted(out, tally_bytes_cstr(&before), word, ": not a u64");
    tally_bytes_free(&before);
    return status;
}

/** Appends `text` to an op's result if `status` is TALLY_OK, else the error as `error:<code>`. */
static void outcome(tally_bytes *result, int status, tally_error *err, const char *text) {
    if (status == TALLY_OK)
        tally_bytes_append_str(result, text);
    else
        reported(result, err);
}

/** Parses a seqnum word (decimal or `max`), or fails the script. */
static int seqnum_of(tally_output *out, tally_slice word, tally_seqnum *seqnum) {
    if (tally_slice_eq(word, "max")) {
        *seqnum = TALLY_SEQNUM_MAX;
        return 0;
    }
    if (tally_parse_u64(word.data, word.len, seqnum) == TALLY_PARSE_OK)
        return 0;
    return fail_quoted(out, "", word, " is not a seqnum");
}

/** The data of the records of a stream, as text (lossy UTF-8). */
typedef struct stream_data {
    tally_bytes *items;
    size_t len;
} stream_data;

static void stream_free(stream_data *stream) {
    for (size_t i = 0; i < stream->len; i++)
        tally_bytes_free(&stream->items[i]);
    free(stream->items);
    stream->items = NULL;
    stream->len = 0;
}

/**
 * Reads the data of every record in `tag`'s stream, in order, into `*stream`; on a
 * failure sets the message in `out` and returns non-zero (with `*stream` empty).
 */
static int stream(tally_output *out, tally_tag tag, stream_data *stream) {
    stream->items = NULL;
    stream->len = 0;
    tally_seqnum next = TALLY_SEQNUM_MIN;
    for (;;) {
        tally_record record;
        bool found;
        tally_error err;
        if (tally_log_read_next(tag, next, &record, &found, &err) != TALLY_OK) {
            stream_free(stream);
            return tally_fail_error(out, &err);
        }
        if (!found)
            break;
        stream->items = realloc(stream->items, (stream->len + 1) * sizeof *stream->items);
        if (stream->items == NULL)
            abort();
        tally_bytes data = TALLY_BYTES_INIT;
        tally_utf8_lossy(record.data.data, record.data.len, &data);
        stream->items[stream->len++] = data;
        tally_seqnum seqnum = record.seqnum;
        tally_record_free(&record);
        if (seqnum == TALLY_SEQNUM_MAX)
            break;
        next = seqnum + 1;
    }
    return 0;
}

/** Appends the first `len` items of a stream joined by `+`, `-` for none. */
static void joined(tally_bytes *result, const stream_data *stream, size_t len) {
    if (len == 0)
        tally_bytes_append_str(result, "-");
    for (size_t i = 0; i < len; i++) {
        if (i > 0)
            tally_bytes_append_str(result, "+");
        tally_bytes_append(result, stream->items[i].data, stream->items[i].len);
    }
}

/**
 * One link of a chain of functions on one book (STEPS.md): appends this function's name
 * to the stream of `name` once, counts itself in table `chain`, and calls the next link
 * (the first of the `rest_len` words at `rest`). Appends the op's result to `result`;
 * returns non-zero when the script fails (the message is set in `out`).
 */
static int chain(tally_output *out, tally_slice name, const tally_slice *rest, size_t rest_len,
                 tally_bytes *result) {
    tally_tag tag = named(name);
    char *me = tally_context_function_name();
    size_t me_len = strlen(me);
    tally_error err;
    int64_t count;
    int status = 0;
    stream_data before, after = {NULL, 0};
    if (stream(out, tag, &before) != 0) {
        free(me);
        return 1;
    }
    size_t mine = before.len;
    for (size_t i = 0; i < before.len; i++) {
        if (before.items[i].len == me_len && memcmp(before.items[i].data, me, me_len) == 0) {
            mine = i;
            break;
        }
    }
    if (mine == before.len) {
        tally_seqnum seqnum;
        if (tally_log_cond_append(&tag, 1, me, me_len, tag, before.len, &seqnum, &err) != TALLY_OK) {
            reported(result, &err);
            goto done;
        }
    }
    if (increment(out, "chain", word_of(me), &count) != 0) {
        status = 1;
        goto done;
    }
    if (rest_len == 0) {
        tally_bytes_append_str(result, me);
        tally_bytes_append_str(result, ":");
        joined(result, &before, mine);
        goto done;
    }
    {
        /* `script chain NAME F2 ... Fk`, without trailing whitespace (Rust's `trim_end`). */
        tally_bytes input = TALLY_BYTES_INIT, output;
        tally_bytes_append_str(&input, "script chain ");
        tally_bytes_append(&input, name.data, name.len);
        tally_bytes_append_str(&input, " ");
        for (size_t i = 1; i < rest_len; i++) {
            if (i > 1)
                tally_bytes_append_str(&input, " ");
            tally_bytes_append(&input, rest[i].data, rest[i].len);
        }
        size_t words_len;
        tally_slice *words = split_words(input.data, input.len, &words_len);
        size_t input_len = (size_t)(words[words_len - 1].data + words[words_len - 1].len - input.data);
        free(words);
        char *next = cstr(rest[0]);
        int called = tally_invoke_call(next, input.data, input_len, &output, &err);
        free(next);
        tally_bytes_free(&input);
        if (called != TALLY_OK) {
            reported(result, &err);
            goto done;
        }
        if (stream(out, tag, &after) != 0) {
            tally_bytes_free(&output);
            status = 1;
            goto done;
        }
        tally_bytes_append_str(result, me);
        tally_bytes_append_str(result, ":");
        joined(result, &before, mine);
        tally_bytes_append_str(result, " > ");
        tally_utf8_lossy(output.data, output.len, result);
        tally_bytes_append_str(result, " < ");
        joined(result, &after, after.len);
        tally_bytes_free(&output);
    }
done:
    stream_free(&before);
    stream_free(&after);
    free(me);
    return status;
}

/** The results of the ops so far, for `$N` and the output. */
typedef struct results {
    tally_bytes *items;
    size_t len;
} results;

static void results_free(results *results) {
    for (size_t i = 0; i < results->len; i++)
        tally_bytes_free(&results->items[i]);
    free(results->items);
}

/**
 * Runs one op, its words already substituted, and appends its result to `result`.
 * Returns non-zero when the script fails (the message is set in `out`).
 */
static int run_op(tally_output *out, tally_slice op, tally_slice *w, size_t n, tally_bytes *result) {
    tally_error err;
    tally_seqnum seqnum;
    tally_record record;
    bool found;
    char *table = n >= 2 ? cstr(w[1]) : NULL;
    int status = 0;

#define IS(i, text) tally_slice_eq(w[i], text)
#define FAIL_ERROR()                           \
    do {                                       \
        status = tally_fail_error(out, &err); \
        goto done;                             \
    } while (0)

    if (n == 3 && IS(0, "get")) {
        tally_bytes value;
        if (tally_state_get(table, w[2].data, w[2].len, &value, &found, &err) != TALLY_OK)
            FAIL_ERROR();
        if (found)
            tally_utf8_lossy(value.data, value.len, result);
        else
            tally_bytes_append_str(result, "none");
        tally_bytes_free(&value);
    } else if (n == 4 && IS(0, "put")) {
        if (tally_state_put(table, w[2].data, w[2].len, w[3].data, w[3].len, &err) != TALLY_OK)
            FAIL_ERROR();
        tally_bytes_append_str(result, "ok");
    } else if (n == 3 && IS(0, "del")) {
        if (tally_state_delete(table, w[2].data, w[2].len, &err) != TALLY_OK)
            FAIL_ERROR();
        tally_bytes_append_str(result, "ok");
    } else if (n == 3 && IS(0, "inc")) {
        int64_t value;
        status = increment(out, table, w[2], &value);
        if (status == 0)
            tally_bytes_append_i64(result, value);
    } else if (n == 3 && IS(0, "child")) {
        tally_bytes input = TALLY_BYTES_INIT, output;
        tally_bytes_append_str(&input, "script inc ");
        tally_bytes_append(&input, w[1].data, w[1].len);
        tally_bytes_append_str(&input, " ");
        tally_bytes_append(&input, w[2].data, w[2].len);
        char *self = tally_context_function_name();
        int called = tally_invoke_call(self, input.data, input.len, &output, &err);
        free(self);
        tally_bytes_free(&input);
        if (called != TALLY_OK)
            FAIL_ERROR();
        tally_utf8_lossy(output.data, output.len, result);
        tally_bytes_free(&output);
    } else if (n >= 2 && IS(0, "call")) {
        tally_bytes input = TALLY_BYTES_INIT, output;
        for (size_t i = 2; i < n; i++) {
            if (i > 2)
                tally_bytes_append_str(&input, " ");
            tally_bytes_append(&input, w[i].data, w[i].len);
        }
        /* `table` is the function's name here. */
        if (tally_invoke_call(table, input.data, input.len, &output, &err) != TALLY_OK) {
            reported(result, &err);
        } else {
            tally_utf8_lossy(output.data, output.len, result);
            tally_bytes_free(&output);
        }
        tally_bytes_free(&input);
    } else if (n == 3 && IS(0, "append")) {
        /* NAMES: comma-separated names, or `-` for no tags. */
        size_t tags_len = 0;
        tally_tag *tags = malloc((w[1].len + 1) * sizeof *tags);
        if (tags == NULL)
            abort();
        if (!IS(1, "-")) {
            size_t start = 0;
            for (size_t i = 0; i <= w[1].len; i++) {
                if (i == w[1].len || w[1].data[i] == ',') {
                    tally_slice name = {w[1].data + start, i - start};
                    tags[tags_len++] = named(name);
                    start = i + 1;
                }
            }
        }
        if (tally_log_append(tags, tags_len, w[2].data, w[2].len, &seqnum, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_u64(result, seqnum);
        free(tags);
    } else if (n == 3 && IS(0, "rawappend")) {
        tally_tag tag;
        if (tally_parse_u64(w[1].data, w[1].len, &tag) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "", w[1], " is not a tag number");
            goto done;
        }
        if (tally_log_append(&tag, 1, w[2].data, w[2].len, &seqnum, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_u64(result, seqnum);
    } else if (n == 4 && IS(0, "cond")) {
        uint64_t position;
        if (tally_parse_u64(w[2].data, w[2].len, &position) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "", w[2], " is not a position");
            goto done;
        }
        tally_tag tag = named(w[1]);
        size_t tags_len = tag == TALLY_TAG_ALL ? 0 : 1;
        if (tally_log_cond_append(&tag, tags_len, w[3].data, w[3].len, tag, position, &seqnum, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_u64(result, seqnum);
    } else if (n == 3 && (IS(0, "next") || IS(0, "prev") || IS(0, "tags"))) {
        tally_tag tag = named(w[1]);
        if (seqnum_of(out, w[2], &seqnum) != 0) {
            status = 1;
            goto done;
        }
        int read = IS(0, "prev") ? tally_log_read_prev(tag, seqnum, &record, &found, &err)
                                 : tally_log_read_next(tag, seqnum, &record, &found, &err);
        if (read != TALLY_OK) {
            reported(result, &err);
        } else if (IS(0, "tags")) {
            if (!found) {
                tally_bytes_append_str(result, "none");
            } else {
                if (record.tags_len == 0)
                    tally_bytes_append_str(result, "-");
                for (size_t i = 0; i < record.tags_len; i++) {
                    if (i > 0)
                        tally_bytes_append_str(result, "+");
                    tally_bytes_append_u64(result, record.tags[i]);
                }
                tally_record_free(&record);
            }
        } else {
            shown(result, &record, found);
        }
    } else if (n == 2 && IS(0, "tail")) {
        if (tally_log_check_tail(named(w[1]), &record, &found, &err) != TALLY_OK)
            reported(result, &err);
        else
            shown(result, &record, found);
    } else if (n == 3 && IS(0, "aux")) {
        if (seqnum_of(out, w[1], &seqnum) != 0) {
            status = 1;
            goto done;
        }
        if (tally_log_set_aux_data(seqnum, w[2].data, w[2].len, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_str(result, "ok");
    } else if ((n == 3 && IS(0, "trim")) || (n == 2 && IS(0, "trim0"))) {
        bool all = IS(0, "trim0");
        tally_tag tag = all ? TALLY_TAG_ALL : named(w[1]);
        if (seqnum_of(out, w[all ? 1 : 2], &seqnum) != 0) {
            status = 1;
            goto done;
        }
        if (tally_log_trim(tag, seqnum, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_str(result, "ok");
    } else if (n == 2 && IS(0, "tag")) {
        /* The tag of a name, 0 for `*`, as everywhere in a script. */
        tally_bytes_append_u64(result, named(w[1]));
    } else if (n == 1 && IS(0, "ctx")) {
        char *function = tally_context_function_name();
        tally_bytes_append_str(result, function);
        tally_bytes_append_str(result, "/");
        tally_bytes_append_u64(result, tally_context_book_id());
        tally_bytes_append_str(result, "/");
        tally_bytes_append_u64(result, tally_context_attempt());
        free(function);
    } else if (n == 1 && IS(0, "id")) {
        char *id = tally_context_invocation_id();
        tally_bytes_append_str(result, id);
        free(id);
    } else if (n == 2 && IS(0, "sleep")) {
        uint64_t ms;
        if (tally_parse_u64(w[1].data, w[1].len, &ms) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "sleep ", w[1], ": not a u64");
            goto done;
        }
        sleep_ms(ms);
        tally_bytes_append_str(result, "ok");
    } else if (n == 2 && IS(0, "nap")) {
        uint64_t ms;
        if (tally_parse_u64(w[1].data, w[1].len, &ms) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "nap ", w[1], ": not a u64");
            goto done;
        }
        if (tally_context_sleep(ms, &err) != TALLY_OK)
            reported(result, &err);
        else
            tally_bytes_append_str(result, "ok");
    } else if (n == 1 && IS(0, "promise")) {
        char *id;
        if (tally_context_promise_create(&id, &err) != TALLY_OK) {
            reported(result, &err);
        } else {
            tally_bytes_append_str(result, id);
            free(id);
        }
    } else if ((n == 2 || n == 3) && IS(0, "await")) {
        uint64_t ms;
        if (n == 3 && tally_parse_u64(w[2].data, w[2].len, &ms) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "await ", w[2], ": not a u64");
            goto done;
        }
        /* `table` is the promise's ID here. */
        tally_bytes value;
        int awaited = n == 3 ? tally_context_promise_await_timeout(table, ms, &value, &err)
                             : tally_context_promise_await(table, &value, &err);
        if (awaited != TALLY_OK) {
            reported(result, &err);
        } else {
            tally_utf8_lossy(value.data, value.len, result);
            tally_bytes_free(&value);
        }
    } else if ((n == 3 && IS(0, "oget")) || (n == 4 && (IS(0, "oset") || IS(0, "opush"))) ||
               (n == 3 && IS(0, "orm"))) {
        /* `table` is the object's name here. */
        char *path = path_of(w[2]);
        char *json = NULL;
        int called;
        if (IS(0, "oget")) {
            called = tally_objects_get(table, path, &json, &found, &err);
            outcome(result, called, &err, called == TALLY_OK && found ? json : "none");
        } else if (IS(0, "orm")) {
            outcome(result, tally_objects_remove(table, path, &err), &err, "ok");
        } else {
            json = cstr(w[3]);
            called = IS(0, "oset") ? tally_objects_set(table, path, json, &err)
                                   : tally_objects_push(table, path, json, &err);
            outcome(result, called, &err, "ok");
        }
        free(path);
        free(json);
    } else if (n == 4 && IS(0, "oinc")) {
        int64_t by;
        if (tally_parse_i64(w[3].data, w[3].len, &by) != TALLY_PARSE_OK) {
            status = fail_quoted(out, "oinc ", w[3], ": not an i64");
            goto done;
        }
        char *path = path_of(w[2]);
        outcome(result, tally_objects_increment(table, path, by, &err), &err, "ok");
        free(path);
    } else if (n == 1 && IS(0, "begin")) {
        outcome(result, tally_objects_begin(&err), &err, "ok");
    } else if (n == 1 && IS(0, "beginro")) {
        outcome(result, tally_objects_begin_read_only(&err), &err, "ok");
    } else if (n == 1 && IS(0, "commit")) {
        bool committed = false;
        int called = tally_objects_commit(&committed, &err);
        outcome(result, called, &err, committed ? "committed" : "conflict");
    } else if (n == 1 && IS(0, "abort")) {
        outcome(result, tally_objects_abort(&err), &err, "ok");
    } else if (n == 3 && IS(0, "qpush")) {
        /* `table` is the queue's name here, and in `qpop`. */
        outcome(result, tally_queues_push(table, w[2].data, w[2].len, &err), &err, "ok");
    } else if (n == 3 && IS(0, "qpop")) {
        uint64_t ms;
        if (ms_of(out, "qpop", w[2], &ms) != 0) {
            status = 1;
            goto done;
        }
        tally_bytes message;
        if (tally_queues_pop(table, ms, &message, &found, &err) != TALLY_OK) {
            reported(result, &err);
        } else if (!found) {
            tally_bytes_append_str(result, "none");
        } else {
            tally_utf8_lossy(message.data, message.len, result);
            tally_bytes_free(&message);
        }
    } else if (n == 4 && IS(0, "qpopn")) {
        uint64_t count, ms;
        if (ms_of(out, "qpopn", w[2], &count) != 0 || ms_of(out, "qpopn", w[3], &ms) != 0) {
            status = 1;
            goto done;
        }
        tally_bytes *messages;
        size_t len;
        if (tally_queues_pop_many(table, count > UINT32_MAX ? UINT32_MAX : (uint32_t)count, ms, &messages, &len, &err) !=
            TALLY_OK) {
            reported(result, &err);
        } else {
            if (len == 0)
                tally_bytes_append_str(result, "none");
            for (size_t i = 0; i < len; i++) {
                if (i > 0)
                    tally_bytes_append_str(result, "+");
                tally_utf8_lossy(messages[i].data, messages[i].len, result);
            }
            tally_bytes_list_free(messages, len);
        }
    } else if (n == 3 && IS(0, "lock")) {
        uint64_t ms;
        if (ms_of(out, "lock", w[2], &ms) != 0) {
            status = 1;
            goto done;
        }
        /* `table` is the lock's name here, and in `unlock`. */
        bool acquired = false;
        int called = tally_locks_acquire(table, ms, &acquired, &err);
        outcome(result, called, &err, acquired ? "true" : "false");
    } else if (n == 2 && IS(0, "unlock")) {
        outcome(result, tally_locks_release(table, &err), &err, "ok");
    } else if (n == 1 && IS(0, "key")) {
        char *key = tally_context_key();
        tally_bytes_append_str(result, key != NULL ? key : "none");
        free(key);
    } else if (n >= 2 && IS(0, "chain")) {
        status = chain(out, w[1], w + 2, n - 2, result);
    } else if (n >= 1 && IS(0, "fail")) {
        tally_bytes message = TALLY_BYTES_INIT;
        for (size_t i = 1; i < n; i++) {
            if (i > 1)
                tally_bytes_append_str(&message, " ");
            tally_bytes_append(&message, w[i].data, w[i].len);
        }
        status = tally_fail_take(out, &message);
    } else if (n == 1 && IS(0, "crash")) {
        /* C's way of dying: the instance traps, and the host reports it with the
         * function's stderr. */
        static const char message[] = "crash requested by the script\n";
        write(STDERR_FILENO, message, sizeof message - 1);
        abort();
    } else {
        status = fail_quoted(out, "unknown script op ", op, "");
    }
#undef IS
#undef FAIL_ERROR
done:
    free(table);
    return status;
}

/** Runs a `;`-separated script of ops (STEPS.md). */
static int script(tally_output *out, const uint8_t *ops, size_t len) {
    results results = {NULL, 0};
    tally_bytes output = TALLY_BYTES_INIT;
    int status = 0;
    size_t start = 0;
    for (size_t end = 0; end <= len && status == 0; end++) {
        if (end < len && ops[end] != ';')
            continue;
        size_t count;
        tally_slice *words = split_words(ops + start, end - start, &count);
        start = end + 1;
        /* An op trimmed to nothing is skipped; otherwise it spans its words. */
        if (count == 0) {
            free(words);
            continue;
        }
        tally_slice op = {words[0].data, (size_t)(words[count - 1].data + words[count - 1].len - words[0].data)};

        /* `$N` stands for the result of op N so far. */
        for (size_t i = 0; i < count && status == 0; i++) {
            if (words[i].len == 0 || words[i].data[0] != '$')
                continue;
            uint64_t n;
            if (tally_parse_u64(words[i].data + 1, words[i].len - 1, &n) != TALLY_PARSE_OK || n == 0 ||
                n > results.len) {
                tally_bytes message = TALLY_BYTES_INIT;
                tally_bytes_append(&message, words[i].data, words[i].len);
                tally_bytes_append_str(&message, ": no such earlier op (ops count from 1)");
                status = tally_fail_take(out, &message);
                break;
            }
            words[i].data = results.items[n - 1].data;
            words[i].len = results.items[n - 1].len;
        }
        if (status == 0) {
            tally_bytes result = TALLY_BYTES_INIT;
            status = run_op(out, op, words, count, &result);
            results.items = realloc(results.items, (results.len + 1) * sizeof *results.items);
            if (results.items == NULL)
                abort();
            results.items[results.len++] = result;
        }
        free(words);
    }
    if (status == 0) {
        for (size_t i = 0; i < results.len; i++) {
            if (i > 0)
                tally_bytes_append_str(&output, ",");
            tally_bytes_append(&output, results.items[i].data, results.items[i].len);
        }
        tally_output_take(out, &output);
    }
    results_free(&results);
    return status;
}

/* ---- The handler -------------------------------------------------------------------- */

int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
    if (!tally_utf8_check(input, input_len, NULL, NULL))
        return tally_fail(out, "the input is not UTF-8");
    size_t n;
    tally_slice *w = split_words(input, input_len, &n);
    int status;
    char *table = n >= 2 ? cstr(w[1]) : NULL;
    if (n == 2 && tally_slice_eq(w[0], "run")) {
        status = run(out, table, false, 0);
    } else if (n == 3 && tally_slice_eq(w[0], "run")) {
        uint64_t pause_ms;
        if (tally_parse_u64(w[2].data, w[2].len, &pause_ms) != TALLY_PARSE_OK)
            status = fail_quoted(out, "sleep_ms ", w[2], " is not a u64");
        else
            status = run(out, table, true, pause_ms);
    } else if (n == 2 && tally_slice_eq(w[0], "child")) {
        int64_t c;
        status = increment(out, table, word_of("c"), &c);
        if (status == 0)
            tally_output_i64(out, c);
    } else if (n >= 1 && tally_slice_eq(w[0], "script")) {
        /* The text after the word `script`, whitespace and all. */
        const uint8_t *ops = w[0].data + w[0].len;
        status = script(out, ops, (size_t)(input + input_len - ops));
    } else if (n == 3 && tally_slice_eq(w[0], "read")) {
        tally_bytes value;
        bool found;
        tally_error err;
        status = 0;
        if (tally_state_get(table, w[2].data, w[2].len, &value, &found, &err) != TALLY_OK)
            status = tally_fail_error(out, &err);
        else if (found)
            tally_output_take(out, &value);
        else
            tally_output_str(out, "none");
    } else {
        status = fail_quoted(out,
                             "expected `run <table> [sleep_ms]`, `child <table>` or `read <table> <key>`, found ",
                             (tally_slice){input, input_len}, "");
    }
    free(table);
    free(w);
    return status;
}
