// Package logbook is the book's shared log: the LogBook API of Boki (§3), WIT
// interface tally:platform/log. (It is not named log, which would shadow the standard
// library's package.)
//
// Every invocation is bound to one book, and these calls act on it; a function never
// names a book, so it cannot read or write another one. Seqnums are totally ordered
// across the book; a [tally.Tag] selects a sub-stream of it, and [tally.TagAll] is the
// whole book.
//
//	tag 0 (TagAll):  1   2   3   4   5   6   7        every record, by seqnum
//	tag "a":         1       3           6            records that carry "a"
//	tag "b":             2   3       5                records that carry "b"
//	                              ^
//	ReadNext("a", 4) = 6     ReadPrev("b", 4) = 3     CheckTail("a") = 6
//
// For example, a function that records each order and says which came before it:
//
//	var orders = tally.NamedTag("orders")
//
//	func handle(order []byte) ([]byte, error) {
//		seqnum, err := logbook.Append([]tally.Tag{orders}, order)
//		if err != nil {
//			return nil, err
//		}
//		var previous *logbook.Record
//		if before, ok := seqnum.Prev(); ok {
//			if previous, err = logbook.ReadPrev(orders, before); err != nil {
//				return nil, err
//			}
//		}
//		if previous == nil {
//			return fmt.Appendf(nil, "order %v is the first", seqnum), nil
//		}
//		return fmt.Appendf(nil, "order %v follows order %v", seqnum, previous.SeqNum), nil
//	}
//
// Every call returns a [*tally.Error] when the platform refuses or fails it.
package logbook

import (
	"tally.dev/tally"
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// Record is a record read from the log.
type Record struct {
	// SeqNum is the record's position in the book.
	SeqNum tally.SeqNum
	// Tags are the tags the record was appended with, sorted, without tally.TagAll.
	Tags []tally.Tag
	// Data is the record's payload, as appended.
	Data []byte
	// Aux is the data attached later by SetAuxData, if the node that served the read
	// has it: nil when it has none, a non-nil empty slice for empty aux data. It is a
	// cache: it may be missing even after it was set.
	Aux []byte
}

func record(r *wit.Record, err *wit.Error) (*Record, error) {
	if err != nil {
		return nil, hostcall.Err(err)
	}
	if r == nil {
		return nil, nil
	}
	return &Record{SeqNum: tally.SeqNum(r.SeqNum), Tags: hostcall.Tags(r.Tags), Data: r.Data, Aux: r.Aux}, nil
}

// Append appends a record with data to the streams of tags, and returns its seqnum.
//
// With no tags the record is only in the whole book's stream. Tags with the top bit
// set are refused with [tally.ErrInvalidArgument].
func Append(tags []tally.Tag, data []byte) (tally.SeqNum, error) {
	seqnum, err := wit.LogAppend(hostcall.Numbers(tags), data)
	return tally.SeqNum(seqnum), hostcall.Err(err)
}

// CondAppend appends like [Append], but only if the record becomes entry number
// condPos (counting from 0) of condTag's stream.
//
// When another record holds that position, the append fails with a [tally.Conflict]
// error, which names the holder unless it has been trimmed since. This is the building
// block for exactly-once steps and log-based locks; condTag must not be
// [tally.TagAll].
func CondAppend(tags []tally.Tag, data []byte, condTag tally.Tag, condPos uint64) (tally.SeqNum, error) {
	seqnum, err := wit.LogCondAppend(hostcall.Numbers(tags), data, uint64(condTag), condPos)
	return tally.SeqNum(seqnum), hostcall.Err(err)
}

// ReadNext reads the first record of tag's stream at or after min, or nil if there is
// none yet.
func ReadNext(tag tally.Tag, min tally.SeqNum) (*Record, error) {
	return record(wit.LogReadNext(uint64(tag), uint64(min)))
}

// ReadPrev reads the last record of tag's stream at or before max, or nil if there is
// none.
func ReadPrev(tag tally.Tag, max tally.SeqNum) (*Record, error) {
	return record(wit.LogReadPrev(uint64(tag), uint64(max)))
}

// CheckTail reads the last record of tag's stream, or nil if the stream is empty.
func CheckTail(tag tally.Tag) (*Record, error) {
	return record(wit.LogCheckTail(uint64(tag)))
}

// Trim removes the records of tag's stream before seqnum; with [tally.TagAll], the
// records of every stream before seqnum.
func Trim(tag tally.Tag, seqnum tally.SeqNum) error {
	return hostcall.Err(wit.LogTrim(uint64(tag), uint64(seqnum)))
}

// SetAuxData attaches data to the record seqnum as its aux data, a best-effort cache
// that later reads may return in [Record.Aux] (Boki §3).
//
// The typical use is a snapshot of a state machine's value as of this record, so that
// the next reader replays the log from here instead of from the start (Boki §5.4).
func SetAuxData(seqnum tally.SeqNum, data []byte) error {
	return hostcall.Err(wit.LogSetAuxData(uint64(seqnum), data))
}
