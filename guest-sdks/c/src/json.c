/*
 * The JSON text the objects take: string values and pointer paths built from arbitrary
 * text. Pure code: the unit tests build it natively.
 */
#include "internal.h"

static const char HEX[] = "0123456789abcdef";

/**
 * Makes `len` bytes at `*text` valid UTF-8: when they are not, points `*text` at a
 * lossy copy in `lossy`, which the caller releases.
 */
static size_t valid_utf8(const uint8_t **text, size_t len, tally_bytes *lossy) {
    if (tally_utf8_check(*text, len, NULL, NULL))
        return len;
    tally_utf8_lossy(*text, len, lossy);
    *text = lossy->data;
    return lossy->len;
}

void tally_json_quote(const void *text, size_t len, tally_bytes *out) {
    tally_bytes lossy = TALLY_BYTES_INIT;
    const uint8_t *s = (const uint8_t *)text;
    len = valid_utf8(&s, len, &lossy);
    tally_bytes_append(out, "\"", 1);
    /* Runs of bytes that need no escape are appended at once. */
    size_t plain_from = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = s[i];
        if (b >= 0x20 && b != '"' && b != '\\')
            continue;
        tally_bytes_append(out, s + plain_from, i - plain_from);
        plain_from = i + 1;
        switch (b) {
        case '"':
            tally_bytes_append(out, "\\\"", 2);
            break;
        case '\\':
            tally_bytes_append(out, "\\\\", 2);
            break;
        case '\b':
            tally_bytes_append(out, "\\b", 2);
            break;
        case '\f':
            tally_bytes_append(out, "\\f", 2);
            break;
        case '\n':
            tally_bytes_append(out, "\\n", 2);
            break;
        case '\r':
            tally_bytes_append(out, "\\r", 2);
            break;
        case '\t':
            tally_bytes_append(out, "\\t", 2);
            break;
        default: {
            char escape[6] = {'\\', 'u', '0', '0', HEX[b >> 4], HEX[b & 0xf]};
            tally_bytes_append(out, escape, sizeof escape);
        }
        }
    }
    tally_bytes_append(out, s + plain_from, len - plain_from);
    tally_bytes_append(out, "\"", 1);
    tally_bytes_free(&lossy);
}

void tally_json_pointer_append(tally_bytes *path, const void *token, size_t len) {
    tally_bytes lossy = TALLY_BYTES_INIT;
    const uint8_t *s = (const uint8_t *)token;
    len = valid_utf8(&s, len, &lossy);
    tally_bytes_append(path, "/", 1);
    size_t plain_from = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '~' && s[i] != '/')
            continue;
        tally_bytes_append(path, s + plain_from, i - plain_from);
        tally_bytes_append(path, s[i] == '~' ? "~0" : "~1", 2);
        plain_from = i + 1;
    }
    tally_bytes_append(path, s + plain_from, len - plain_from);
    tally_bytes_free(&lossy);
}
