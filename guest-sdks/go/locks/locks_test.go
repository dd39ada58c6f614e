package locks

import (
	"errors"
	"testing"
	"time"

	"tally.dev/tally"
	"tally.dev/tally/internal/wit"
)

func TestAcquirePassesTheTimeoutInMilliseconds(t *testing.T) {
	saved := witAcquire
	t.Cleanup(func() { witAcquire = saved })
	var lock string
	var ms uint64
	for _, held := range []bool{true, false} {
		witAcquire = func(l string, timeoutMs uint64) (bool, *wit.Error) {
			lock, ms = l, timeoutMs
			return held, nil
		}
		acquired, err := Acquire("report", 2*time.Second+999*time.Microsecond)
		if err != nil || acquired != held || lock != "report" || ms != 2000 {
			t.Errorf("Acquire = %v, %v with %q, %d ms; want %v", acquired, err, lock, ms, held)
		}
	}
	witAcquire = func(string, uint64) (bool, *wit.Error) {
		return false, &wit.Error{Case: 3, Message: "no quorum"}
	}
	if acquired, err := Acquire("report", 0); !errors.Is(err, tally.ErrUnavailable) || acquired {
		t.Errorf("Acquire = %v, %v; want an unavailable error", acquired, err)
	}
}

func TestAcquireRefusesANegativeTimeout(t *testing.T) {
	// Refused before any call to the platform, which outside Wasm would panic.
	acquired, err := Acquire("report", -2*time.Second)
	if !errors.Is(err, tally.ErrInvalidArgument) || acquired {
		t.Fatalf("Acquire(-2s) = %v, %v", acquired, err)
	}
	if want := "invalid argument: the timeout of a lock's acquire is negative: -2s"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
}

func TestReleasePassesTheLockAndMapsErrors(t *testing.T) {
	saved := witRelease
	t.Cleanup(func() { witRelease = saved })
	var lock string
	witRelease = func(l string) *wit.Error {
		lock = l
		return nil
	}
	if err := Release("report"); err != nil || lock != "report" {
		t.Errorf("Release = %v with %q", err, lock)
	}
	witRelease = func(string) *wit.Error {
		return &wit.Error{Case: 0, Message: "the lock is not held by this invocation"}
	}
	err := Release("report")
	if !errors.Is(err, tally.ErrInvalidArgument) || err.Error() != "invalid argument: the lock is not held by this invocation" {
		t.Errorf("Release = %v; want an invalid-argument error", err)
	}
}
