/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), so that a function can check a
 * webhook's signature: wasi-libc has no cryptography, and a component cannot link a
 * system library. Small rather than fast; the inputs are request bodies.
 */
#include <string.h>

#include "internal.h"
#include "tally_http.h"

typedef struct sha256 {
    uint32_t state[8];
    uint8_t block[64];
    size_t block_len;
    uint64_t total_len;
} sha256;

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) {
    return (x >> n) | (x << (32 - n));
}

static void sha256_init(sha256 *h) {
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, initial, sizeof initial);
    h->block_len = 0;
    h->total_len = 0;
}

static void sha256_compress(sha256 *h) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)h->block[4 * i] << 24 | (uint32_t)h->block[4 * i + 1] << 16 |
               (uint32_t)h->block[4 * i + 2] << 8 | h->block[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h->state[0], b = h->state[1], c = h->state[2], d = h->state[3];
    uint32_t e = h->state[4], f = h->state[5], g = h->state[6], k = h->state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + round_constants[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h->state[0] += a;
    h->state[1] += b;
    h->state[2] += c;
    h->state[3] += d;
    h->state[4] += e;
    h->state[5] += f;
    h->state[6] += g;
    h->state[7] += k;
}

static void sha256_update(sha256 *h, const uint8_t *data, size_t len) {
    h->total_len += len;
    while (len > 0) {
        size_t take = 64 - h->block_len < len ? 64 - h->block_len : len;
        memcpy(h->block + h->block_len, data, take);
        h->block_len += take;
        data += take;
        len -= take;
        if (h->block_len == 64) {
            sha256_compress(h);
            h->block_len = 0;
        }
    }
}

static void sha256_final(sha256 *h, uint8_t digest[TALLY_SHA256_LEN]) {
    uint64_t bits = h->total_len * 8;
    uint8_t pad = 0x80;
    sha256_update(h, &pad, 1);
    pad = 0;
    while (h->block_len != 56)
        sha256_update(h, &pad, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; i++)
        length[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(h, length, 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(h->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(h->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(h->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)h->state[i];
    }
}

void tally_sha256(const void *data, size_t len, uint8_t digest[TALLY_SHA256_LEN]) {
    sha256 h;
    sha256_init(&h);
    sha256_update(&h, data, len);
    sha256_final(&h, digest);
}

void tally_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                       uint8_t mac[TALLY_SHA256_LEN]) {
    /* A key longer than a block is hashed first; a shorter one is padded with zeros. */
    uint8_t block_key[64] = {0};
    if (key_len > sizeof block_key)
        tally_sha256(key, key_len, block_key);
    else if (key_len > 0)
        memcpy(block_key, key, key_len);
    uint8_t pad[64];
    sha256 h;
    for (int i = 0; i < 64; i++)
        pad[i] = block_key[i] ^ 0x36;
    sha256_init(&h);
    sha256_update(&h, pad, sizeof pad);
    sha256_update(&h, data, len);
    uint8_t inner[TALLY_SHA256_LEN];
    sha256_final(&h, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = block_key[i] ^ 0x5c;
    sha256_init(&h);
    sha256_update(&h, pad, sizeof pad);
    sha256_update(&h, inner, sizeof inner);
    sha256_final(&h, mac);
}

void tally_hex(const void *data, size_t len, char *hex) {
    static const char digits[] = "0123456789abcdef";
    const uint8_t *bytes = data;
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * len] = '\0';
}

bool tally_equal_constant_time(const void *a, size_t a_len, const void *b, size_t b_len) {
    if (a_len != b_len)
        return false;
    const uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < a_len; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}
