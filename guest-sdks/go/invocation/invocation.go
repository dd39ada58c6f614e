// Package invocation says what the current invocation is, sleeps durably in it and
// waits in it for promises the outside world completes: WIT interface
// tally:platform/context. (It is not named context, which would shadow the standard
// library's package.)
package invocation

import (
	"time"

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

// Key returns the key the invocation was addressed to (?key= at the gateway), and
// false if it has none. An exclusive keyed invocation runs alone among the function's
// invocations with that key.
func Key() (string, bool) {
	return wit.Key()
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
	ms, err := hostcall.Millis(d, "duration of a sleep")
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

// PromiseCreate creates a promise that the outside world completes once, with
// POST /v1/promises/{id}?book=B and the value as the body, and returns its ID (the same
// when the platform runs the invocation again): hand it out (store it, append it to
// the log, pass it to a call), then [PromiseAwait] it.
//
//	promise, err := invocation.PromiseCreate()
//	if err != nil {
//		return nil, err
//	}
//	// Where the approver finds it.
//	if _, err := logbook.Append([]tally.Tag{tally.NamedTag("approvals")}, []byte(promise)); err != nil {
//		return nil, err
//	}
//	decision, err := invocation.PromiseAwait(promise)
func PromiseCreate() (string, error) {
	id, err := wit.PromiseCreate()
	return id, hostcall.Err(err)
}

// PromiseAwait returns the value of promise id of this book, waiting durably for it as
// [Sleep] does, for as long as it takes: the promise may be completed before, during or
// after the wait, and a long wait suspends the invocation (a synchronous caller is
// answered 202 with the invocation's [ID]) until the completion runs it again, which
// replays everything before the call. What the await got is logged, so a re-execution
// of the invocation gets the same.
//
// A promise this book never created fails with [tally.ErrNotFound], and an id that is
// not a promise ID with [tally.ErrInvalidArgument].
func PromiseAwait(id string) ([]byte, error) {
	value, err := wit.PromiseAwait(id, false, 0)
	if err != nil {
		return nil, hostcall.Err(err)
	}
	return value, nil
}

// PromiseAwaitTimeout is [PromiseAwait] for at most timeout (to the millisecond,
// rounded down): once that long has passed without a completion it fails with
// [tally.ErrTimeout] (a later completion is accepted and changes nothing). A timeout of
// 0 takes the value only if the promise is already complete. A negative timeout is
// refused with [tally.ErrInvalidArgument], by the SDK.
//
//	decision, err := invocation.PromiseAwaitTimeout(promise, 7*24*time.Hour)
//	if errors.Is(err, tally.ErrTimeout) {
//		decision = []byte("no answer")
//	} else if err != nil {
//		return nil, err
//	}
func PromiseAwaitTimeout(id string, timeout time.Duration) ([]byte, error) {
	ms, err := hostcall.Millis(timeout, "timeout of a promise's await")
	if err != nil {
		return nil, err
	}
	value, witErr := wit.PromiseAwait(id, true, ms)
	if witErr != nil {
		return nil, hostcall.Err(witErr)
	}
	return value, nil
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
