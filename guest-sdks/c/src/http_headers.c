/*
 * Header lists, responses and URLs: the pure parts of HTTP functions and calls out, so
 * the unit tests build them natively.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tally_http.h"

/** A NUL-terminated copy of `len` bytes. */
static char *copy_text(const void *text, size_t len) {
    char *copy = tally__malloc(len + 1);
    if (len > 0)
        memcpy(copy, text, len);
    copy[len] = '\0';
    return copy;
}

void tally_http_headers_add_bytes(tally_http_headers *headers, const char *name, const void *value,
                                  size_t value_len) {
    if (headers->len == headers->cap) {
        headers->cap = headers->cap == 0 ? 8 : headers->cap * 2;
        headers->items = tally__realloc(headers->items, headers->cap * sizeof headers->items[0]);
    }
    tally_http_header *item = &headers->items[headers->len++];
    item->name = copy_text(name, strlen(name));
    item->value = copy_text(value, value_len);
    item->value_len = value_len;
}

void tally_http_headers_add(tally_http_headers *headers, const char *name, const char *value) {
    tally_http_headers_add_bytes(headers, name, value, strlen(value));
}

/** Whether two NUL-terminated names are equal without regard to ASCII case. */
static bool names_equal(const char *a, const char *b) {
    for (;; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
        if (x != y)
            return false;
        if (x == '\0')
            return true;
    }
}

const tally_http_header *tally_http_headers_get(const tally_http_headers *headers, const char *name) {
    for (size_t i = 0; i < headers->len; i++)
        if (names_equal(headers->items[i].name, name))
            return &headers->items[i];
    return NULL;
}

/** Removes every field named `name`, keeping the others in order. */
static void headers_remove(tally_http_headers *headers, const char *name) {
    size_t kept = 0;
    for (size_t i = 0; i < headers->len; i++) {
        if (names_equal(headers->items[i].name, name)) {
            free(headers->items[i].name);
            free(headers->items[i].value);
        } else {
            headers->items[kept++] = headers->items[i];
        }
    }
    headers->len = kept;
}

void tally_http_headers_free(tally_http_headers *headers) {
    if (headers == NULL)
        return;
    for (size_t i = 0; i < headers->len; i++) {
        free(headers->items[i].name);
        free(headers->items[i].value);
    }
    free(headers->items);
    headers->items = NULL;
    headers->len = 0;
    headers->cap = 0;
}

void tally_http_text(tally_http_response *resp, uint16_t status, const char *text) {
    resp->status = status;
    headers_remove(&resp->headers, "content-type");
    tally_http_headers_add(&resp->headers, "content-type", "text/plain");
    resp->body.len = 0;
    tally_bytes_append_str(&resp->body, text);
}

void tally_http_response_free(tally_http_response *resp) {
    if (resp == NULL)
        return;
    tally_http_headers_free(&resp->headers);
    tally_bytes_free(&resp->body);
}

bool tally__url_split(const char *url, tally__url *parts) {
    const char *colon = strstr(url, "://");
    if (colon == NULL || colon == url)
        return false;
    const char *authority = colon + 3;
    size_t authority_len = strcspn(authority, "/?#");
    if (authority_len == 0)
        return false;
    const char *path = authority + authority_len;
    /* A fragment stays with the client: it is never sent. */
    size_t path_len = strcspn(path, "#");
    parts->scheme = copy_text(url, (size_t)(colon - url));
    parts->authority = copy_text(authority, authority_len);
    if (path_len == 0) {
        parts->path_with_query = copy_text("/", 1);
    } else if (path[0] == '?') {
        /* "http://h?q" asks for the root with a query. */
        parts->path_with_query = tally__malloc(path_len + 2);
        parts->path_with_query[0] = '/';
        memcpy(parts->path_with_query + 1, path, path_len);
        parts->path_with_query[path_len + 1] = '\0';
    } else {
        parts->path_with_query = copy_text(path, path_len);
    }
    return true;
}

void tally__url_free(tally__url *parts) {
    free(parts->scheme);
    free(parts->authority);
    free(parts->path_with_query);
}
