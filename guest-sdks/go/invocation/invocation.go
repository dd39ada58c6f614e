// Package invocation says what the current invocation is, and sleeps durably in it:
// WIT interface tally:platform/context. (It is not named context, which would shadow
// the standard library's package.)
package invocation

import (
	"time"

	"tally.dev/tally"
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

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

// Sleep sleeps durably for d, to the millisecond (rounded down), at most a year.
//
// Its wake time is logged, so when the platform runs the
// invocation again it wakes at the same time, and a sleep may outlast the function's
// time limit and node restarts. A short sleep waits in place. A long one suspends the
// invocation: this execution ends there (the call does not return, and nothing is held
// while it sleeps; a synchronous caller is answered 202 with the invocation's [ID]),
// and at the wake time the platform runs the invocation again, which replays
// everything before the call, and the call then returns. As with every durable call,
// the invocation should reach it by the same calls in the same order when it runs
// again.
//
// A negative d is refused with [tally.ErrInvalidArgument] (by the SDK, without a call
// to the platform), and so is one longer than a year (by the platform).
//
//	// Reminds the user in three days, whatever the function's time limit.
//	if err := invocation.Sleep(72 * time.Hour); err != nil {
//		return nil, err
//	}
func Sleep(d time.Duration) error {
	ms, err := durationMillis(d)
	if err != nil {
		return err
	}
	return hostcall.Err(wit.Sleep(ms))
}

// SleepUntil sleeps durably until t, to the millisecond (rounded down), as [Sleep]: a
// long sleep suspends the invocation (a synchronous caller is answered 202 with the
// invocation's [ID]) and runs it again at t. A time in the past returns at once; one
// more than a year ahead is refused with [tally.ErrInvalidArgument].
func SleepUntil(t time.Time) error {
	return hostcall.Err(wit.SleepUntil(unixMillis(t)))
}

// durationMillis returns d in whole milliseconds, rounded down as the Rust SDK does, or
// an invalid-argument error for a negative d.
func durationMillis(d time.Duration) (uint64, error) {
	if d < 0 {
		return 0, &tally.Error{
			Kind:    tally.InvalidArgument,
			Message: "the duration of a sleep is negative: " + d.String(),
		}
	}
	return uint64(d / time.Millisecond), nil
}

// unixMillis returns t in whole milliseconds since the Unix epoch, rounded down: 0 for
// a time before the epoch, and the largest u64 for one too far ahead to count (as the
// Rust SDK does; the platform refuses it).
func unixMillis(t time.Time) uint64 {
	if t.Before(time.Unix(0, 0)) {
		return 0
	}
	const maxMillis = 1<<64 - 1
	seconds, millis := uint64(t.Unix()), uint64(t.Nanosecond()/1e6)
	if seconds > (maxMillis-millis)/1000 {
		return maxMillis
	}
	return seconds*1000 + millis
}
