/*
 * The webhook guest in C (the contract every language's webhook keeps, driven by one
 * host test): checks an HMAC-SHA256 signature of the body, forwards the body to the
 * `upstream` setting, then counts the delivery and keeps the upstream's answer in state.
 */
#include <stdlib.h>
#include <string.h>

#include <tally_http.h>

#define TABLE "hooks"
#define SIGNATURE_PREFIX "sha256="

/** Answers `status` with the error's text, and releases it. */
static void fail(tally_http_response *resp, uint16_t status, tally_error *err) {
    char *text = tally_error_text(err);
    tally_http_text(resp, status, text);
    free(text);
    tally_error_free(err);
}

/** Whether `header` is `sha256=<hex of HMAC-SHA256(secret, body)>`, compared in constant time. */
static bool signature_good(const tally_http_header *header, const char *secret, const tally_bytes *body) {
    if (header == NULL)
        return false;
    uint8_t mac[TALLY_SHA256_LEN];
    tally_hmac_sha256(secret, strlen(secret), body->data, body->len, mac);
    char expect[sizeof SIGNATURE_PREFIX - 1 + 2 * TALLY_SHA256_LEN + 1] = SIGNATURE_PREFIX;
    tally_hex(mac, sizeof mac, expect + sizeof SIGNATURE_PREFIX - 1);
    return tally_equal_constant_time(header->value, header->value_len, expect, strlen(expect));
}

void tally_http_handle(const tally_http_request *req, tally_http_response *resp) {
    if (strcmp(req->method, "POST") != 0) {
        tally_http_text(resp, 405, "method not allowed");
        return;
    }
    tally_error err;
    char *secret, *upstream;
    if (tally_config_get("webhook_secret", &secret, &err) != TALLY_OK) {
        fail(resp, 500, &err);
        return;
    }
    bool good = secret != NULL && signature_good(tally_http_headers_get(&req->headers, "x-signature"), secret, &req->body);
    free(secret);
    if (!good) {
        tally_http_text(resp, 401, "bad signature");
        return;
    }
    if (tally_config_get("upstream", &upstream, &err) != TALLY_OK) {
        fail(resp, 500, &err);
        return;
    }
    if (upstream == NULL) {
        tally_http_text(resp, 500, "the setting upstream is missing");
        return;
    }

    tally_http_headers headers = TALLY_HTTP_HEADERS_INIT;
    tally_http_headers_add(&headers, "content-type", "application/octet-stream");
    tally_http_response up;
    int status = tally_fetch("POST", upstream, &headers, req->body.data, req->body.len, &up, &err);
    tally_http_headers_free(&headers);
    free(upstream);
    if (status != TALLY_OK) {
        fail(resp, 502, &err);
        return;
    }
    if (up.status < 200 || up.status > 299) {
        tally_bytes text = TALLY_BYTES_INIT;
        tally_bytes_append_str(&text, "upstream answered ");
        tally_bytes_append_u64(&text, up.status);
        tally_http_text(resp, 502, tally_bytes_cstr(&text));
        tally_bytes_free(&text);
        tally_http_response_free(&up);
        return;
    }

    int64_t count = 0;
    bool found;
    if (tally_state_get_i64(TABLE, "count", 5, &count, &found, &err) != TALLY_OK ||
        tally_state_put_i64(TABLE, "count", 5, count + 1, &err) != TALLY_OK ||
        tally_state_put(TABLE, "last", 4, up.body.data, up.body.len, &err) != TALLY_OK) {
        tally_http_response_free(&up);
        fail(resp, 500, &err);
        return;
    }
    tally_bytes text = TALLY_BYTES_INIT;
    tally_bytes_append_i64(&text, count + 1);
    tally_bytes_append_str(&text, " ");
    tally_bytes_append(&text, up.body.data, up.body.len);
    tally_http_text(resp, 201, tally_bytes_cstr(&text));
    tally_bytes_free(&text);
    tally_http_response_free(&up);
}
