package tally

import (
	"runtime"
	"strconv"
	"strings"

	"tally.dev/tally/internal/wit"
)

// Handler is a function's entry point: it gets the invocation's input and returns the
// output, or an error whose message goes back to the caller.
type Handler func(input []byte) ([]byte, error)

// Handle declares handler as the function's entry point, which the platform calls with
// the invocation's input. Call it once, from an init function of the main package: a
// Tally function is built as a library, so main never runs.
//
//	func init() {
//		tally.Handle(func(input []byte) ([]byte, error) {
//			return []byte(fmt.Sprintf("%d bytes", len(input))), nil
//		})
//	}
//
// When the handler returns an error, the invocation fails with the error's message
// (HTTP 500 function_error at the gateway; invalid UTF-8 in it is replaced by U+FFFD).
// A panic traps the invocation instead (HTTP 500 trap): the panic's value and stack go
// to the function's stderr, and the trap's message ends with where the handler
// panicked and the value, as in "the handler panicked at orders/main.go:12
// (main.handle): boom".
//
// Handle panics if a handler was already declared.
func Handle(handler Handler) {
	if handler == nil {
		panic("tally.Handle: the handler is nil")
	}
	if wit.Handler != nil {
		panic("tally.Handle: a handler is already declared; call Handle once")
	}
	wit.Handler = func(input []byte) ([]byte, string, bool) {
		defer func() {
			if value := recover(); value != nil {
				crash(value)
			}
		}()
		return handleResult(handler(input))
	}
}

// handleResult converts a handler's result into the one the WIT export returns: the
// output, or the error's message and true. A nil error with a nil output is an empty
// output.
func handleResult(output []byte, err error) ([]byte, string, bool) {
	if err != nil {
		// A WIT string must be UTF-8, or the host traps lifting it.
		return nil, strings.ToValidUTF8(err.Error(), "\uFFFD"), true
	}
	return output, "", false
}

// crash reports a panic of the handler on stderr and ends the instance, which traps
// the invocation. It prints what the runtime would (the value and the goroutine's
// stack), then where the handler panicked and the value again as the last two lines,
// since the host quotes the end of stderr in its trap message; then it exits with
// status 2, as a Go program that panics does. (Letting the panic go on would end
// stderr with the runtime's own report, whose last lines are the bottom of the stack.)
func crash(value any) {
	text := panicText(value)
	stack := make([]byte, 64<<10)
	stack = stack[:runtime.Stack(stack, false)]
	writeStderr("panic: " + text + "\n\n" + string(stack) + "\nthe handler panicked at " + panicSite() + ":\n" + text + "\n")
	die(value)
}

// panicSite returns the file, line and function of the code that panicked: the first
// frame out of package runtime after the runtime's panic function.
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	panicking := false
	for {
		frame, more := frames.Next()
		switch {
		case frame.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(frame.Function, "runtime."):
			return frame.File + ":" + strconv.Itoa(frame.Line) + " (" + frame.Function + ")"
		}
		if !more {
			return "an unknown place"
		}
	}
}

// panicText returns a panic's value as text, as the runtime prints it for the common
// types.
func panicText(value any) string {
	switch v := value.(type) {
	case error:
		return v.Error()
	case interface{ String() string }:
		return v.String()
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return "a value of a type without a text"
	}
}
