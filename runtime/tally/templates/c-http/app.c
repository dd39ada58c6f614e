/* {{name}}: a Tally function that returns its input unchanged. */
#include <tally.h>

int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
    tally_output_write(out, input, input_len);
    return 0;
}
