package invocation

import (
	"errors"
	"math"
	"testing"
	"time"

	"tally.dev/tally"
)

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
