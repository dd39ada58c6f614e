package hostcall

import (
	"errors"
	"math"
	"testing"
	"time"

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

func TestMillisRoundsDown(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want uint64
	}{
		{0, 0},
		{time.Nanosecond, 0},
		{time.Millisecond - 1, 0},
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 1},
		{time.Second, 1000},
		{72 * time.Hour, 72 * 3600 * 1000},
		{365 * 24 * time.Hour, 365 * 24 * 3600 * 1000},
		{math.MaxInt64, math.MaxInt64 / 1_000_000},
	}
	for _, c := range cases {
		ms, err := Millis(c.d, "duration of a sleep")
		if err != nil || ms != c.want {
			t.Errorf("Millis(%v) = %d, %v; want %d", c.d, ms, err, c.want)
		}
	}
}

func TestMillisRefusesNegative(t *testing.T) {
	for _, d := range []time.Duration{-time.Nanosecond, -1500 * time.Millisecond, math.MinInt64} {
		ms, err := Millis(d, "duration of a sleep")
		var e *tally.Error
		if !errors.As(err, &e) || e.Kind != tally.InvalidArgument || ms != 0 {
			t.Errorf("Millis(%v) = %d, %#v; want an invalid-argument error", d, ms, err)
			continue
		}
		if !errors.Is(err, tally.ErrInvalidArgument) {
			t.Errorf("Millis(%v): %v is not ErrInvalidArgument", d, err)
		}
	}
	_, err := Millis(-1500*time.Millisecond, "duration of a sleep")
	if want := "invalid argument: the duration of a sleep is negative: -1.5s"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
}
