// Package http writes Tally HTTP functions with the standard library's net/http: a
// function of world tally:platform/http-function (a wasi:http proxy) registers an
// [net/http.Handler] with [Handle], and sends requests out with [Fetch] or an
// [net/http.Client] whose Transport is [Transport].
//
// Import it under another name, since it shares its name with net/http:
//
//	import (
//		"net/http"
//
//		tallyhttp "tally.dev/tally/http"
//	)
//
//	func init() {
//		tallyhttp.HandleFunc(func(w http.ResponseWriter, r *http.Request) {
//			fmt.Fprintf(w, "hello: %s %s\n", r.Method, r.URL.RequestURI())
//		})
//	}
//
// Bodies are collected whole, both ways: a request's body is read before the handler
// runs, and the response is sent when it returns (Tally collects and logs the response
// whole anyway). The platform's limits bound them: the function's request_bytes_max and
// response_bytes_max, and for calls out outgoing_request_bytes_max and
// outgoing_response_bytes_max (at most 768 KiB).
//
// The SDK's other packages (state, logbook, invoke, ...) work inside the handler as
// in any function: an HTTP request is one invocation.
package http

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"tally.dev/tally/internal/wasihttp"
	"tally.dev/tally/internal/wit"
)

// Handle declares h as the function's HTTP handler. Call it once, from an init function
// of the main package: the platform calls the handler for each request, and main never
// runs. It panics if a handler was already declared.
//
// The handler gets the method, the path below the function's route with the query
// (r.URL and r.RequestURI), the headers (repeated ones kept) and the body; r.Host is
// empty, since the platform does not pass the Host header. What it writes to w is the
// response: the status (200 unless WriteHeader says otherwise), the headers
// (Content-Type detected from the body when not set, as net/http does) and the body.
// A panic traps the invocation (HTTP 500 from the platform).
func Handle(h http.Handler) {
	if h == nil {
		panic("tally/http.Handle: the handler is nil")
	}
	if wasihttp.Handler != nil {
		panic("tally/http.Handle: a handler is already declared; call Handle once")
	}
	wasihttp.Handler = func(req *wasihttp.Request) *wasihttp.Response {
		return serve(h, req)
	}
}

// HandleFunc declares f as the function's HTTP handler, as Handle.
func HandleFunc(f func(http.ResponseWriter, *http.Request)) {
	Handle(http.HandlerFunc(f))
}

// serve runs h on the collected request and collects its response.
func serve(h http.Handler, in *wasihttp.Request) *wasihttp.Response {
	r, err := newRequest(in)
	if err != nil {
		return &wasihttp.Response{Status: http.StatusBadRequest, Body: []byte(err.Error())}
	}
	w := &responseWriter{header: make(http.Header)}
	h.ServeHTTP(w, r)
	return w.response()
}

// newRequest makes the *http.Request a handler gets, as a server would.
func newRequest(in *wasihttp.Request) (*http.Request, error) {
	target := in.PathWithQuery
	if target == "" {
		target = "/"
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, err
	}
	return &http.Request{
		Method:        in.Method,
		URL:           u,
		RequestURI:    target,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        headerOf(in.Fields),
		Body:          io.NopCloser(bytes.NewReader(in.Body)),
		ContentLength: int64(len(in.Body)),
	}, nil
}

// headerOf makes an http.Header of wasi:http fields, repeated names kept in order.
func headerOf(fields []wit.Field) http.Header {
	h := make(http.Header, len(fields))
	for _, f := range fields {
		h.Add(f.Name, string(f.Value))
	}
	return h
}

// fieldsOf makes wasi:http fields of an http.Header, names sorted so that the same
// header is always sent the same way.
func fieldsOf(h http.Header) []wit.Field {
	var list []wit.Field
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, value := range h[name] {
			list = append(list, wit.Field{Name: name, Value: []byte(value)})
		}
	}
	return list
}

// responseWriter collects a handler's response.
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader sets the status once, as net/http does: later calls are ignored.
func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *responseWriter) response() *wasihttp.Response {
	w.WriteHeader(http.StatusOK)
	body := w.body.Bytes()
	if _, ok := w.header["Content-Type"]; !ok && len(body) > 0 {
		w.header.Set("Content-Type", http.DetectContentType(body))
	}
	return &wasihttp.Response{Status: uint16(w.status), Fields: fieldsOf(w.header), Body: body}
}
