package http

import (
	"io"
	"net/http"
	"reflect"
	"testing"

	"tally.dev/tally/internal/wasihttp"
	"tally.dev/tally/internal/wit"
)

func TestServeGivesTheHandlerTheRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
	})
	serve(h, &wasihttp.Request{
		Method:        "POST",
		PathWithQuery: "/orders/17?expand=items&expand=lines",
		Fields:        []wit.Field{field("x-signature", "sha256=ab"), field("x-a", "1"), field("X-A", "2")},
		Body:          []byte("payload"),
	})
	if got.Method != "POST" || got.URL.Path != "/orders/17" || got.RequestURI != "/orders/17?expand=items&expand=lines" {
		t.Errorf("method and target: %s %s %s", got.Method, got.URL.Path, got.RequestURI)
	}
	if q := got.URL.Query()["expand"]; !reflect.DeepEqual(q, []string{"items", "lines"}) {
		t.Errorf("query: %q", q)
	}
	if got.Header.Get("X-Signature") != "sha256=ab" || !reflect.DeepEqual(got.Header["X-A"], []string{"1", "2"}) {
		t.Errorf("headers: %v", got.Header)
	}
	if string(body) != "payload" || got.ContentLength != 7 {
		t.Errorf("body: %q, length %d", body, got.ContentLength)
	}
}

func TestServeWithoutAPathIsTheRoot(t *testing.T) {
	var path string
	serve(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { path = r.URL.Path }), &wasihttp.Request{Method: "GET"})
	if path != "/" {
		t.Errorf("path: %q", path)
	}
}

func TestServeCollectsTheResponse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    *wasihttp.Response
	}{
		{"nothing written is an empty 200", func(http.ResponseWriter, *http.Request) {},
			&wasihttp.Response{Status: 200}},
		{"the first status wins, headers sorted and repeated", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Add("X-B", "1")
			w.Header().Add("X-B", "2")
			w.Header().Set("Location", "/x")
			w.WriteHeader(201)
			w.WriteHeader(500)
			io.WriteString(w, "3 ok-3")
		}, &wasihttp.Response{Status: 201, Fields: []wit.Field{
			field("Content-Type", "text/plain"), field("Location", "/x"), field("X-B", "1"), field("X-B", "2"),
		}, Body: []byte("3 ok-3")}},
		{"a body without a content type gets the detected one", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "<html></html>")
		}, &wasihttp.Response{Status: 200, Fields: []wit.Field{field("Content-Type", "text/html; charset=utf-8")}, Body: []byte("<html></html>")}},
	} {
		got := serve(tc.handler, &wasihttp.Request{Method: "GET", PathWithQuery: "/"})
		if len(got.Body) == 0 {
			got.Body = nil
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

func TestServeRefusesABadTarget(t *testing.T) {
	called := false
	got := serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), &wasihttp.Request{Method: "GET", PathWithQuery: "no-slash"})
	if called || got.Status != 400 {
		t.Errorf("called %v, status %d", called, got.Status)
	}
}

func TestHandleOnce(t *testing.T) {
	defer func() { wasihttp.Handler = nil }()
	HandleFunc(func(http.ResponseWriter, *http.Request) {})
	defer func() {
		if recover() == nil {
			t.Error("a second Handle did not panic")
		}
	}()
	HandleFunc(func(http.ResponseWriter, *http.Request) {})
}

// field is a header as wasi:http carries it.
func field(name, value string) wit.Field {
	return wit.Field{Name: name, Value: []byte(value)}
}
