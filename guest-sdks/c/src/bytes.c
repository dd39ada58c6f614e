/* Byte buffers and allocation. Pure code: the unit tests build it natively. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void *tally__malloc(size_t size) {
    void *ptr = malloc(size == 0 ? 1 : size);
    if (ptr == NULL)
        abort();
    return ptr;
}

void *tally__realloc(void *ptr, size_t size) {
    void *grown = realloc(ptr, size == 0 ? 1 : size);
    if (grown == NULL)
        abort();
    return grown;
}

tally_bytes tally__bytes_from_abi(uint8_t *data, size_t len) {
    tally_bytes bytes = {len == 0 ? NULL : data, len, len};
    return bytes;
}

void tally_bytes_free(tally_bytes *bytes) {
    if (bytes == NULL)
        return;
    free(bytes->data);
    bytes->data = NULL;
    bytes->len = 0;
    bytes->cap = 0;
}

/** Makes room for `extra` more bytes (and a NUL after them), growing geometrically. */
static void reserve(tally_bytes *bytes, size_t extra) {
    if (extra > SIZE_MAX - bytes->len - 1)
        abort();
    size_t need = bytes->len + extra + 1;
    if (need <= bytes->cap)
        return;
    size_t cap = bytes->cap < 16 ? 16 : bytes->cap;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    bytes->data = tally__realloc(bytes->data, cap);
    bytes->cap = cap;
}

void tally_bytes_append(tally_bytes *bytes, const void *data, size_t len) {
    if (len == 0)
        return;
    reserve(bytes, len);
    memcpy(bytes->data + bytes->len, data, len);
    bytes->len += len;
}

void tally_bytes_append_str(tally_bytes *bytes, const char *text) {
    tally_bytes_append(bytes, text, strlen(text));
}

void tally_bytes_append_i64(tally_bytes *bytes, int64_t value) {
    char text[TALLY_INT_TEXT_MAX];
    size_t len = tally_format_i64(value, text);
    tally_bytes_append(bytes, text, len);
}

void tally_bytes_append_u64(tally_bytes *bytes, uint64_t value) {
    char text[TALLY_INT_TEXT_MAX];
    size_t len = tally_format_u64(value, text);
    tally_bytes_append(bytes, text, len);
}

const char *tally_bytes_cstr(tally_bytes *bytes) {
    reserve(bytes, 0);
    bytes->data[bytes->len] = '\0';
    return (const char *)bytes->data;
}
