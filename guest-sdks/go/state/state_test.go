package state

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"tally.dev/tally"
)

// check parses value as the value of key "alice" in table "accounts"; want is the
// number, or with message set the text of the invalid-argument error.
func check(t *testing.T, value []byte, want int64, message string) {
	t.Helper()
	n, err := parseInt64("accounts", []byte("alice"), value)
	if message == "" {
		if err != nil || n != want {
			t.Errorf("value %q: %d, %v; want %d", value, n, err, want)
		}
		return
	}
	var e *tally.Error
	if !errors.As(err, &e) || e.Kind != tally.InvalidArgument || e.Message != message {
		t.Errorf("value %q: %d, %#v; want invalid argument %q", value, n, err, message)
	}
	if !errors.Is(err, tally.ErrInvalidArgument) {
		t.Errorf("value %q: %v is not ErrInvalidArgument", value, err)
	}
	if err.Error() != "invalid argument: "+message {
		t.Errorf("value %q: text %q", value, err.Error())
	}
}

func TestParseInt64ReadsWhatPutInt64Writes(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, math.MinInt64, math.MaxInt64} {
		check(t, strconv.AppendInt(nil, n, 10), n, "")
	}
	// Like Rust's i64::from_str, a leading + is accepted.
	check(t, []byte("+7"), 7, "")
	check(t, []byte("-0"), 0, "")
}

func TestParseInt64RefusesAnythingElse(t *testing.T) {
	notInt64 := func(shown string) string {
		return `the value of key "alice" in table "accounts" is not a decimal i64: "` + shown + `"`
	}
	check(t, []byte(""), 0, notInt64(""))
	check(t, []byte(" 1"), 0, notInt64(" 1"))
	check(t, []byte("1\n"), 0, notInt64(`1\n`))
	check(t, []byte("1.5"), 0, notInt64("1.5"))
	check(t, []byte("1_000"), 0, notInt64("1_000"))
	check(t, []byte("0x10"), 0, notInt64("0x10"))
	check(t, []byte("+"), 0, notInt64("+"))
	check(t, []byte("-"), 0, notInt64("-"))
	check(t, []byte("9223372036854775808"), 0, notInt64("9223372036854775808"))
	check(t, []byte("-9223372036854775809"), 0, notInt64("-9223372036854775809"))
	check(t, []byte("\xff"), 0, notInt64(`\xff`))
	check(t, []byte("\t\r\\'\"\x00\x7f"), 0, notInt64(`\t\r\\\'\"\x00\x7f`))
	check(t, []byte(strings.Repeat("x", 33)), 0, notInt64(strings.Repeat("x", 32)+"..."))
	check(t, []byte(strings.Repeat("x", 32)), 0, notInt64(strings.Repeat("x", 32)))
}

func TestErrorNamesTheKeyAndTableLikeRust(t *testing.T) {
	_, err := parseInt64("t-1_x", []byte("k\"\n\x01é"), []byte("v"))
	want := `invalid argument: the value of key "k\"\n\x01\xc3\xa9" in table "t-1_x" is not a decimal i64: "v"`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if got := quote("a\"\\\x00\t\x7f"); got != `"a\"\\\0\t\u{7f}"` {
		t.Errorf("quote = %s", got)
	}
}
