// Package hostcall turns what crossed the boundary (package wit) into the SDK's types:
// the error variant into a *tally.Error, tags into numbers and back.
package hostcall

import (
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
