package invocation

import (
	"errors"
	"math"
	"testing"
	"time"

	"tally.dev/tally"
)

func TestDurationMillisRoundsDown(t *testing.T) {
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
		ms, err := durationMillis(c.d, "duration of a sleep")
		if err != nil || ms != c.want {
			t.Errorf("durationMillis(%v) = %d, %v; want %d", c.d, ms, err, c.want)
		}
	}
}

func TestDurationMillisRefusesNegative(t *testing.T) {
	for _, d := range []time.Duration{-time.Nanosecond, -1500 * time.Millisecond, math.MinInt64} {
		ms, err := durationMillis(d, "duration of a sleep")
		var e *tally.Error
		if !errors.As(err, &e) || e.Kind != tally.InvalidArgument || ms != 0 {
			t.Errorf("durationMillis(%v) = %d, %#v; want an invalid-argument error", d, ms, err)
			continue
		}
		if !errors.Is(err, tally.ErrInvalidArgument) {
			t.Errorf("durationMillis(%v): %v is not ErrInvalidArgument", d, err)
		}
	}
	_, err := durationMillis(-1500*time.Millisecond, "duration of a sleep")
	if want := "invalid argument: the duration of a sleep is negative: -1.5s"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
}

func TestPromiseAwaitTimeoutRefusesNegative(t *testing.T) {
	// Refused before any call to the platform, which outside Wasm would panic.
	value, err := PromiseAwaitTimeout("0123456789abcdef0123456789abcdef", -2*time.Second)
	if !errors.Is(err, tally.ErrInvalidArgument) || value != nil {
		t.Fatalf("PromiseAwaitTimeout(-2s) = %q, %#v; want an invalid-argument error", value, err)
	}
	if want := "invalid argument: the timeout of a promise's await is negative: -2s"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
}

func TestUnixMillis(t *testing.T) {
	cases := []struct {
		t    time.Time
		want uint64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(0, 999_999), 0},
		{time.Unix(0, 1_000_000), 1},
		{time.UnixMilli(1_700_000_000_123), 1_700_000_000_123},
		{time.UnixMilli(1_700_000_000_123).Add(999 * time.Microsecond), 1_700_000_000_123},
		// The zone does not matter.
		{time.UnixMilli(1_700_000_000_123).In(time.FixedZone("UTC+5", 5*3600)), 1_700_000_000_123},
		// Before the epoch: 0, as a time in the past.
		{time.Unix(0, -1), 0},
		{time.Unix(-1, 0), 0},
		{time.Time{}, 0},
		{time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC), 0},
		// Too far ahead to count in u64 milliseconds: the largest (the platform refuses it).
		{time.Unix(1<<62, 0), math.MaxUint64},
		{time.Unix(math.MaxUint64/1000, 615_000_000), math.MaxUint64},
		{time.Unix(math.MaxUint64/1000, 616_000_000), math.MaxUint64},
		{time.Unix(math.MaxUint64/1000, 614_999_999), math.MaxUint64 - 1},
	}
	for _, c := range cases {
		if got := unixMillis(c.t); got != c.want {
			t.Errorf("unixMillis(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}
