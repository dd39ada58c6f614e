package tally

import "strconv"

// SeqNum is a record's position in its book: seqnums are totally ordered across the
// whole book, whatever the record's tags.
//
// It prints as a decimal number and [ParseSeqNum] reads that back, so it can travel in
// text payloads.
type SeqNum uint64

const (
	// SeqNumMin is the smallest seqnum: logbook.ReadNext(tag, tally.SeqNumMin) reads a
	// stream's first record.
	SeqNumMin SeqNum = 0
	// SeqNumMax is the largest seqnum: logbook.ReadPrev(tag, tally.SeqNumMax) reads a
	// stream's last record.
	SeqNumMax SeqNum = 1<<64 - 1
)

// Next returns the seqnum after s, and false after [SeqNumMax]. Reading a stream
// forward continues from record.SeqNum.Next().
func (s SeqNum) Next() (SeqNum, bool) {
	if s == SeqNumMax {
		return 0, false
	}
	return s + 1, true
}

// Prev returns the seqnum before s, and false before [SeqNumMin]. Reading a stream
// backward continues from record.SeqNum.Prev().
func (s SeqNum) Prev() (SeqNum, bool) {
	if s == SeqNumMin {
		return 0, false
	}
	return s - 1, true
}

// String returns the seqnum's number in decimal.
func (s SeqNum) String() string {
	return strconv.FormatUint(uint64(s), 10)
}

// ParseSeqNum reads a seqnum in decimal, as [SeqNum.String] writes it.
func ParseSeqNum(text string) (SeqNum, error) {
	n, err := strconv.ParseUint(text, 10, 64)
	return SeqNum(n), err
}
