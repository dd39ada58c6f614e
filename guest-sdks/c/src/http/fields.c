/* Header fields: wasi:http's `fields` resource and the SDK's header lists. */
#include <stdlib.h>
#include <string.h>

#include "wasi_http.h"

void tally__headers_from_fields(wasi_http_types_own_fields_t fields, tally_http_headers *headers) {
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(fields), &entries);
    for (size_t i = 0; i < entries.len; i++) {
        /* A copy with a NUL: the list and its strings are freed whole below. */
        wasi_http_types_field_name_t *wit_name = &entries.ptr[i].f0;
        char *name = tally__malloc(wit_name->len + 1);
        memcpy(name, wit_name->ptr, wit_name->len);
        name[wit_name->len] = '\0';
        wasi_http_types_field_value_t *value = &entries.ptr[i].f1;
        tally_http_headers_add_bytes(headers, name, value->ptr, value->len);
        free(name);
    }
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
    wasi_http_types_fields_drop_own(fields);
}

bool tally__fields_from_headers(const tally_http_headers *headers, wasi_http_types_own_fields_t *fields,
                                const char **refused) {
    wasi_http_types_own_fields_t made = wasi_http_types_constructor_fields();
    for (size_t i = 0; headers != NULL && i < headers->len; i++) {
        const tally_http_header *header = &headers->items[i];
        wasi_http_types_field_name_t name = tally__wit_string(header->name);
        wasi_http_types_field_value_t value = {(uint8_t *)header->value, header->value_len};
        wasi_http_types_header_error_t err;
        if (!wasi_http_types_method_fields_append(wasi_http_types_borrow_fields(made), &name, &value, &err)) {
            wasi_http_types_fields_drop_own(made);
            *refused = header->name;
            return false;
        }
    }
    *fields = made;
    return true;
}
