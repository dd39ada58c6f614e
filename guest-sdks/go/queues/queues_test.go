package queues

import (
	"errors"
	"testing"
	"time"

	"tally.dev/tally"
	"tally.dev/tally/internal/wit"
)

// fakePop puts a pop in place of the platform's for the test, which returns message
// (none when nil) or err, and records the arguments in queue and ms.
func fakePop(t *testing.T, message []byte, err *wit.Error) (queue *string, ms *uint64) {
	saved := witPop
	t.Cleanup(func() { witPop = saved })
	queue, ms = new(string), new(uint64)
	witPop = func(q string, timeoutMs uint64) ([]byte, bool, *wit.Error) {
		*queue, *ms = q, timeoutMs
		return message, message != nil && err == nil, err
	}
	return queue, ms
}

func TestPushPassesItsArguments(t *testing.T) {
	saved := witPush
	t.Cleanup(func() { witPush = saved })
	var queue, message string
	witPush = func(q string, m []byte) *wit.Error {
		queue, message = q, string(m)
		return nil
	}
	if err := Push("jobs", []byte("resize 42")); err != nil || queue != "jobs" || message != "resize 42" {
		t.Errorf("Push: %v, %q, %q", err, queue, message)
	}
	witPush = func(string, []byte) *wit.Error { return &wit.Error{Case: 4, Message: "message"} }
	if err := Push("jobs", nil); !errors.Is(err, tally.ErrTooLarge) || err.Error() != "too large: message" {
		t.Errorf("Push: %v; want a too-large error", err)
	}
}

func TestPopPassesTheTimeoutInMilliseconds(t *testing.T) {
	queue, ms := fakePop(t, []byte("resize 42"), nil)
	message, ok, err := Pop("jobs", 1500*time.Microsecond+2*time.Second)
	if err != nil || !ok || string(message) != "resize 42" || *queue != "jobs" || *ms != 2001 {
		t.Errorf("Pop = %q, %v, %v with %q, %d ms", message, ok, err, *queue, *ms)
	}
}

func TestPopOfAnEmptyQueueIsFalse(t *testing.T) {
	_, ms := fakePop(t, nil, nil)
	message, ok, err := Pop("jobs", 0)
	if err != nil || ok || message != nil || *ms != 0 {
		t.Errorf("Pop = %q, %v, %v after %d ms", message, ok, err, *ms)
	}
}

func TestPopErrorsMapToTallyErrors(t *testing.T) {
	fakePop(t, nil, &wit.Error{Case: 0, Message: "the timeout is longer than the function's time limit"})
	message, ok, err := Pop("jobs", time.Hour)
	if !errors.Is(err, tally.ErrInvalidArgument) || ok || message != nil {
		t.Errorf("Pop = %q, %v, %v", message, ok, err)
	}
}

func TestPopRefusesANegativeTimeout(t *testing.T) {
	// Refused before any call to the platform, which outside Wasm would panic.
	message, ok, err := Pop("jobs", -time.Millisecond)
	if !errors.Is(err, tally.ErrInvalidArgument) || ok || message != nil {
		t.Fatalf("Pop(-1ms) = %q, %v, %v", message, ok, err)
	}
	if want := "invalid argument: the timeout of a pop is negative: -1ms"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
}

func TestPopManyPassesItsArguments(t *testing.T) {
	saved := witPopMany
	t.Cleanup(func() { witPopMany = saved })
	var queue string
	var max uint32
	var ms uint64
	witPopMany = func(q string, m uint32, timeoutMs uint64) ([][]byte, *wit.Error) {
		queue, max, ms = q, m, timeoutMs
		return [][]byte{[]byte("a"), []byte("b")}, nil
	}
	messages, err := PopMany("jobs", 8, 20*time.Millisecond)
	if err != nil || len(messages) != 2 || string(messages[1]) != "b" || queue != "jobs" || max != 8 || ms != 20 {
		t.Errorf("PopMany = %q, %v with %q, %d, %d ms", messages, err, queue, max, ms)
	}
	witPopMany = func(string, uint32, uint64) ([][]byte, *wit.Error) {
		return nil, &wit.Error{Case: 0, Message: "a pop takes 1 to 100 messages, not 0"}
	}
	if messages, err := PopMany("jobs", 0, 0); !errors.Is(err, tally.ErrInvalidArgument) || messages != nil {
		t.Errorf("PopMany(0) = %q, %v", messages, err)
	}
}

func TestPopManyRefusesWhatIsNoU32(t *testing.T) {
	// Refused before any call to the platform, which outside Wasm would panic.
	for _, max := range []int{-1, 1 << 32} {
		if messages, err := PopMany("jobs", max, 0); !errors.Is(err, tally.ErrInvalidArgument) || messages != nil {
			t.Errorf("PopMany(%d) = %q, %v", max, messages, err)
		}
	}
	if _, err := PopMany("jobs", 8, -time.Millisecond); !errors.Is(err, tally.ErrInvalidArgument) {
		t.Errorf("PopMany with a negative timeout: %v", err)
	}
}
