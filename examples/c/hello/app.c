/* The smallest Tally function: it returns its input unchanged. */
#include <tally.h>

/* Echoes the input. Nothing can go wrong, so it always returns 0. */
int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
    tally_output_write(out, input, input_len);
    return 0;
}
