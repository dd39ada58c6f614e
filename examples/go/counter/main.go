// A counter kept as a replicated state machine on the book's log (Boki §5.4).
//
// Input "incr" or "incr N" adds 1 or N and returns the value as of that increment;
// "get" returns the current value. The output is the value in decimal.
//
// The log is the ground truth: each increment is a record in the "counter" stream, and
// the value as of a record is the sum of the increments up to and including it
// (wrapping at 2^64, so replay never fails on a large sum). Replaying the whole stream
// on every call would get slower as the log grows, and a function keeps no memory
// between invocations, so the value is cached in the log instead: after a replay, the
// reader attaches the value to the last record it replayed as aux data. The next
// reader walks back from where it wants the value to the newest record carrying such
// a snapshot, and replays forward only from there:
//
//	counter stream:   +1    +5    +2    +1    +3
//	aux data:               6           9
//	                                    ^ walk back to here, replay +3, value 12,
//	                                      leave aux data 12 on the last record
//
// Record data and aux data are both a uint64 in 8 little-endian bytes.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"tally.dev/tally"
	"tally.dev/tally/logbook"
)

// counter is the stream of increments.
var counter = tally.NamedTag("counter")

func init() {
	tally.Handle(handle)
}

// main is required by the Go compiler, but a Tally function is a library: the
// platform calls the handler declared in init, and main never runs.
func main() {}

func handle(input []byte) ([]byte, error) {
	incr, amount, err := parse(input)
	if err != nil {
		return nil, err
	}
	var value uint64
	if incr {
		seqnum, err := logbook.Append([]tally.Tag{counter}, encode(amount))
		if err != nil {
			return nil, err
		}
		value, err = valueAt(seqnum)
		if err != nil {
			return nil, err
		}
	} else {
		value, err = valueAt(tally.SeqNumMax)
		if err != nil {
			return nil, err
		}
	}
	return strconv.AppendUint(nil, value, 10), nil
}

// parse reads the command: true and the amount for an increment, false to read the
// value.
func parse(input []byte) (incr bool, amount uint64, err error) {
	if !utf8.Valid(input) {
		return false, 0, errors.New("the input is not UTF-8")
	}
	// Splitting on whitespace also tolerates a trailing newline from echo.
	words := strings.Fields(string(input))
	switch {
	case len(words) == 1 && words[0] == "incr":
		return true, 1, nil
	case len(words) == 2 && words[0] == "incr":
		// A leading + is accepted, as in the other SDKs' examples.
		amount, err := strconv.ParseUint(strings.TrimPrefix(words[1], "+"), 10, 64)
		if err != nil {
			return false, 0, fmt.Errorf("the amount %q is not a u64: %s", words[1], why(err, words[1]))
		}
		return true, amount, nil
	case len(words) == 1 && words[0] == "get":
		return false, 0, nil
	default:
		return false, 0, errors.New("expected `incr`, `incr N` or `get`")
	}
}

// valueAt returns the counter's value as of upto: the sum of the increments at or
// before it.
func valueAt(upto tally.SeqNum) (uint64, error) {
	value, next, more := uint64(0), tally.SeqNumMin, true
	snapshot, snapshotValue, found, err := newestSnapshot(upto)
	if err != nil {
		return 0, err
	}
	if found {
		value = snapshotValue
		next, more = snapshot.Next()
	}
	var lastReplayed tally.SeqNum
	replayed := false
	for more {
		record, err := logbook.ReadNext(counter, next)
		if err != nil {
			return 0, err
		}
		if record == nil || record.SeqNum > upto {
			break
		}
		amount, err := decode(record.Data)
		if err != nil {
			return 0, fmt.Errorf("reading increment %v: %w", record.SeqNum, err)
		}
		value += amount // wrapping
		lastReplayed, replayed = record.SeqNum, true
		// Stopping at upto itself saves incr a read past its own record.
		next, more = record.SeqNum.Next()
		more = more && next <= upto
	}
	if replayed {
		// The snapshot is only a cache, so failing to leave one is not an error: the
		// value is right either way, and failing an incr whose increment is already
		// in the log would invite a retry that counts it twice.
		_ = logbook.SetAuxData(lastReplayed, encode(value))
	}
	return value, nil
}

// newestSnapshot walks back from upto to the newest increment carrying a snapshot of
// the value, and returns its seqnum and the value; found is false when no increment at
// or before upto has one.
func newestSnapshot(upto tally.SeqNum) (seqnum tally.SeqNum, value uint64, found bool, err error) {
	max, more := upto, true
	for more {
		record, err := logbook.ReadPrev(counter, max)
		if err != nil {
			return 0, 0, false, err
		}
		if record == nil {
			break
		}
		if record.Aux != nil {
			value, err := decode(record.Aux)
			if err != nil {
				return 0, 0, false, fmt.Errorf("reading the snapshot in %v: %w", record.SeqNum, err)
			}
			return record.SeqNum, value, true, nil
		}
		max, more = record.SeqNum.Prev()
	}
	return 0, 0, false, nil
}

// why says why strconv refused a number, in the words of the Rust example (Rust's
// ParseIntError), so that the examples of every SDK answer alike.
func why(err error, text string) string {
	switch {
	case !errors.Is(err, strconv.ErrRange):
		return "invalid digit found in string"
	case strings.HasPrefix(text, "-"):
		return "number too small to fit in target type"
	default:
		return "number too large to fit in target type"
	}
}

// encode stores a uint64 as 8 little-endian bytes.
func encode(n uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, n)
}

// decode reads a uint64 stored as 8 little-endian bytes.
func decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("expected 8 bytes, found %d", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}
