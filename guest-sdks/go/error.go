package tally

import "strconv"

// Kind says why a call to the platform failed: which case of the WIT error variant of
// tally:platform/types an [Error] is.
type Kind uint8

// The kinds of [Error], one per case of the WIT error variant, in its order.
const (
	// InvalidArgument: the arguments were refused (a tag with the top bit set, tag 0
	// as the condition of logbook.CondAppend, a malformed table name, ...). Also a
	// stored value that is not what the SDK reads it as, such as one that is not a
	// decimal integer for state.GetInt64.
	InvalidArgument Kind = iota + 1
	// NotFound: a named thing does not exist, such as an unknown function for
	// invoke.Call.
	NotFound
	// Conflict: a conditional append lost; its position in the condition tag's stream
	// is held by another record (see [Error.Holder]).
	Conflict
	// Unavailable: the log or a node is unavailable right now; retrying later may
	// succeed.
	Unavailable
	// TooLarge: a record, payload or result is larger than its limit.
	TooLarge
	// Timeout: the operation did not finish in time; it may still have taken effect.
	Timeout
	// Failed: a child invocation failed: its handler returned an error, or it trapped.
	Failed
)

// kindNames are the WIT names of the kinds; kindTexts start their error messages.
var (
	kindNames = [...]string{"", "invalid-argument", "not-found", "conflict", "unavailable", "too-large", "timeout", "failed"}
	kindTexts = [...]string{"", "invalid argument", "not found", "conflict", "unavailable", "too large", "timeout", "failed"}
)

// String returns the kind's name in the WIT variant, such as "invalid-argument".
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is why a call to the platform failed: the WIT error variant of
// tally:platform/types. Every call of the SDK that fails because of the platform
// returns one, as an error of type *Error.
//
// Test for a kind with [errors.Is] and the sentinel of the kind, or read the details
// with [errors.As]:
//
//	seqnum, err := logbook.CondAppend(tags, data, tag, position)
//	var lost *tally.Error
//	switch {
//	case errors.As(err, &lost) && lost.Kind == tally.Conflict:
//		holder, known := lost.Holder, lost.HolderKnown
//		...
//	case errors.Is(err, tally.ErrUnavailable):
//		...
//	}
//
// Errors are values the function can handle; a broken guest or a host bug traps the
// invocation instead of returning one of these.
type Error struct {
	// Kind is the case of the variant.
	Kind Kind
	// Message is the platform's explanation, for every kind but [Conflict].
	Message string
	// Holder is the record that holds the position a [Conflict] wanted, when
	// HolderKnown is true; HolderKnown is false when that record has since been
	// trimmed.
	Holder SeqNum
	// HolderKnown says whether Holder is set.
	HolderKnown bool

	// sentinel marks the Err* values, which stand for a whole kind.
	sentinel bool
}

// The sentinels of the kinds, for [errors.Is]: errors.Is(err, tally.ErrConflict)
// reports whether err is (or wraps) an [*Error] of kind [Conflict].
var (
	ErrInvalidArgument = &Error{Kind: InvalidArgument, sentinel: true}
	ErrNotFound        = &Error{Kind: NotFound, sentinel: true}
	ErrConflict        = &Error{Kind: Conflict, sentinel: true}
	ErrUnavailable     = &Error{Kind: Unavailable, sentinel: true}
	ErrTooLarge        = &Error{Kind: TooLarge, sentinel: true}
	ErrTimeout         = &Error{Kind: Timeout, sentinel: true}
	ErrFailed          = &Error{Kind: Failed, sentinel: true}
)

// Error returns the error's message, the same text as the other Tally SDKs: the kind,
// then the details, as in "not found: function nosuch" or "conflict: the position is
// held by record 7". A sentinel's message is its kind alone.
func (e *Error) Error() string {
	text := e.Kind.String()
	if int(e.Kind) < len(kindTexts) && e.Kind != 0 {
		text = kindTexts[e.Kind]
	}
	switch {
	case e.sentinel:
		return text
	case e.Kind == Conflict && e.HolderKnown:
		return "conflict: the position is held by record " + e.Holder.String()
	case e.Kind == Conflict:
		return "conflict: the position is held by a trimmed record"
	default:
		return text + ": " + e.Message
	}
}

// Is reports whether target is the sentinel of e's kind, such as [ErrConflict] for a
// conflict, so that [errors.Is] tests the kind of an error.
func (e *Error) Is(target error) bool {
	sentinel, ok := target.(*Error)
	return ok && sentinel.sentinel && sentinel.Kind == e.Kind
}
