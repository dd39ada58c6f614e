// Package hostcall turns what crossed the boundary (package wit) into the SDK's types
// and back: the error variant into a *tally.Error, tags into numbers and back, a
// duration into the milliseconds the WIT takes.
package hostcall

import (
	"time"
	"unsafe"

	"tally.dev/tally"
	"tally.dev/tally/internal/wit"
)

// Err returns the *tally.Error for an error variant, or a nil error for nil (never a
// typed nil).
func Err(e *wit.Error) error {
	if e == nil {
		return nil
	}
	return &tally.Error{
		Kind:        tally.Kind(e.Case + 1),
		Message:     e.Message,
		Holder:      tally.SeqNum(e.Holder),
		HolderKnown: e.HolderKnown,
	}
}

// Numbers returns the tags as the u64s they are, without a copy.
func Numbers(tags []tally.Tag) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(tags))), len(tags))
}

// Tags returns the u64s as tags, without a copy.
func Tags(numbers []uint64) []tally.Tag {
	return unsafe.Slice((*tally.Tag)(unsafe.Pointer(unsafe.SliceData(numbers))), len(numbers))
}

// Millis returns d in whole milliseconds, rounded down as the Rust SDK does, or an
// invalid-argument error for a negative d, which what names ("timeout of a pop"). The
// platform would read a negative duration as a huge u64, so it is refused here.
func Millis(d time.Duration, what string) (uint64, error) {
	if d < 0 {
		return 0, &tally.Error{
			Kind:    tally.InvalidArgument,
			Message: "the " + what + " is negative: " + d.String(),
		}
	}
	return uint64(d / time.Millisecond), nil
}
