package http

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"tally.dev/tally/internal/wasihttp"
	"tally.dev/tally/internal/wit"
)

// Response is the answer to a request out, collected whole.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Error is a request out that wasi:http failed: Code is its error-code, as
// "HTTP-request-denied" (a destination the deploy did not allow with --outbound) or
// "connection-refused".
type Error struct {
	Code string
	// Detail is the error-code's payload, when it has a text: an internal error's
	// message, a size limit.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return "wasi:http error " + e.Code + ": " + e.Detail
	}
	return "wasi:http error " + e.Code
}

// Fetch sends a request out through wasi:http/outgoing-handler and returns the
// response, whatever its status. A request the platform could not make fails with a
// *url.Error around an *Error with the wasi:http error code:
//
//	resp, err := tallyhttp.Fetch("POST", "http://127.0.0.1:9000/sink",
//		http.Header{"Content-Type": {"application/octet-stream"}}, body)
//
// The destination must be allowed at deploy (tally deploy --outbound), and the
// function must be of world http-function: the world `function` does not import
// wasi:http. Each request out is a step of the invocation: its response is logged, and
// a re-execution gets it without sending again (docs/http.md).
func Fetch(method, rawURL string, header http.Header, body []byte) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	resp, err := fetch(outgoing(method, u, header, body))
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(method), URL: rawURL, Err: err}
	}
	return &Response{StatusCode: int(resp.Status), Header: headerOf(resp.Fields), Body: resp.Body}, nil
}

// Transport is an http.RoundTripper on wasi:http/outgoing-handler, for an
// http.Client (or a library that takes one):
//
//	client := &http.Client{Transport: tallyhttp.Transport{}}
//	resp, err := client.Get("https://api.example.com/v1/items")
//
// It collects bodies whole, as Fetch, and follows no redirect itself (http.Client does,
// each one a new request out).
type Transport struct{}

// RoundTrip sends req and returns its response.
func (Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	resp, err := fetch(outgoing(req.Method, req.URL, req.Header, body))
	if err != nil {
		return nil, err
	}
	status := int(resp.Status)
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        headerOf(resp.Fields),
		Body:          io.NopCloser(bytes.NewReader(resp.Body)),
		ContentLength: int64(len(resp.Body)),
		Request:       req,
	}, nil
}

// outgoing makes the request wasi:http sends: an empty method is GET, as in net/http.
func outgoing(method string, u *url.URL, h http.Header, body []byte) *wasihttp.Request {
	if method == "" {
		method = http.MethodGet
	}
	return &wasihttp.Request{
		Method:        method,
		Scheme:        u.Scheme,
		Authority:     u.Host,
		PathWithQuery: u.RequestURI(),
		Fields:        fieldsOf(h),
		Body:          body,
	}
}

// fetch sends req and makes an *Error of a wasi:http error code.
func fetch(req *wasihttp.Request) (*wasihttp.Response, error) {
	if req.Scheme == "" || req.Authority == "" {
		return nil, errors.New("the URL has no scheme or host")
	}
	resp, code, err := wasihttp.Fetch(req)
	if code != nil {
		return nil, codeError(code)
	}
	return resp, err
}

func codeError(code *wit.ErrorCode) *Error {
	return &Error{Code: code.Name(), Detail: code.Detail}
}

// urlErrorOp is the Op of a *url.Error as http.Client writes it: "Post" for POST.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}
