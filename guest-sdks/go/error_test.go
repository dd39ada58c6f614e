package tally

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorTextIsTheRustSDKs(t *testing.T) {
	for _, c := range []struct {
		err  *Error
		want string
	}{
		{&Error{Kind: InvalidArgument, Message: "tag 0"}, "invalid argument: tag 0"},
		{&Error{Kind: NotFound, Message: "f"}, "not found: f"},
		{&Error{Kind: Conflict, Holder: 7, HolderKnown: true}, "conflict: the position is held by record 7"},
		{&Error{Kind: Conflict}, "conflict: the position is held by a trimmed record"},
		{&Error{Kind: Unavailable, Message: "no quorum"}, "unavailable: no quorum"},
		{&Error{Kind: TooLarge, Message: "record"}, "too large: record"},
		{&Error{Kind: Timeout, Message: "append"}, "timeout: append"},
		{&Error{Kind: Failed, Message: "child trapped"}, "failed: child trapped"},
		{ErrConflict, "conflict"},
		{ErrTooLarge, "too large"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.err, got, c.want)
		}
	}
}

func TestErrorsIsMatchesTheKindsSentinel(t *testing.T) {
	sentinels := []error{ErrInvalidArgument, ErrNotFound, ErrConflict, ErrUnavailable, ErrTooLarge, ErrTimeout, ErrFailed}
	for i, sentinel := range sentinels {
		kind := Kind(i + 1)
		err := fmt.Errorf("wrapped: %w", &Error{Kind: kind, Message: "x"})
		for j, other := range sentinels {
			if got := errors.Is(err, other); got != (i == j) {
				t.Errorf("errors.Is(%v error, %v) = %v", kind, other, got)
			}
		}
		if errors.Is(err, &Error{Kind: kind, Message: "x"}) {
			t.Errorf("a %v error is another error of its kind that is not a sentinel", kind)
		}
		if sentinel.(*Error).Kind != kind {
			t.Errorf("sentinel %d has kind %v", i, sentinel.(*Error).Kind)
		}
	}
}

func TestKindsAreNamedAsInWIT(t *testing.T) {
	want := []string{"invalid-argument", "not-found", "conflict", "unavailable", "too-large", "timeout", "failed"}
	for i, name := range want {
		if got := Kind(i + 1).String(); got != name {
			t.Errorf("Kind(%d) = %q, want %q", i+1, got, name)
		}
	}
	if got := Kind(9).String(); got != "Kind(9)" {
		t.Errorf("Kind(9) = %q", got)
	}
}
