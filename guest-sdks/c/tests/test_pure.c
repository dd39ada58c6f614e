/*
 * Unit tests of the SDK's pure parts, built natively (no Wasm): tag names against the
 * shared vectors, the integer text format of the state helpers, error text, the UTF-8
 * and escaping helpers that make messages agree with the Rust SDK's, and the JSON
 * helpers of the objects. The same program runs the tests of the calls to the platform
 * (test_calls.c).
 *
 * Usage: test_sdk <path of guest-sdks/test-vectors/tags.json>
 * Prints one line per failure and ends with "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "tally_http.h"

static int passed, failed;

void check(bool ok, const char *what, const char *detail) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: %s\n", what, detail);
    }
}

void check_text(const char *what, const void *actual, size_t actual_len, const char *expect) {
    bool ok = actual_len == strlen(expect) && (actual_len == 0 || memcmp(actual, expect, actual_len) == 0);
    char detail[1024];
    snprintf(detail, sizeof detail, "got [%.*s], expected [%s]", (int)actual_len, actual_len ? (const char *)actual : "", expect);
    check(ok, what, detail);
}

/* ---- Tag.named against guest-sdks/test-vectors/tags.json ------------------------------ */

/** Reads a whole file, NUL-terminated; exits if it cannot. */
static char *read_file(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        printf("FAIL cannot open %s\n", path);
        exit(1);
    }
    tally_bytes bytes = TALLY_BYTES_INIT;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, file)) > 0)
        tally_bytes_append(&bytes, chunk, n);
    fclose(file);
    *len = bytes.len;
    tally_bytes_cstr(&bytes);
    return (char *)bytes.data;
}

/** Appends code point `c` to `out` in UTF-8. */
static void append_utf8(tally_bytes *out, unsigned long c) {
    uint8_t s[4];
    size_t n;
    if (c < 0x80) {
        s[0] = (uint8_t)c;
        n = 1;
    } else if (c < 0x800) {
        s[0] = (uint8_t)(0xc0 | (c >> 6));
        s[1] = (uint8_t)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        s[0] = (uint8_t)(0xe0 | (c >> 12));
        s[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        s[2] = (uint8_t)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        s[0] = (uint8_t)(0xf0 | (c >> 18));
        s[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
        s[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        s[3] = (uint8_t)(0x80 | (c & 0x3f));
        n = 4;
    }
    tally_bytes_append(out, s, n);
}

/**
 * Decodes the JSON string that starts at `*p` (at its opening quote) into `out`, and
 * moves `*p` past the closing quote. Enough JSON for the vectors file: every escape,
 * surrogate pairs included.
 */
static void json_string(const char **p, tally_bytes *out) {
    const char *s = *p + 1;
    while (*s != '"') {
        if (*s != '\\') {
            tally_bytes_append(out, s++, 1);
            continue;
        }
        s++;
        char escape = *s++;
        switch (escape) {
        case 'b': tally_bytes_append(out, "\b", 1); break;
        case 'f': tally_bytes_append(out, "\f", 1); break;
        case 'n': tally_bytes_append(out, "\n", 1); break;
        case 'r': tally_bytes_append(out, "\r", 1); break;
        case 't': tally_bytes_append(out, "\t", 1); break;
        case 'u': {
            unsigned long c = strtoul((char[]){s[0], s[1], s[2], s[3], 0}, NULL, 16);
            s += 4;
            if (c >= 0xd800 && c < 0xdc00 && s[0] == '\\' && s[1] == 'u') {
                unsigned long low = strtoul((char[]){s[2], s[3], s[4], s[5], 0}, NULL, 16);
                c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
                s += 6;
            }
            append_utf8(out, c);
            break;
        }
        default: tally_bytes_append(out, &escape, 1); /* \" \\ \/ */
        }
    }
    *p = s + 1;
}

/** Finds `"key"` after `*p` and decodes the string value that follows it. */
static bool json_field(const char **p, const char *key, tally_bytes *out) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *at = strstr(*p, quoted);
    if (at == NULL)
        return false;
    at = strchr(at + strlen(quoted), '"');
    if (at == NULL)
        return false;
    json_string(&at, out);
    *p = at;
    return true;
}

static void test_tag_vectors(const char *path) {
    size_t len;
    char *json = read_file(path, &len);
    const char *p = strstr(json, "\"vectors\"");
    check(p != NULL, "tags.json", "no \"vectors\" array");
    int vectors = 0;
    while (p != NULL) {
        tally_bytes name = TALLY_BYTES_INIT, tag = TALLY_BYTES_INIT;
        /* Each vector is an object with "name" then "tag". */
        if (!json_field(&p, "name", &name) || !json_field(&p, "tag", &tag)) {
            tally_bytes_free(&name);
            tally_bytes_free(&tag);
            break;
        }
        vectors++;
        uint64_t expect;
        check(tally_parse_u64(tag.data, tag.len, &expect) == TALLY_PARSE_OK, "vector tag", tally_bytes_cstr(&tag));
        char actual[TALLY_INT_TEXT_MAX];
        tally_format_u64(tally_tag_named_bytes(name.data, name.len), actual);
        char what[256];
        snprintf(what, sizeof what, "tally_tag_named_bytes(%s)", tally_bytes_cstr(&name));
        check_text(what, actual, strlen(actual), tally_bytes_cstr(&tag));
        tally_bytes_free(&name);
        tally_bytes_free(&tag);
    }
    check(vectors >= 15, "tags.json", "fewer vectors than expected");
    free(json);

    /* The NUL-terminated form and the documented constants. */
    check(tally_tag_named("orders") == UINT64_C(0x00125d9250be8b4c), "tally_tag_named(orders)", "wrong tag");
    check(tally_tag_named("") == UINT64_C(0x4bf29ce484222325), "tally_tag_named(\"\")", "wrong tag");
    check(TALLY_TAG_ALL == 0 && TALLY_SEQNUM_MIN == 0 && TALLY_SEQNUM_MAX == UINT64_MAX, "constants", "wrong value");
}

/* ---- Integers ------------------------------------------------------------------------ */

static void check_i64(const char *text, int status, int64_t expect) {
    int64_t value = 12345;
    int actual = tally_parse_i64(text, strlen(text), &value);
    char what[128];
    snprintf(what, sizeof what, "tally_parse_i64(\"%s\")", text);
    check(actual == status, what, tally_parse_status_message(actual));
    if (status == TALLY_PARSE_OK)
        check(value == expect, what, "wrong value");
    else
        check(value == 12345, what, "wrote the value on failure");
}

static void check_u64(const char *text, int status, uint64_t expect) {
    uint64_t value = 12345;
    int actual = tally_parse_u64(text, strlen(text), &value);
    char what[128];
    snprintf(what, sizeof what, "tally_parse_u64(\"%s\")", text);
    check(actual == status, what, tally_parse_status_message(actual));
    if (status == TALLY_PARSE_OK)
        check(value == expect, what, "wrong value");
}

static void test_integers(void) {
    /* What put_i64 writes, parse_i64 reads. */
    int64_t values[] = {0, 1, -1, 42, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char text[TALLY_INT_TEXT_MAX];
        size_t len = tally_format_i64(values[i], text);
        check(len == strlen(text), "tally_format_i64", "wrong length");
        int64_t back;
        check(tally_parse_i64(text, len, &back) == TALLY_PARSE_OK && back == values[i], "i64 round trip", text);
    }
    char text[TALLY_INT_TEXT_MAX];
    check_text("format INT64_MIN", text, tally_format_i64(INT64_MIN, text), "-9223372036854775808");
    check_text("format UINT64_MAX", text, tally_format_u64(UINT64_MAX, text), "18446744073709551615");
    check_text("format 0", text, tally_format_u64(0, text), "0");

    /* Rust's `str::parse`, case by case. */
    check_i64("+7", TALLY_PARSE_OK, 7);
    check_i64("-0", TALLY_PARSE_OK, 0);
    check_i64("007", TALLY_PARSE_OK, 7);
    check_i64("", TALLY_PARSE_EMPTY, 0);
    check_i64("+", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64("-", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64("+-1", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64(" 1", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64("1 ", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64("1.5", TALLY_PARSE_INVALID_DIGIT, 0);
    check_i64("9223372036854775808", TALLY_PARSE_POS_OVERFLOW, 0);
    check_i64("-9223372036854775809", TALLY_PARSE_NEG_OVERFLOW, 0);
    check_i64("99999999999999999999x", TALLY_PARSE_POS_OVERFLOW, 0);
    check_i64("1x99999999999999999999", TALLY_PARSE_INVALID_DIGIT, 0);
    check_u64("18446744073709551615", TALLY_PARSE_OK, UINT64_MAX);
    check_u64("+0", TALLY_PARSE_OK, 0);
    check_u64("18446744073709551616", TALLY_PARSE_POS_OVERFLOW, 0);
    check_u64("-0", TALLY_PARSE_INVALID_DIGIT, 0);
    check_u64("-", TALLY_PARSE_INVALID_DIGIT, 0);
    check_u64("", TALLY_PARSE_EMPTY, 0);
    check_text("message", "x", 1, "x");
    const char *message = tally_parse_status_message(TALLY_PARSE_INVALID_DIGIT);
    check_text("invalid digit message", message, strlen(message), "invalid digit found in string");
}

/* ---- The stored i64 of state.get_i64, with the Rust SDK's messages --------------------- */

static void check_stored(const void *value, size_t len, const char *shown) {
    int64_t parsed;
    tally_error err = {TALLY_OK, NULL, 0, false, 0};
    int status = tally__parse_stored_i64("accounts", "alice", 5, value, len, &parsed, &err);
    check(status == TALLY_INVALID_ARGUMENT && err.kind == TALLY_INVALID_ARGUMENT, "stored i64 refused", shown);
    char expect[256];
    snprintf(expect, sizeof expect,
             "the value of key \"alice\" in table \"accounts\" is not a decimal i64: \"%s\"", shown);
    check_text("stored i64 message", err.message ? err.message : "", err.message_len, expect);
    check(err.message && strlen(err.message) == err.message_len, "stored i64 message", "not NUL-terminated");
    tally_error_free(&err);
}

static void test_stored_i64(void) {
    int64_t parsed = 0;
    check(tally__parse_stored_i64("accounts", "alice", 5, "-42", 3, &parsed, NULL) == TALLY_OK && parsed == -42,
          "stored i64", "-42");
    check_stored("", 0, "");
    check_stored(" 1", 2, " 1");
    check_stored("1\n", 2, "1\\n");
    check_stored("1.5", 3, "1.5");
    check_stored("9223372036854775808", 19, "9223372036854775808");
    check_stored("\xff", 1, "\\xff");
    check_stored("'\"\\\t\r\x01\x7f", 7, "\\'\\\"\\\\\\t\\r\\x01\\x7f");
    char long_value[33];
    memset(long_value, 'x', sizeof long_value);
    check_stored(long_value, 33, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...");
    check_stored(long_value, 32, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    /* A NULL err still gets the status. */
    check(tally__parse_stored_i64("t", "k", 1, "x", 1, &parsed, NULL) == TALLY_INVALID_ARGUMENT, "stored i64",
          "NULL err");
}

/* ---- Errors -------------------------------------------------------------------------- */

static void check_error_text(tally_status kind, const char *message, bool has_holder, uint64_t holder,
                             const char *expect) {
    tally_error err = {TALLY_OK, NULL, 0, false, 0};
    if (kind == TALLY_CONFLICT)
        tally__error_conflict(&err, has_holder, holder);
    else
        tally__error_set(&err, kind, message, strlen(message));
    char *text = tally_error_text(&err);
    check_text("tally_error_text", text, strlen(text), expect);
    free(text);
    tally_error_free(&err);
    check(err.message == NULL && err.kind == TALLY_OK, "tally_error_free", "did not reset");
}

static void test_errors(void) {
    check_error_text(TALLY_INVALID_ARGUMENT, "tag 0", false, 0, "invalid argument: tag 0");
    check_error_text(TALLY_NOT_FOUND, "f", false, 0, "not found: f");
    check_error_text(TALLY_CONFLICT, "", true, 7, "conflict: the position is held by record 7");
    check_error_text(TALLY_CONFLICT, "", false, 0, "conflict: the position is held by a trimmed record");
    check_error_text(TALLY_UNAVAILABLE, "no quorum", false, 0, "unavailable: no quorum");
    check_error_text(TALLY_TOO_LARGE, "record", false, 0, "too large: record");
    check_error_text(TALLY_TIMEOUT, "append", false, 0, "timeout: append");
    check_error_text(TALLY_FAILED, "child trapped", false, 0, "failed: child trapped");
    check_error_text(TALLY_HTTP, "connection-refused", false, 0, "http: connection-refused");
    const char *names[] = {"ok", "invalid_argument", "not_found", "conflict", "unavailable",
                           "too_large", "timeout", "failed", "http", "unknown"};
    for (int status = 0; status <= 9; status++)
        check_text("tally_status_name", tally_status_name(status), strlen(tally_status_name(status)), names[status]);
    tally_error_free(NULL);
}

/* ---- UTF-8 and escaping -------------------------------------------------------------- */

static void check_utf8(const char *text, size_t len, bool valid, size_t valid_up_to, size_t error_len,
                       const char *lossy) {
    size_t up_to = 99, err_len = 99;
    bool ok = tally_utf8_check(text, len, &up_to, &err_len);
    check(ok == valid, "tally_utf8_check", lossy);
    if (!valid)
        check(up_to == valid_up_to && err_len == error_len, "tally_utf8_check error", lossy);
    tally_bytes out = TALLY_BYTES_INIT;
    tally_utf8_lossy(text, len, &out);
    check_text("tally_utf8_lossy", out.data, out.len, lossy);
    tally_bytes_free(&out);
}

static void check_quote(const char *text, const char *expect) {
    tally_bytes out = TALLY_BYTES_INIT;
    tally_quote(text, strlen(text), &out);
    check_text("tally_quote", out.data, out.len, expect);
    tally_bytes_free(&out);
}

static void test_text(void) {
    check_utf8("", 0, true, 0, 0, "");
    check_utf8("h\xc3\xa9llo \xe6\x97\xa5 \xf0\x9f\x8e\x89", 15, true, 0, 0, "h\xc3\xa9llo \xe6\x97\xa5 \xf0\x9f\x8e\x89");
    check_utf8("\xff", 1, false, 0, 1, "\xef\xbf\xbd");
    check_utf8("a\xc3", 2, false, 1, 0, "a\xef\xbf\xbd");
    check_utf8("\xe2\x82", 2, false, 0, 0, "\xef\xbf\xbd");
    check_utf8("\xe2\x82" "A", 3, false, 0, 2, "\xef\xbf\xbd" "A");
    check_utf8("\xf0\x90\x80" "A", 4, false, 0, 3, "\xef\xbf\xbd" "A");
    /* A surrogate, an overlong form and a code point above U+10FFFF: one U+FFFD per byte. */
    check_utf8("\xed\xa0\x80", 3, false, 0, 1, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    check_utf8("\xc0\xaf", 2, false, 0, 1, "\xef\xbf\xbd\xef\xbf\xbd");
    check_utf8("\xf4\x90\x80\x80", 4, false, 0, 1, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");

    tally_bytes text = TALLY_BYTES_INIT;
    tally_utf8_error_text(3, 2, &text);
    check_text("tally_utf8_error_text", text.data, text.len, "invalid utf-8 sequence of 2 bytes from index 3");
    tally_bytes_free(&text);
    tally_utf8_error_text(0, 0, &text);
    check_text("tally_utf8_error_text", text.data, text.len, "incomplete utf-8 byte sequence from index 0");
    tally_bytes_free(&text);

    check_quote("plain", "\"plain\"");
    check_quote("a\"b\\c'd", "\"a\\\"b\\\\c'd\"");
    check_quote("\t\r\n", "\"\\t\\r\\n\"");
    check_quote("\x1b\x7f", "\"\\u{1b}\\u{7f}\"");
    check_quote("caf\xc3\xa9 \xe6\x97\xa5", "\"caf\xc3\xa9 \xe6\x97\xa5\"");
    check_quote("\xc2\xa0\xe2\x80\x8b", "\"\\u{a0}\\u{200b}\"");
    check_quote("e\xcc\x81", "\"e\\u{301}\"");
    tally_bytes out = TALLY_BYTES_INIT;
    tally_quote("a\0b", 3, &out);
    check_text("tally_quote NUL", out.data, out.len, "\"a\\0b\"");
    tally_bytes_free(&out);
    tally_quote("\xff", 1, &out);
    check_text("tally_quote invalid", out.data, out.len, "\"\xef\xbf\xbd\"");
    tally_bytes_free(&out);

    tally_escape_ascii("a\"'\\\t\r\n\x00\xff~", 10, &out);
    check_text("tally_escape_ascii", out.data, out.len, "a\\\"\\'\\\\\\t\\r\\n\\x00\\xff~");
    tally_bytes_free(&out);
}

/** Checks the words of `text`, given joined by '|'. */
static void check_words(const char *text, const char *expect) {
    tally_slice words[8];
    size_t count = tally_split_whitespace(text, strlen(text), words, 8);
    tally_bytes joined = TALLY_BYTES_INIT;
    for (size_t i = 0; i < count && i < 8; i++) {
        if (i > 0)
            tally_bytes_append(&joined, "|", 1);
        tally_bytes_append(&joined, words[i].data, words[i].len);
    }
    check_text("tally_split_whitespace", joined.data, joined.len, expect);
    check(tally_split_whitespace(text, strlen(text), NULL, 0) == count, "tally_split_whitespace", "count");
    tally_bytes_free(&joined);
}

static void test_words(void) {
    check_words("", "");
    check_words(" \t\n\v\f\r ", "");
    check_words("script tag orders", "script|tag|orders");
    check_words("  incr   5\n", "incr|5");
    /* U+00A0, U+2003, U+3000 and U+0085 separate words; U+200B (zero width space) does not. */
    check_words("a\xc2\xa0" "b\xe2\x80\x83" "c\xe3\x80\x80" "d\xc2\x85" "e", "a|b|c|d|e");
    check_words("a\xe2\x80\x8b" "b", "a\xe2\x80\x8b" "b");
    check_words("\xc3\xa9t\xc3\xa9 x", "\xc3\xa9t\xc3\xa9|x");
    tally_slice word = {(const uint8_t *)"run", 3};
    check(tally_slice_eq(word, "run") && !tally_slice_eq(word, "ru") && !tally_slice_eq(word, "runs"),
          "tally_slice_eq", "run");
}

static void test_bytes(void) {
    tally_bytes b = TALLY_BYTES_INIT;
    check_text("empty cstr", tally_bytes_cstr(&b), 0, "");
    for (int i = 0; i < 100; i++)
        tally_bytes_append_str(&b, "ab");
    check(b.len == 200 && b.cap > 200, "tally_bytes_append", "wrong length");
    tally_bytes_free(&b);
    tally_bytes_append_i64(&b, -5);
    tally_bytes_append(&b, ",", 1);
    tally_bytes_append_u64(&b, UINT64_MAX);
    check_text("append integers", b.data, b.len, "-5,18446744073709551615");
    check(strcmp(tally_bytes_cstr(&b), "-5,18446744073709551615") == 0, "tally_bytes_cstr", "wrong text");
    tally_bytes_free(&b);
    check(b.data == NULL && b.len == 0 && b.cap == 0, "tally_bytes_free", "did not reset");
    tally_bytes_free(NULL);
}

/* ---- JSON text for the objects -------------------------------------------------------- */

static void check_json_quote(const char *text, size_t len, const char *expect) {
    tally_bytes out = TALLY_BYTES_INIT;
    tally_bytes_append_str(&out, "[");
    tally_json_quote(text, len, &out);
    check_text("tally_json_quote", out.data, out.len, expect);
    tally_bytes_free(&out);
}

static void check_pointer(const char *token, size_t len, const char *expect) {
    tally_bytes path = TALLY_BYTES_INIT;
    tally_json_pointer_append(&path, "a", 1);
    tally_json_pointer_append(&path, token, len);
    check_text("tally_json_pointer_append", path.data, path.len, expect);
    tally_bytes_free(&path);
}

static void test_json(void) {
    /* The quote appends to what is there (the "[" each check starts with). */
    check_json_quote("", 0, "[\"\"");
    check_json_quote("plain text", 10, "[\"plain text\"");
    check_json_quote("a\"b\\c/d", 7, "[\"a\\\"b\\\\c/d\"");
    check_json_quote("\b\f\n\r\t", 5, "[\"\\b\\f\\n\\r\\t\"");
    /* Other control characters as \u00XX in lowercase hex, as serde_json; DEL as is. */
    check_json_quote("\0\x01\x1f\x7f", 4, "[\"\\u0000\\u0001\\u001f\x7f\"");
    check_json_quote("caf\xc3\xa9 \xe6\x97\xa5", 9, "[\"caf\xc3\xa9 \xe6\x97\xa5\"");
    check_json_quote("a\xff\"", 3, "[\"a\xef\xbf\xbd\\\"\"");

    check_pointer("b", 1, "/a/b");
    check_pointer("", 0, "/a/");
    check_pointer("x/y~z", 5, "/a/x~1y~0z");
    check_pointer("~1", 2, "/a/~01");
    check_pointer("0", 1, "/a/0");
    check_pointer("\xc3\xa9\xff", 3, "/a/\xc3\xa9\xef\xbf\xbd");
}

/* ---- Signatures, headers and URLs of HTTP functions --------------------------------- */

static void check_hex(const char *what, const uint8_t digest[TALLY_SHA256_LEN], const char *expect) {
    char hex[2 * TALLY_SHA256_LEN + 1];
    tally_hex(digest, TALLY_SHA256_LEN, hex);
    check_text(what, hex, strlen(hex), expect);
}

static void test_signatures(void) {
    uint8_t digest[TALLY_SHA256_LEN];
    tally_sha256("", 0, digest);
    check_hex("sha256 of nothing", digest, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    tally_sha256("abc", 3, digest);
    check_hex("sha256 of abc", digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 56 bytes: the length no longer fits the first block's padding. */
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    tally_sha256(two_blocks, strlen(two_blocks), digest);
    check_hex("sha256 of two blocks", digest, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* RFC 4231, test case 2. */
    const char *data = "what do ya want for nothing?";
    tally_hmac_sha256("Jefe", 4, data, strlen(data), digest);
    check_hex("hmac rfc 4231 case 2", digest, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231, test case 6: a key longer than a block is hashed first. */
    uint8_t key[131];
    memset(key, 0xaa, sizeof key);
    data = "Test Using Larger Than Block-Size Key - Hash Key First";
    tally_hmac_sha256(key, sizeof key, data, strlen(data), digest);
    check_hex("hmac rfc 4231 case 6", digest, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    check(tally_equal_constant_time("abc", 3, "abc", 3), "equal", "abc != abc");
    check(!tally_equal_constant_time("abc", 3, "abd", 3), "equal", "abc == abd");
    check(!tally_equal_constant_time("abc", 3, "ab", 2), "equal", "abc == ab");
    check(tally_equal_constant_time("", 0, "", 0), "equal", "empty != empty");
}

static void test_http_headers(void) {
    tally_http_headers headers = TALLY_HTTP_HEADERS_INIT;
    for (int i = 0; i < 20; i++)
        tally_http_headers_add(&headers, "x-n", "v");
    tally_http_headers_add(&headers, "Set-Cookie", "a=1");
    tally_http_headers_add_bytes(&headers, "set-cookie", "b=2\0x", 5);
    check(headers.len == 22, "headers_add", "not 22 fields");
    const tally_http_header *found = tally_http_headers_get(&headers, "SET-COOKIE");
    check(found == &headers.items[20], "headers_get", "not the first set-cookie");
    check_text("headers_get value", found->value, found->value_len, "a=1");
    check(headers.items[21].value_len == 5 && headers.items[21].value[5] == '\0', "headers_add_bytes",
          "value not kept whole with a NUL after it");
    check(tally_http_headers_get(&headers, "set-cooki") == NULL, "headers_get", "found a prefix");
    tally_http_headers_free(&headers);
    check(headers.items == NULL && headers.len == 0, "headers_free", "did not empty the list");
    tally_http_headers_free(NULL);

    tally_http_response resp = {200, TALLY_HTTP_HEADERS_INIT, TALLY_BYTES_INIT};
    tally_http_headers_add(&resp.headers, "x-a", "1");
    tally_http_headers_add(&resp.headers, "Content-Type", "application/json");
    tally_bytes_append_str(&resp.body, "old");
    tally_http_text(&resp, 201, "3 ok-3");
    check(resp.status == 201 && resp.headers.len == 2, "http_text", "status or headers");
    check_text("http_text kept", resp.headers.items[0].name, strlen(resp.headers.items[0].name), "x-a");
    check_text("http_text type", resp.headers.items[1].value, resp.headers.items[1].value_len, "text/plain");
    check_text("http_text body", resp.body.data, resp.body.len, "3 ok-3");
    tally_http_response_free(&resp);
    tally_http_response_free(NULL);
}

static void check_url(const char *url, const char *expect) {
    tally__url parts;
    tally_bytes got = TALLY_BYTES_INIT;
    if (tally__url_split(url, &parts)) {
        tally_bytes_append_str(&got, parts.scheme);
        tally_bytes_append_str(&got, " ");
        tally_bytes_append_str(&got, parts.authority);
        tally_bytes_append_str(&got, " ");
        tally_bytes_append_str(&got, parts.path_with_query);
        tally__url_free(&parts);
    } else {
        tally_bytes_append_str(&got, "invalid");
    }
    check_text(url, got.data, got.len, expect);
    tally_bytes_free(&got);
}

static void test_urls(void) {
    check_url("http://127.0.0.1:9000/sink", "http 127.0.0.1:9000 /sink");
    check_url("https://api.example.com", "https api.example.com /");
    check_url("http://h:1/a/b?x=1&y=2#frag", "http h:1 /a/b?x=1&y=2");
    check_url("http://h?q=1", "http h /?q=1");
    check_url("http://h#f", "http h /");
    check_url("127.0.0.1:9000/sink", "invalid");
    check_url("://h/", "invalid");
    check_url("http:///path", "invalid");
}

int main(int argc, char **argv) {
    test_tag_vectors(argc > 1 ? argv[1] : "../test-vectors/tags.json");
    test_integers();
    test_stored_i64();
    test_errors();
    test_text();
    test_words();
    test_bytes();
    test_json();
    test_signatures();
    test_http_headers();
    test_urls();
    test_calls();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
