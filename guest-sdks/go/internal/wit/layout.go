// Package wit is the component model's canonical ABI for world tally:platform/function,
// written by hand: the imports and the export of the core module, the allocator the
// host calls, and the layouts of the values that cross the boundary. The layouts of
// wasi:config (config.go) and of wasi:http (http.go, whose imports and export are in
// internal/wasihttp) are here too.
//
// The layouts (this file) are plain Go over a [Memory], so that they are tested on the
// host; the imports and exports (wit_wasip1.go) exist only in a GOOS=wasip1 build, and
// the other platforms get stubs that panic (wit_other.go), so that code using the SDK
// still compiles and its pure parts test natively.
//
// Every flattened signature and offset below follows the canonical ABI for wasm32:
// a list or string is (pointer u32, length u32), a variant's payload starts at its
// largest case alignment, and a result with more than one flat value is returned
// through a pointer to an area (the caller's for imports, the callee's for exports).
package wit

import "unicode/utf8"

// Handler is the function's entry point, set by tally.Handle: the output, or an error
// message and true.
var Handler func(input []byte) (output []byte, message string, failed bool)

// Memory reads the guest's linear memory: n bytes at address ptr. In the Wasm build it
// is the memory itself, with no copy; tests use a byte slice.
type Memory interface {
	// Bytes returns the n bytes at address ptr.
	Bytes(ptr, n uint32) []byte
}

// Error is the WIT error variant as it crossed the boundary; package hostcall makes it
// a *tally.Error.
type Error struct {
	// Case is the variant's discriminant: 0 invalid-argument, 1 not-found, 2 conflict,
	// 3 unavailable, 4 too-large, 5 timeout, 6 failed.
	Case uint8
	// Message is the payload of every case but conflict.
	Message string
	// Holder is conflict's option<u64>, when HolderKnown.
	Holder uint64
	// HolderKnown is the case of conflict's option<u64>.
	HolderKnown bool
}

// The variant's conflict case, the only one without a string.
const caseConflict = 2

// Record is a log-record as it crossed the boundary.
type Record struct {
	// SeqNum is the record's seqnum.
	SeqNum uint64
	// Tags are the record's tags, a copy.
	Tags []uint64
	// Data is the record's data: the memory the host wrote.
	Data []byte
	// Aux is nil for none; some empty aux data is a non-nil empty slice.
	Aux []byte
}

// Sizes of the return areas: the largest is result<option<log-record>, error>.
const (
	areaBytes       = 56
	handleAreaBytes = 12
)

// u32 and u64 read little-endian integers. (Not encoding/binary, which would link
// package reflect into every function.)
func u32(area []byte, offset int) uint32 {
	b := area[offset : offset+4]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func u64(area []byte, offset int) uint64 {
	return uint64(u32(area, offset)) | uint64(u32(area, offset+4))<<32
}

func putU32(area []byte, offset int, n uint32) {
	b := area[offset : offset+4]
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// bytes reads the list<u8> whose (pointer, length) is at offset: the memory itself, not
// a copy. An empty list is a non-nil empty slice.
func bytes(mem Memory, area []byte, offset int) []byte {
	n := u32(area, offset+4)
	if n == 0 {
		return []byte{}
	}
	return mem.Bytes(u32(area, offset), n)
}

// text reads the string whose (pointer, length) is at offset, as a copy.
func text(mem Memory, area []byte, offset int) string {
	s := string(bytes(mem, area, offset))
	if !utf8.ValidString(s) {
		// The host only sends UTF-8; anything else is a broken host.
		panic("tally: the host sent a string that is not UTF-8")
	}
	return s
}

// u64s reads the list<u64> whose (pointer, length) is at offset, as a copy.
func u64s(mem Memory, area []byte, offset int) []uint64 {
	n := u32(area, offset+4)
	list := make([]uint64, n)
	if n == 0 {
		return list
	}
	raw := mem.Bytes(u32(area, offset), n*8)
	for i := range list {
		list[i] = u64(raw, i*8)
	}
	return list
}

func badCase(what string, c byte) {
	panic("tally: the host sent discriminant " + itoa(uint64(c)) + " for " + what)
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// decodeError reads an error variant: a u8 case at 0 and the payload at 8 (the
// alignment of option<u64>), 24 bytes in all. A string case's payload is (pointer,
// length); conflict's is an option<u64>, a u8 case at 8 and the u64 at 16.
func decodeError(mem Memory, area []byte) *Error {
	e := &Error{Case: area[0]}
	switch {
	case e.Case == caseConflict:
		switch area[8] {
		case 0:
		case 1:
			e.Holder, e.HolderKnown = u64(area, 16), true
		default:
			badCase("option<u64>", area[8])
		}
	case e.Case <= 6:
		e.Message = text(mem, area, 8)
	default:
		badCase("error", e.Case)
	}
	return e
}

// resultErr reads the case of a result<T, error> at 0 and returns its error, nil for
// ok. Every result here has its payload at 8, since error's alignment is 8.
func resultErr(mem Memory, area []byte) *Error {
	switch area[0] {
	case 0:
		return nil
	case 1:
		return decodeError(mem, area[8:])
	default:
		badCase("result", area[0])
		return nil
	}
}

// DecodeU64Result reads a result<u64, error>, 32 bytes.
func DecodeU64Result(mem Memory, area []byte) (uint64, *Error) {
	if err := resultErr(mem, area); err != nil {
		return 0, err
	}
	return u64(area, 8), nil
}

// DecodeUnitResult reads a result<_, error>, 32 bytes.
func DecodeUnitResult(mem Memory, area []byte) *Error {
	return resultErr(mem, area)
}

// DecodeRecordResult reads a result<option<log-record>, error>, 56 bytes: the
// option's case at 8 and the record at 16, whose fields are seqnum (u64) at 0, tags
// (list<u64>) at 8, data (list<u8>) at 16 and aux-data (option<list<u8>>: a case at 24,
// the list at 28), 40 bytes with padding.
func DecodeRecordResult(mem Memory, area []byte) (*Record, *Error) {
	if err := resultErr(mem, area); err != nil {
		return nil, err
	}
	switch area[8] {
	case 0:
		return nil, nil
	case 1:
	default:
		badCase("option<log-record>", area[8])
	}
	r := area[16:]
	record := &Record{SeqNum: u64(r, 0), Tags: u64s(mem, r, 8), Data: bytes(mem, r, 16)}
	switch r[24] {
	case 0:
	case 1:
		record.Aux = bytes(mem, r, 28)
	default:
		badCase("option<list<u8>>", r[24])
	}
	return record, nil
}

// DecodeBytesResult reads a result<list<u8>, error>, 32 bytes: the list at 8.
func DecodeBytesResult(mem Memory, area []byte) ([]byte, *Error) {
	if err := resultErr(mem, area); err != nil {
		return nil, err
	}
	return bytes(mem, area, 8), nil
}

// DecodeBytesListResult reads a result<list<list<u8>>, error>, 32 bytes: the outer list
// at 8, whose elements are (pointer, length) pairs of 8 bytes; each list is the memory
// itself, not a copy.
func DecodeBytesListResult(mem Memory, area []byte) ([][]byte, *Error) {
	if err := resultErr(mem, area); err != nil {
		return nil, err
	}
	n := u32(area, 12)
	list := make([][]byte, n)
	if n == 0 {
		return list, nil
	}
	pairs := mem.Bytes(u32(area, 8), n*8)
	for i := range list {
		list[i] = bytes(mem, pairs, i*8)
	}
	return list, nil
}

// DecodeOptionBytesResult reads a result<option<list<u8>>, error>, 32 bytes: the
// option's case at 8 and the list at 12 (the option's payload is 4-aligned).
func DecodeOptionBytesResult(mem Memory, area []byte) ([]byte, bool, *Error) {
	if err := resultErr(mem, area); err != nil {
		return nil, false, err
	}
	switch area[8] {
	case 0:
		return nil, false, nil
	case 1:
		return bytes(mem, area, 12), true, nil
	default:
		badCase("option<list<u8>>", area[8])
		return nil, false, nil
	}
}

// DecodeOptionStringResult reads a result<option<string>, error>, 32 bytes: the
// option's case at 8 and the string at 12, a copy.
func DecodeOptionStringResult(mem Memory, area []byte) (string, bool, *Error) {
	if err := resultErr(mem, area); err != nil {
		return "", false, err
	}
	switch area[8] {
	case 0:
		return "", false, nil
	case 1:
		return text(mem, area, 12), true, nil
	default:
		badCase("option<string>", area[8])
		return "", false, nil
	}
}

// DecodeBoolResult reads a result<bool, error>, 32 bytes: the bool at 8, a byte that
// is true when it is not 0 (as the canonical ABI lifts a bool).
func DecodeBoolResult(mem Memory, area []byte) (bool, *Error) {
	if err := resultErr(mem, area); err != nil {
		return false, err
	}
	return area[8] != 0, nil
}

// DecodeStringResult reads a result<string, error>, 32 bytes: the string at 8, a copy.
func DecodeStringResult(mem Memory, area []byte) (string, *Error) {
	if err := resultErr(mem, area); err != nil {
		return "", err
	}
	return text(mem, area, 8), nil
}

// DecodeString reads a returned string: (pointer, length) at 0.
func DecodeString(mem Memory, area []byte) string {
	return text(mem, area, 0)
}

// DecodeOptionString reads a returned option<string>, 12 bytes: the case at 0 and the
// string at 4, a copy.
func DecodeOptionString(mem Memory, area []byte) (string, bool) {
	switch area[0] {
	case 0:
		return "", false
	case 1:
		return text(mem, area, 4), true
	default:
		badCase("option<string>", area[0])
		return "", false
	}
}

// EncodeHandleResult writes the export's result<list<u8>, string> into its area, 12
// bytes: the case at 0 (0 ok, 1 error) and the (pointer, length) of the output or the
// message at 4.
func EncodeHandleResult(area []byte, failed bool, ptr, n uint32) {
	clear(area[:handleAreaBytes])
	if failed {
		area[0] = 1
	}
	putU32(area, 4, ptr)
	putU32(area, 8, n)
}
