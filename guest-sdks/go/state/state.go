// Package state is durable key-value state with exactly-once semantics (Halfmoon,
// SOSP '23): WIT interface tally:platform/state.
//
// Values live under byte-string keys in named tables of the invocation's book. Every
// operation is exactly-once across re-executions of the invocation: when the platform
// runs a function again after a crash, with the same invocation.ID, each [Get] returns
// what it returned the first time and each [Put] and [Delete] takes effect once.
// Operations are told apart by their order within the invocation, so a function should
// make the same calls in the same order when it runs again: decide from the input and
// from what the platform returns, not from clocks or randomness.
//
// Each table has a protocol, chosen at deploy or in the node's configuration:
// read-optimized (log-free reads), write-optimized (log-free writes), symmetric (logs
// both), unsafe (no logging, no guarantee) or auto. The protocol changes the cost of
// each operation, not the code that calls it.
//
// Operations are not transactions: two invocations that read and then write the same
// key concurrently may lose an update.
//
// Table names are 1 to 64 of a-z 0-9 - _; keys are 1 to 1024 bytes; values are at
// most 512 KiB. Anything else is refused with [tally.ErrInvalidArgument] or
// [tally.ErrTooLarge]. Keys and values are a string or a []byte ([Bytes]), whichever
// the caller has.
//
//	// Adds 1 to the visits of a page, once per invocation however often it runs.
//	visits, _, err := state.GetInt64("pages", "index.html")
//	if err != nil {
//		return nil, err
//	}
//	if err := state.PutInt64("pages", "index.html", visits+1); err != nil {
//		return nil, err
//	}
package state

import (
	"strconv"

	"tally.dev/tally"
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// Bytes is a key or a value: a string or a byte slice.
type Bytes interface {
	~string | ~[]byte
}

// Get returns the value of key in table, and false if the key is absent.
func Get[K Bytes](table string, key K) ([]byte, bool, error) {
	value, ok, err := wit.StateGet(table, []byte(key))
	return value, ok, hostcall.Err(err)
}

// Put sets the value of key in table to value.
func Put[K, V Bytes](table string, key K, value V) error {
	return hostcall.Err(wit.StatePut(table, []byte(key), []byte(value)))
}

// Delete removes key from table; nothing happens if it is absent.
func Delete[K Bytes](table string, key K) error {
	return hostcall.Err(wit.StateDelete(table, []byte(key)))
}

// GetInt64 returns the value of key in table read as an integer in decimal text, as
// [PutInt64] writes it, and false if the key is absent (with 0).
//
// A value that is not a decimal int64 fails with [tally.ErrInvalidArgument].
func GetInt64[K Bytes](table string, key K) (int64, bool, error) {
	value, ok, err := Get(table, key)
	if err != nil || !ok {
		return 0, false, err
	}
	n, err := parseInt64(table, []byte(key), value)
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// PutInt64 sets the value of key in table to value in decimal text, which [GetInt64]
// reads back and the other SDKs' integer helpers too.
func PutInt64[K Bytes](table string, key K, value int64) error {
	return Put(table, key, strconv.AppendInt(nil, value, 10))
}

// parseInt64 reads a value written by PutInt64; table and key only name it in the
// error, whose text is the same in every Tally SDK.
func parseInt64(table string, key, value []byte) (int64, error) {
	// strconv accepts exactly the decimal int64s (an optional sign, digits, nothing
	// else), and UTF-8 does not matter since anything else is refused.
	n, err := strconv.ParseInt(string(value), 10, 64)
	if err == nil {
		return n, nil
	}
	return 0, &tally.Error{
		Kind: tally.InvalidArgument,
		Message: "the value of key \"" + escapeASCII(key) + "\" in table " + quote(table) +
			" is not a decimal i64: \"" + preview(value) + "\"",
	}
}

// preview returns the start of a value, escaped, for an error message: a value may be
// up to 512 KiB.
func preview(value []byte) string {
	const previewBytesMax = 32
	if len(value) > previewBytesMax {
		return escapeASCII(value[:previewBytesMax]) + "..."
	}
	return escapeASCII(value)
}

// escapeASCII escapes bytes as Rust's escape_ascii does, so that messages agree with
// the Rust SDK: \t \r \n \\ \' \" by name, other bytes outside printable ASCII as
// \xNN.
func escapeASCII(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, len(b))
	for _, c := range b {
		switch c {
		case '\t':
			out = append(out, `\t`...)
		case '\r':
			out = append(out, `\r`...)
		case '\n':
			out = append(out, `\n`...)
		case '\\', '\'', '"':
			out = append(out, '\\', c)
		default:
			if c >= 0x20 && c < 0x7f {
				out = append(out, c)
			} else {
				out = append(out, '\\', 'x', hex[c>>4], hex[c&15])
			}
		}
	}
	return string(out)
}

// quote quotes a table name as Rust's Debug does. A table the host accepted is only
// a-z 0-9 - _; other ASCII is escaped like Rust, and other characters are kept.
func quote(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0:
			out = append(out, `\0`...)
		case '\t':
			out = append(out, `\t`...)
		case '\r':
			out = append(out, `\r`...)
		case '\n':
			out = append(out, `\n`...)
		case '\\', '"':
			out = append(out, '\\', c)
		default:
			if c < 0x20 || c == 0x7f {
				out = append(out, `\u{`...)
				out = strconv.AppendUint(out, uint64(c), 16)
				out = append(out, '}')
			} else {
				out = append(out, c)
			}
		}
	}
	return string(append(out, '"'))
}
