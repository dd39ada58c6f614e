//go:build !wasip1

package wasihttp

import "tally.dev/tally/internal/wit"

// Outside a GOOS=wasip1 build there is no host: Fetch stands in so that code using the
// SDK compiles, and its pure parts test, on any platform.

// Fetch sends a request out; it panics outside Wasm.
func Fetch(req *Request) (*Response, *wit.ErrorCode, error) {
	panic("tally: wasi:http is only reachable from a Tally component (GOOS=wasip1 GOARCH=wasm)")
}
