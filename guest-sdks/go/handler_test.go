package tally

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestHandleResultKeepsTheOutputOrTheMessage(t *testing.T) {
	out, msg, failed := handleResult([]byte("hi"), nil)
	if string(out) != "hi" || msg != "" || failed {
		t.Errorf("ok: %q %q %v", out, msg, failed)
	}
	cause := &Error{Kind: NotFound, Message: "function nosuch"}
	out, msg, failed = handleResult([]byte("ignored"), fmt.Errorf("calling: %w", cause))
	if out != nil || msg != "calling: not found: function nosuch" || !failed {
		t.Errorf("error: %q %q %v", out, msg, failed)
	}
	// A WIT string is UTF-8: the host would trap on anything else.
	_, msg, _ = handleResult(nil, errors.New("bad \xff byte"))
	if msg != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8: %q", msg)
	}
}

func TestPanicSiteNamesThePanickingCode(t *testing.T) {
	var site string
	func() {
		defer func() {
			_ = recover()
			site = panicSite()
		}()
		var m map[string]int
		m["x"] = 1 // the runtime panics inside mapassign: the site is this line
	}()
	if !strings.Contains(site, "handler_test.go:") || !strings.HasSuffix(site, "(tally.dev/tally.TestPanicSiteNamesThePanickingCode.func1)") {
		t.Errorf("site %q", site)
	}
}

func TestPanicTextIsTheValue(t *testing.T) {
	for _, c := range []struct {
		value any
		want  string
	}{
		{"boom", "boom"},
		{errors.New("an error"), "an error"},
		{SeqNum(7), "7"},
		{42, "42"},
		{true, "true"},
		{1.5, "1.5"},
		{struct{}{}, "a value of a type without a text"},
	} {
		if got := panicText(c.value); got != c.want {
			t.Errorf("panicText(%#v) = %q, want %q", c.value, got, c.want)
		}
	}
}
