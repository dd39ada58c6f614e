// Package invoke calls other functions: WIT interface tally:platform/invoke.
package invoke

import (
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// Call runs function on the same book with input, waits for it, and returns its
// output.
//
// The child sees everything this invocation has read or written on the log. When the
// child's handler returns an error or the child traps, the call fails with a
// [tally.Failed] error; an unknown function fails with [tally.NotFound].
//
// The call is exactly-once: the child's invocation ID is derived from this
// invocation's ID and the call's step, and its outcome is logged, so when the platform
// runs this invocation again after a crash, the call returns the logged outcome
// instead of running the child again.
//
//	// A function may call itself, under the name it was deployed as.
//	output, err := invoke.Call(invocation.FunctionName(), []byte("child"))
func Call(function string, input []byte) ([]byte, error) {
	output, err := wit.InvokeCall(function, input)
	return output, hostcall.Err(err)
}
