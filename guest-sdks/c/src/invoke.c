/* Calls to other functions: the `tally:platform/invoke` import. */
#include "wit.h"

int tally_invoke_call(const char *function, const void *input, size_t input_len, tally_bytes *output,
                      tally_error *err) {
    wit_string_t wit_function = tally__wit_string(function);
    wit_list_u8_t wit_input = tally__wit_bytes(input, input_len);
    wit_list_u8_t ret;
    tally_platform_invoke_error_t wit_err;
    if (!tally_platform_invoke_call(&wit_function, &wit_input, &ret, &wit_err))
        return tally__error_from_wit(&wit_err, err);
    *output = tally__bytes_from_wit(&ret);
    return TALLY_OK;
}
