// Package invocation says what the current invocation is: WIT interface
// tally:platform/context. (It is not named context, which would shadow the standard
// library's package.)
package invocation

import "tally.dev/tally/internal/wit"

// ID returns the invocation's ID. It stays the same when the platform runs the
// invocation again, so it can key work that must happen once.
func ID() string {
	return wit.InvocationID()
}

// BookID returns the ID of the book the invocation is bound to, which every logbook
// and state call acts on.
func BookID() uint64 {
	return wit.BookID()
}

// Attempt returns which execution of the invocation this is: 1 for the first, then 2,
// 3, ... when the platform runs it again.
func Attempt() uint32 {
	return wit.Attempt()
}

// FunctionName returns the name the function was deployed under.
func FunctionName() string {
	return wit.FunctionName()
}
