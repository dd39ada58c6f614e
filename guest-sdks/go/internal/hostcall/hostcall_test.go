package hostcall

import (
	"errors"
	"testing"

	"tally.dev/tally"
	"tally.dev/tally/internal/wit"
)

func TestErrMapsEveryCase(t *testing.T) {
	cases := []struct {
		in       wit.Error
		sentinel error
		text     string
	}{
		{wit.Error{Case: 0, Message: "tag 0"}, tally.ErrInvalidArgument, "invalid argument: tag 0"},
		{wit.Error{Case: 1, Message: "f"}, tally.ErrNotFound, "not found: f"},
		{wit.Error{Case: 2, Holder: 7, HolderKnown: true}, tally.ErrConflict, "conflict: the position is held by record 7"},
		{wit.Error{Case: 2}, tally.ErrConflict, "conflict: the position is held by a trimmed record"},
		{wit.Error{Case: 3, Message: "no quorum"}, tally.ErrUnavailable, "unavailable: no quorum"},
		{wit.Error{Case: 4, Message: "record"}, tally.ErrTooLarge, "too large: record"},
		{wit.Error{Case: 5, Message: "append"}, tally.ErrTimeout, "timeout: append"},
		{wit.Error{Case: 6, Message: "child trapped"}, tally.ErrFailed, "failed: child trapped"},
	}
	for _, c := range cases {
		err := Err(&c.in)
		if !errors.Is(err, c.sentinel) {
			t.Errorf("case %d: %v is not %v", c.in.Case, err, c.sentinel)
		}
		if err.Error() != c.text {
			t.Errorf("case %d: %q, want %q", c.in.Case, err.Error(), c.text)
		}
	}
	var conflict *tally.Error
	if err := Err(&wit.Error{Case: 2, Holder: 9, HolderKnown: true}); !errors.As(err, &conflict) || conflict.Holder != 9 || !conflict.HolderKnown {
		t.Errorf("the conflict's holder is lost: %#v", conflict)
	}
	if err := Err(nil); err != nil {
		t.Errorf("Err(nil) = %#v, want a nil error", err)
	}
}

func TestTagsConvertWithoutLoss(t *testing.T) {
	tags := []tally.Tag{1, tally.NamedTag("a"), 1<<63 - 1}
	numbers := Numbers(tags)
	if len(numbers) != 3 || numbers[1] != uint64(tally.NamedTag("a")) || numbers[2] != 1<<63-1 {
		t.Fatalf("Numbers = %v", numbers)
	}
	back := Tags(numbers)
	for i := range tags {
		if back[i] != tags[i] {
			t.Fatalf("Tags(Numbers(%v)) = %v", tags, back)
		}
	}
	if len(Numbers(nil)) != 0 || len(Tags(nil)) != 0 {
		t.Fatal("an empty list is not empty")
	}
}
