/*
 * Bodies, read and written whole through wasi:io streams. Reads wait in
 * `blocking-read`; writes go in chunks of at most 4096 bytes, the most
 * `blocking-write-and-flush` takes at once.
 */
#include "wasi_http.h"

/** The most bytes one read asks for. */
#define READ_CHUNK_BYTES 65536
/** The most bytes `blocking-write-and-flush` accepts in one call. */
#define WRITE_CHUNK_BYTES 4096

/** Drops what a stream error owns; true if it was the end of the stream. */
static bool stream_error_is_end(wasi_io_streams_stream_error_t *err) {
    if (err->tag == WASI_IO_STREAMS_STREAM_ERROR_CLOSED)
        return true;
    wasi_io_error_error_drop_own(err->val.last_operation_failed);
    return false;
}

bool tally__body_read(wasi_http_types_own_incoming_body_t body, tally_bytes *out) {
    wasi_http_types_own_input_stream_t stream;
    bool whole = false;
    if (wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(body), &stream)) {
        wasi_io_streams_borrow_input_stream_t borrowed = wasi_io_streams_borrow_input_stream(stream);
        for (;;) {
            wit_list_u8_t chunk;
            wasi_io_streams_stream_error_t err;
            if (!wasi_io_streams_method_input_stream_blocking_read(borrowed, READ_CHUNK_BYTES, &chunk, &err)) {
                whole = stream_error_is_end(&err);
                break;
            }
            tally_bytes_append(out, chunk.ptr, chunk.len);
            wit_list_u8_free(&chunk);
        }
        wasi_io_streams_input_stream_drop_own(stream);
    }
    /* The trailers are not read: the SDK's requests and responses have none. */
    wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(body));
    return whole;
}

bool tally__body_write(wasi_http_types_own_outgoing_body_t body, const uint8_t *data, size_t len) {
    wasi_http_types_own_output_stream_t stream;
    bool written = wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(body), &stream);
    if (written) {
        wasi_io_streams_borrow_output_stream_t borrowed = wasi_io_streams_borrow_output_stream(stream);
        for (size_t done = 0; done < len && written;) {
            size_t chunk_len = len - done < WRITE_CHUNK_BYTES ? len - done : WRITE_CHUNK_BYTES;
            wit_list_u8_t chunk = tally__wit_bytes(data + done, chunk_len);
            wasi_io_streams_stream_error_t err;
            written = wasi_io_streams_method_output_stream_blocking_write_and_flush(borrowed, &chunk, &err);
            if (!written)
                stream_error_is_end(&err);
            done += chunk_len;
        }
        /* The stream is the body's child: it must go before the body is finished. */
        wasi_io_streams_output_stream_drop_own(stream);
    }
    wasi_http_types_error_code_t err;
    if (!wasi_http_types_static_outgoing_body_finish(body, NULL, &err)) {
        wasi_http_types_error_code_free(&err);
        written = false;
    }
    return written;
}
