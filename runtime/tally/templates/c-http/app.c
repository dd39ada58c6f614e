/* {{name}}: a Tally HTTP function, served at /fn/{{name}}/... */
#include <tally_http.h>

void tally_http_handle(const tally_http_request *req, tally_http_response *resp) {
    /*
     * Every call of tally.h works here, exactly-once as in any function. State, say:
     *
     *     tally_error err;
     *     if (tally_state_put_i64("visits", "count", 5, 1, &err) != TALLY_OK) {
     *         char *text = tally_error_text(&err);
     *         tally_http_text(resp, 500, text);
     *         free(text);
     *         tally_error_free(&err);
     *         return;
     *     }
     *
     * A call out, to a destination named at deploy (`tally deploy --outbound URL`):
     *
     *     tally_http_response up;
     *     if (tally_fetch("GET", "https://api.example.com/items", NULL, NULL, 0, &up, &err) == TALLY_OK)
     *         tally_http_response_free(&up);
     *
     * A setting (`tally deploy --config greeting=hi`): tally_config_get("greeting", &value, &err).
     */
    tally_bytes text = TALLY_BYTES_INIT;
    tally_bytes_append_str(&text, "hello from {{name}}: ");
    tally_bytes_append_str(&text, req->method);
    tally_bytes_append_str(&text, " ");
    tally_bytes_append_str(&text, req->path);
    tally_http_text(resp, 200, tally_bytes_cstr(&text));
    tally_bytes_free(&text);
}
