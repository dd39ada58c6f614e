// Package wasihttp is the wasi:http@0.2.10 side of an HTTP function, by hand: the
// export wasi:http/incoming-handler#handle and the imports of wasi:http/types,
// wasi:http/outgoing-handler, wasi:io/streams and wasi:io/poll (wasihttp_wasip1.go),
// with bodies collected whole. The layouts are in internal/wit, which tests them.
//
// It is a package of its own, imported only by tally.dev/tally/http, because a
// //go:wasmexport is linked whenever its package is: the world `function` has no
// wasi:http, and a core module that imported or exported it would not become a
// component of that world.
package wasihttp

import "tally.dev/tally/internal/wit"

// Request is a request as the SDK sees it: collected whole.
type Request struct {
	Method string
	// Scheme and Authority are only set on requests out.
	Scheme    string
	Authority string
	// PathWithQuery is the path and the query, as "/orders/17?expand=items".
	PathWithQuery string
	Fields        []wit.Field
	Body          []byte
}

// Response is a response as the SDK sees it: collected whole.
type Response struct {
	Status uint16
	Fields []wit.Field
	Body   []byte
}

// Handler answers the requests the export gets; package tally.dev/tally/http sets it.
var Handler func(*Request) *Response

// readChunkBytes is how much one blocking-read asks for.
const readChunkBytes = 64 << 10

// writeChunkBytes is the most one blocking-write-and-flush takes (wasi:io/streams).
const writeChunkBytes = 4096
