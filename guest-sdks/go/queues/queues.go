// Package queues is durable FIFO queues of the invocation's book (BokiQueue, Boki
// §5.3): WIT interface tally:platform/queues.
//
// A queue is named by a string (1 to 256 bytes) and split into shards: the messages
// one invocation pushes go to one shard, in order, and each shard is FIFO. Every
// message is popped exactly once, by one invocation, whatever crashes and
// re-executions happen; and as every durable call, a push or a pop is exactly-once
// across re-executions of the invocation that makes it, so a function makes the same
// calls in the same order when the platform runs it again.
//
//	// A producer.
//	err := queues.Push("thumbnails", []byte(imageID))
//
//	// A consumer, waiting up to a second for work.
//	message, ok, err := queues.Pop("thumbnails", time.Second)
//	if err != nil {
//		return nil, err
//	}
//	if !ok {
//		return []byte("idle"), nil
//	}
//
//	// A consumer of up to eight jobs, with one record of the log.
//	jobs, err := queues.PopMany("thumbnails", 8, time.Second)
package queues

import (
	"strconv"
	"time"

	"tally.dev/tally"
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// The platform's imports: variables, so that the tests put a fake platform in their
// place.
var (
	witPush    = wit.QueuesPush
	witPop     = wit.QueuesPop
	witPopMany = wit.QueuesPopMany
)

// Push pushes message (at most 512 KiB) to queue.
func Push(queue string, message []byte) error {
	return hostcall.Err(witPush(queue, message))
}

// Pop pops the oldest message of one of queue's shards (this invocation's own shard
// first), waiting up to timeout (to the millisecond, rounded down; at most the
// function's time limit) for one without spinning; false if the queue stayed empty.
// A timeout of 0 pops only a message that is there already. A negative timeout is
// refused with [tally.ErrInvalidArgument], by the SDK, and one longer than the
// function's time limit by the platform.
func Pop(queue string, timeout time.Duration) ([]byte, bool, error) {
	ms, err := hostcall.Millis(timeout, "timeout of a pop")
	if err != nil {
		return nil, false, err
	}
	message, ok, witErr := witPop(queue, ms)
	if witErr != nil {
		return nil, false, hostcall.Err(witErr)
	}
	return message, ok, nil
}

// PopMany pops up to max (1 to 100) of the oldest messages of one of queue's shards, in
// order, with one record of the log where max pops would log max: it waits up to
// timeout for the first as [Pop] does, then takes what that shard holds, up to max. An
// empty slice if the queue stayed empty. A max out of range is refused with
// [tally.ErrInvalidArgument] (by the SDK when it is not a u32, else by the platform),
// and a timeout as [Pop]'s.
func PopMany(queue string, max int, timeout time.Duration) ([][]byte, error) {
	if max < 0 || uint64(max) > 0xFFFF_FFFF {
		return nil, &tally.Error{Kind: tally.InvalidArgument, Message: "a pop takes 1 to 100 messages, not " + strconv.Itoa(max)}
	}
	ms, err := hostcall.Millis(timeout, "timeout of a pop")
	if err != nil {
		return nil, err
	}
	messages, witErr := witPopMany(queue, uint32(max), ms)
	if witErr != nil {
		return nil, hostcall.Err(witErr)
	}
	return messages, nil
}
