package http

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"tally.dev/tally/internal/wasihttp"
	"tally.dev/tally/internal/wit"
)

func TestOutgoingSplitsTheURL(t *testing.T) {
	u, _ := url.Parse("https://api.example.com:8443/v1/items?page=2")
	got := outgoing("", u, http.Header{"Content-Type": {"application/json"}}, []byte("{}"))
	want := &wasihttp.Request{
		Method:        "GET",
		Scheme:        "https",
		Authority:     "api.example.com:8443",
		PathWithQuery: "/v1/items?page=2",
		Fields:        []wit.Field{field("Content-Type", "application/json")},
		Body:          []byte("{}"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v", got)
	}
	u, _ = url.Parse("http://127.0.0.1:9000")
	if got := outgoing("POST", u, nil, nil); got.PathWithQuery != "/" || got.Method != "POST" {
		t.Errorf("no path: %+v", got)
	}
}

func TestFetchRefusesARelativeURL(t *testing.T) {
	_, err := Fetch("GET", "/relative", nil, nil)
	var urlErr *url.Error
	if !errors.As(err, &urlErr) || urlErr.Op != "Get" || urlErr.Err.Error() != "the URL has no scheme or host" {
		t.Errorf("%v", err)
	}
}

func TestErrorsNameTheCode(t *testing.T) {
	err := &url.Error{Op: urlErrorOp("POST"), URL: "http://127.0.0.1:9/sink", Err: codeError(&wit.ErrorCode{Case: 15})}
	if err.Error() != `Post "http://127.0.0.1:9/sink": wasi:http error HTTP-request-denied` {
		t.Errorf("%v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != "HTTP-request-denied" {
		t.Errorf("not an *Error: %#v", err)
	}
	if got := codeError(&wit.ErrorCode{Case: 38, Detail: "boom"}).Error(); got != "wasi:http error internal-error: boom" {
		t.Errorf("with detail: %q", got)
	}
}
