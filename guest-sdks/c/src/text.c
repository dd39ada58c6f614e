/*
 * Integers and UTF-8 text in the formats of Rust's standard library, which the Rust
 * SDK and the reference guests use, so that values and messages agree across
 * languages. Pure code: the unit tests build it natively.
 */
#include <string.h>

#include "internal.h"

/* ---- Integers ------------------------------------------------------------------------ */

/*
 * Rust's `from_str_radix` for radix 10: a lone sign is an invalid digit; a leading `+`
 * is allowed, and a leading `-` for signed types; then every byte must be a digit, and
 * each step checks the digit before the overflow, so "99999999999999999999x" is an
 * overflow and "1x" an invalid digit.
 */
static int parse_magnitude(const uint8_t *digits, size_t len, bool negative, uint64_t limit, uint64_t *magnitude) {
    uint64_t result = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = digits[i];
        if (c < '0' || c > '9')
            return TALLY_PARSE_INVALID_DIGIT;
        uint64_t digit = (uint64_t)(c - '0');
        if (result > limit / 10 || result * 10 > limit - digit)
            return negative ? TALLY_PARSE_NEG_OVERFLOW : TALLY_PARSE_POS_OVERFLOW;
        result = result * 10 + digit;
    }
    *magnitude = result;
    return TALLY_PARSE_OK;
}

int tally_parse_i64(const void *text, size_t len, int64_t *value) {
    const uint8_t *bytes = (const uint8_t *)text;
    if (len == 0)
        return TALLY_PARSE_EMPTY;
    if (len == 1 && (bytes[0] == '+' || bytes[0] == '-'))
        return TALLY_PARSE_INVALID_DIGIT;
    bool negative = bytes[0] == '-';
    if (bytes[0] == '+' || bytes[0] == '-') {
        bytes++;
        len--;
    }
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t magnitude;
    int status = parse_magnitude(bytes, len, negative, limit, &magnitude);
    if (status != TALLY_PARSE_OK)
        return status;
    /* Negating in unsigned arithmetic reaches INT64_MIN without signed overflow. */
    *value = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return TALLY_PARSE_OK;
}

int tally_parse_u64(const void *text, size_t len, uint64_t *value) {
    const uint8_t *bytes = (const uint8_t *)text;
    if (len == 0)
        return TALLY_PARSE_EMPTY;
    if (len == 1 && (bytes[0] == '+' || bytes[0] == '-'))
        return TALLY_PARSE_INVALID_DIGIT;
    /* Only `+`: for an unsigned type Rust takes a `-` as a digit, an invalid one. */
    if (bytes[0] == '+') {
        bytes++;
        len--;
    }
    return parse_magnitude(bytes, len, false, UINT64_MAX, value);
}

const char *tally_parse_status_message(int status) {
    switch (status) {
    case TALLY_PARSE_OK:
        return "ok";
    case TALLY_PARSE_EMPTY:
        return "cannot parse integer from empty string";
    case TALLY_PARSE_INVALID_DIGIT:
        return "invalid digit found in string";
    case TALLY_PARSE_POS_OVERFLOW:
        return "number too large to fit in target type";
    case TALLY_PARSE_NEG_OVERFLOW:
        return "number too small to fit in target type";
    default:
        return "unknown";
    }
}

/** Writes the digits of `value` and a NUL at `text`, which has room for 21 bytes. */
static size_t format_digits(uint64_t value, char *text) {
    char reversed[TALLY_INT_TEXT_MAX];
    size_t len = 0;
    do {
        reversed[len++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    for (size_t i = 0; i < len; i++)
        text[i] = reversed[len - 1 - i];
    text[len] = '\0';
    return len;
}

size_t tally_format_u64(uint64_t value, char text[TALLY_INT_TEXT_MAX]) {
    return format_digits(value, text);
}

size_t tally_format_i64(int64_t value, char text[TALLY_INT_TEXT_MAX]) {
    if (value >= 0)
        return format_digits((uint64_t)value, text);
    text[0] = '-';
    /* The magnitude of INT64_MIN does not fit an int64_t, so negate unsigned; it has
     * at most 19 digits, which fit after the sign. */
    return 1 + format_digits(0 - (uint64_t)value, text + 1);
}

/* ---- UTF-8 --------------------------------------------------------------------------- */

/** The outcome of reading one character. */
enum utf8_step {
    /** A valid character. */
    UTF8_VALID,
    /** An invalid sequence, which a complete text cannot extend into a valid one. */
    UTF8_INVALID,
    /** The text ends in the middle of what could still be a valid character. */
    UTF8_INCOMPLETE,
};

/*
 * Reads the character at the start of `s` (`n` > 0 bytes) and sets `*len` to its length
 * or, if it is invalid, to the length of the invalid sequence: the longest prefix of a
 * valid encoding (Unicode's "maximal subpart"), at least 1. These are the rules of
 * Rust's `run_utf8_validation` and `Utf8Chunks`: the second byte's range depends on the
 * first byte (no overlong forms, no surrogates, nothing above U+10FFFF).
 */
static enum utf8_step utf8_next(const uint8_t *s, size_t n, size_t *len) {
    uint8_t first = s[0];
    if (first < 0x80) {
        *len = 1;
        return UTF8_VALID;
    }
    size_t width;
    uint8_t low = 0x80, high = 0xbf; /* the range of the second byte */
    if (first >= 0xc2 && first <= 0xdf) {
        width = 2;
    } else if (first >= 0xe0 && first <= 0xef) {
        width = 3;
        if (first == 0xe0)
            low = 0xa0;
        else if (first == 0xed)
            high = 0x9f;
    } else if (first >= 0xf0 && first <= 0xf4) {
        width = 4;
        if (first == 0xf0)
            low = 0x90;
        else if (first == 0xf4)
            high = 0x8f;
    } else {
        *len = 1;
        return UTF8_INVALID;
    }
    for (size_t i = 1; i < width; i++) {
        if (i >= n) {
            *len = i;
            return UTF8_INCOMPLETE;
        }
        uint8_t lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xbf;
        if (s[i] < lo || s[i] > hi) {
            *len = i;
            return UTF8_INVALID;
        }
    }
    *len = width;
    return UTF8_VALID;
}

bool tally_utf8_check(const void *text, size_t len, size_t *valid_up_to, size_t *error_len) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        size_t step;
        enum utf8_step kind = utf8_next(s + i, len - i, &step);
        if (kind != UTF8_VALID) {
            if (valid_up_to)
                *valid_up_to = i;
            if (error_len)
                *error_len = kind == UTF8_INVALID ? step : 0;
            return false;
        }
        i += step;
    }
    return true;
}

void tally_utf8_error_text(size_t valid_up_to, size_t error_len, tally_bytes *out) {
    if (error_len > 0) {
        tally_bytes_append_str(out, "invalid utf-8 sequence of ");
        tally_bytes_append_u64(out, error_len);
        tally_bytes_append_str(out, " bytes from index ");
    } else {
        tally_bytes_append_str(out, "incomplete utf-8 byte sequence from index ");
    }
    tally_bytes_append_u64(out, valid_up_to);
}

static const uint8_t REPLACEMENT[3] = {0xef, 0xbf, 0xbd}; /* U+FFFD */

void tally_utf8_lossy(const void *text, size_t len, tally_bytes *out) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, valid_from = 0;
    while (i < len) {
        size_t step;
        if (utf8_next(s + i, len - i, &step) == UTF8_VALID) {
            i += step;
            continue;
        }
        tally_bytes_append(out, s + valid_from, i - valid_from);
        tally_bytes_append(out, REPLACEMENT, sizeof REPLACEMENT);
        i += step;
        valid_from = i;
    }
    tally_bytes_append(out, s + valid_from, len - valid_from);
}

/* ---- Words ------------------------------------------------------------------------- */

/**
 * The length of the whitespace character at the start of `s` (`n` > 0 bytes), or 0 if
 * it starts with something else. The characters of Unicode's White_Space property,
 * which is what Rust's `char::is_whitespace` tests.
 */
static size_t whitespace_len(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b == ' ' || (b >= 0x09 && b <= 0x0d))
        return 1;
    if (b == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2; /* U+0085, U+00A0 */
    if (n < 3)
        return 0;
    if (b == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
        return 3; /* U+1680 */
    if (b == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3; /* U+2000..U+200A, U+2028, U+2029, U+202F */
    if (b == 0xe2 && s[1] == 0x81 && s[2] == 0x9f)
        return 3; /* U+205F */
    if (b == 0xe3 && s[1] == 0x80 && s[2] == 0x80)
        return 3; /* U+3000 */
    return 0;
}

size_t tally_split_whitespace(const void *text, size_t len, tally_slice *words, size_t words_max) {
    const uint8_t *s = (const uint8_t *)text;
    size_t count = 0, i = 0;
    while (i < len) {
        size_t space = whitespace_len(s + i, len - i);
        if (space > 0) {
            i += space;
            continue;
        }
        size_t start = i;
        while (i < len && whitespace_len(s + i, len - i) == 0)
            i++;
        if (count < words_max) {
            words[count].data = s + start;
            words[count].len = i - start;
        }
        count++;
    }
    return count;
}

bool tally_slice_eq(tally_slice slice, const char *text) {
    size_t len = strlen(text);
    return slice.len == len && (len == 0 || memcmp(slice.data, text, len) == 0);
}

/* ---- Escaping ------------------------------------------------------------------------ */

static const char HEX[] = "0123456789abcdef";

/** Decodes the valid character of `len` bytes at `s`. */
static uint32_t utf8_decode(const uint8_t *s, size_t len) {
    switch (len) {
    case 1:
        return s[0];
    case 2:
        return ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
    case 3:
        return ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) | ((uint32_t)(s[2] & 0x3f) << 6) |
               (s[3] & 0x3f);
    }
}

/*
 * The non-ASCII characters that Rust's `{:?}` escapes and that are likely in text:
 * C1 controls, spaces other than U+0020, line and paragraph separators, format
 * characters, private use, and the common combining marks (grapheme extenders). Rust's full tables (unassigned code points, every extender of every
 * script) are not reproduced.
 */
static bool debug_escapes(uint32_t c) {
    static const uint32_t ranges[][2] = {
        {0x80, 0xa0},       {0xad, 0xad},       {0x300, 0x36f},     {0x483, 0x489},     {0x591, 0x5bd},
        {0x600, 0x605},     {0x61c, 0x61c},     {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x1680, 0x1680},
        {0x180e, 0x180e},   {0x1ab0, 0x1aff},   {0x1dc0, 0x1dff},   {0x2000, 0x200f},   {0x2028, 0x202f},
        {0x205f, 0x206f},   {0x20d0, 0x20ff},   {0x3000, 0x3000},   {0xd800, 0xf8ff},   {0xfe00, 0xfe0f},
        {0xfe20, 0xfe2f},   {0xfeff, 0xfeff},   {0xfff0, 0xfffb},   {0xfffe, 0xffff},   {0xe0000, 0xe0fff},
        {0xf0000, 0x10ffff},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (c >= ranges[i][0] && c <= ranges[i][1])
            return true;
    return false;
}

/** Appends `\u{..}` with the code point in lowercase hex, without leading zeros. */
static void append_unicode_escape(tally_bytes *out, uint32_t c) {
    char text[12];
    size_t len = 0;
    text[len++] = '\\';
    text[len++] = 'u';
    text[len++] = '{';
    int shift = 28;
    while (shift > 0 && ((c >> shift) & 0xf) == 0)
        shift -= 4;
    for (; shift >= 0; shift -= 4)
        text[len++] = HEX[(c >> shift) & 0xf];
    text[len++] = '}';
    tally_bytes_append(out, text, len);
}

void tally_quote(const void *text, size_t len, tally_bytes *out) {
    tally_bytes lossy = TALLY_BYTES_INIT;
    const uint8_t *s = (const uint8_t *)text;
    if (!tally_utf8_check(text, len, NULL, NULL)) {
        tally_utf8_lossy(text, len, &lossy);
        s = lossy.data;
        len = lossy.len;
    }
    tally_bytes_append(out, "\"", 1);
    size_t i = 0;
    while (i < len) {
        size_t step;
        utf8_next(s + i, len - i, &step);
        uint32_t c = utf8_decode(s + i, step);
        switch (c) {
        case '"':
            tally_bytes_append(out, "\\\"", 2);
            break;
        case '\\':
            tally_bytes_append(out, "\\\\", 2);
            break;
        case '\t':
            tally_bytes_append(out, "\\t", 2);
            break;
        case '\r':
            tally_bytes_append(out, "\\r", 2);
            break;
        case '\n':
            tally_bytes_append(out, "\\n", 2);
            break;
        case '\0':
            tally_bytes_append(out, "\\0", 2);
            break;
        default:
            if (c < 0x20 || c == 0x7f || debug_escapes(c))
                append_unicode_escape(out, c);
            else
                tally_bytes_append(out, s + i, step);
        }
        i += step;
    }
    tally_bytes_append(out, "\"", 1);
    tally_bytes_free(&lossy);
}

void tally_escape_ascii(const void *bytes, size_t len, tally_bytes *out) {
    const uint8_t *s = (const uint8_t *)bytes;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = s[i];
        char text[4];
        size_t text_len = 2;
        text[0] = '\\';
        switch (b) {
        case '\t':
            text[1] = 't';
            break;
        case '\r':
            text[1] = 'r';
            break;
        case '\n':
            text[1] = 'n';
            break;
        case '\\':
        case '\'':
        case '"':
            text[1] = (char)b;
            break;
        default:
            if (b >= 0x20 && b < 0x7f) {
                text[0] = (char)b;
                text_len = 1;
            } else {
                text[1] = 'x';
                text[2] = HEX[b >> 4];
                text[3] = HEX[b & 0xf];
                text_len = 4;
            }
        }
        tally_bytes_append(out, text, text_len);
    }
}
