// Package locks is locks of the invocation's book (BokiFlow, Boki §5.1): WIT interface
// tally:platform/locks.
//
// A lock is named by a string (1 to 256 bytes) and held by one invocation at a time. A
// holder that crashes keeps it while the platform runs it again; an invocation's locks
// are released when it finishes, whatever its outcome.
//
//	acquired, err := locks.Acquire("report", 5*time.Second)
//	if err != nil {
//		return nil, err
//	}
//	if !acquired {
//		return []byte("busy"), nil
//	}
//	defer locks.Release("report")
package locks

import (
	"time"

	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// The platform's imports: variables, so that the tests put a fake platform in their
// place.
var (
	witAcquire = wit.LocksAcquire
	witRelease = wit.LocksRelease
)

// Acquire acquires lock for this invocation, waiting up to timeout (to the
// millisecond, rounded down; at most the function's time limit) while another
// invocation holds it: false if the wait timed out. Acquiring a lock this invocation
// holds is true at once. A negative timeout is refused with
// [tally.ErrInvalidArgument], by the SDK, and one longer than the function's time
// limit by the platform.
func Acquire(lock string, timeout time.Duration) (bool, error) {
	ms, err := hostcall.Millis(timeout, "timeout of a lock's acquire")
	if err != nil {
		return false, err
	}
	acquired, witErr := witAcquire(lock, ms)
	return acquired, hostcall.Err(witErr)
}

// Release releases lock; it fails with [tally.ErrInvalidArgument] if this invocation
// does not hold it.
func Release(lock string) error {
	return hostcall.Err(witRelease(lock))
}
