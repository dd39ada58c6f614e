package objects

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"tally.dev/tally"
	"tally.dev/tally/internal/wit"
)

// fake is a platform that records the calls made to it, in the order made, and
// answers from its fields.
type fake struct {
	calls []string
	// get is what objects.get returns: the JSON text, or none when absent.
	get *string
	// commits are what the successive commits return.
	commits []bool
	// fail, when set, fails every call whose name it returns true for.
	fail func(call string) *wit.Error
}

// install puts f in place of the platform for the test.
func (f *fake) install(t *testing.T) {
	t.Helper()
	saved := []any{witGet, witSet, witIncrement, witPush, witRemove, witBegin, witCommit, witAbort}
	t.Cleanup(func() {
		witGet = saved[0].(func(string, string) (string, bool, *wit.Error))
		witSet = saved[1].(func(string, string, string) *wit.Error)
		witIncrement = saved[2].(func(string, string, int64) *wit.Error)
		witPush = saved[3].(func(string, string, string) *wit.Error)
		witRemove = saved[4].(func(string, string) *wit.Error)
		witBegin = saved[5].(func(bool) *wit.Error)
		witCommit = saved[6].(func() (bool, *wit.Error))
		witAbort = saved[7].(func() *wit.Error)
	})
	witGet = func(object, path string) (string, bool, *wit.Error) {
		if err := f.call("get " + object + " " + path); err != nil {
			return "", false, err
		}
		if f.get == nil {
			return "", false, nil
		}
		return *f.get, true, nil
	}
	witSet = func(object, path, json string) *wit.Error {
		return f.call("set " + object + " " + path + " " + json)
	}
	witIncrement = func(object, path string, by int64) *wit.Error {
		return f.call("increment " + object + " " + path + " " + itoa(by))
	}
	witPush = func(object, path, json string) *wit.Error {
		return f.call("push " + object + " " + path + " " + json)
	}
	witRemove = func(object, path string) *wit.Error {
		return f.call("remove " + object + " " + path)
	}
	witBegin = func(readOnly bool) *wit.Error {
		if readOnly {
			return f.call("begin read-only")
		}
		return f.call("begin")
	}
	witCommit = func() (bool, *wit.Error) {
		if err := f.call("commit"); err != nil {
			return false, err
		}
		if len(f.commits) == 0 {
			panic("fake: an unexpected commit")
		}
		committed := f.commits[0]
		f.commits = f.commits[1:]
		return committed, nil
	}
	witAbort = func() *wit.Error {
		return f.call("abort")
	}
}

func (f *fake) call(call string) *wit.Error {
	f.calls = append(f.calls, call)
	if f.fail != nil {
		return f.fail(call)
	}
	return nil
}

func (f *fake) expect(t *testing.T, calls ...string) {
	t.Helper()
	if !reflect.DeepEqual(f.calls, calls) {
		t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(f.calls, "\n  "), strings.Join(calls, "\n  "))
	}
	f.calls = nil
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

func text(s string) *string { return &s }

func TestCallsPassTheirArguments(t *testing.T) {
	f := &fake{get: text(`{"b/c":[1]}`), commits: []bool{true}}
	f.install(t)
	json, ok, err := Get("orders", "/a/0")
	if err != nil || !ok || json != `{"b/c":[1]}` {
		t.Errorf("Get = %q, %v, %v", json, ok, err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%v", err)
		}
	}
	check(Set("orders", "", `{"n":1}`))
	check(Increment("orders", "/n", math.MinInt64))
	check(Push("orders", "/list", `"x"`))
	check(Remove("orders", "/a/0/b~1c"))
	check(MakeObject("orders", "/m"))
	check(MakeArray("orders", "/l"))
	check(Begin())
	check(BeginReadOnly())
	if committed, err := Commit(); err != nil || !committed {
		t.Errorf("Commit = %v, %v", committed, err)
	}
	check(Abort())
	f.expect(t,
		"get orders /a/0",
		`set orders  {"n":1}`,
		"increment orders /n -9223372036854775808",
		`push orders /list "x"`,
		"remove orders /a/0/b~1c",
		"set orders /m {}",
		"set orders /l []",
		"begin",
		"begin read-only",
		"commit",
		"abort",
	)
}

func TestGetOfNothingIsFalse(t *testing.T) {
	f := &fake{}
	f.install(t)
	json, ok, err := Get("o", "/missing")
	if err != nil || ok || json != "" {
		t.Errorf("Get = %q, %v, %v", json, ok, err)
	}
	n, ok, err := GetValue[int64]("o", "/missing")
	if err != nil || ok || n != 0 {
		t.Errorf("GetValue = %d, %v, %v", n, ok, err)
	}
}

func TestCommitSaysWhetherItCommitted(t *testing.T) {
	f := &fake{commits: []bool{false, true}}
	f.install(t)
	for _, want := range []bool{false, true} {
		if committed, err := Commit(); err != nil || committed != want {
			t.Errorf("Commit = %v, %v; want %v", committed, err, want)
		}
	}
}

func TestValuesCrossAsJSON(t *testing.T) {
	type account struct {
		Owner   string   `json:"owner"`
		Balance int64    `json:"balance"`
		Tags    []string `json:"tags,omitempty"`
	}
	f := &fake{get: text(`{"owner":"alice","balance":9007199254740993}`)}
	f.install(t)
	got, ok, err := GetValue[account]("accounts", "/alice")
	// An int64 past 2^53 keeps every digit.
	if want := (account{Owner: "alice", Balance: 9007199254740993}); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("GetValue = %#v, %v, %v", got, ok, err)
	}
	if err := SetValue("accounts", "/bob", account{Owner: "bob", Tags: []string{"new"}}); err != nil {
		t.Error(err)
	}
	if err := PushValue("log", "", map[string]int{"b": 2, "a": 1}); err != nil {
		t.Error(err)
	}
	if err := SetValue("log", "/n", nil); err != nil {
		t.Error(err)
	}
	f.expect(t,
		"get accounts /alice",
		`set accounts /bob {"owner":"bob","balance":0,"tags":["new"]}`,
		`push log  {"a":1,"b":2}`,
		"set log /n null",
	)
}

func TestAValueThatDoesNotDecodeIsInvalid(t *testing.T) {
	f := &fake{get: text(`"ten"`)}
	f.install(t)
	n, ok, err := GetValue[int64]("accounts", "/alice")
	var e *tally.Error
	if !errors.As(err, &e) || e.Kind != tally.InvalidArgument || ok || n != 0 {
		t.Fatalf("GetValue = %d, %v, %#v; want an invalid-argument error", n, ok, err)
	}
	want := `invalid argument: the value at "/alice" of object "accounts" does not decode: json: cannot unmarshal string into Go value of type int64`
	if err.Error() != want {
		t.Errorf("text %q\nwant %q", err.Error(), want)
	}
}

func TestAValueThatDoesNotEncodeIsRefusedBeforeTheCall(t *testing.T) {
	f := &fake{}
	f.install(t)
	for name, call := range map[string]func() error{
		"SetValue":  func() error { return SetValue("o", "", make(chan int)) },
		"PushValue": func() error { return PushValue("o", "", math.NaN()) },
	} {
		if err := call(); !errors.Is(err, tally.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "invalid argument: the value is not JSON: json: unsupported") {
			t.Errorf("%s: %v; want an invalid-argument error", name, err)
		}
	}
	f.expect(t)
}

func TestErrorsMapToTallyErrors(t *testing.T) {
	f := &fake{fail: func(string) *wit.Error { return &wit.Error{Case: 0, Message: "incrementing a string"} }}
	f.install(t)
	err := Increment("o", "/name", 1)
	var e *tally.Error
	if !errors.As(err, &e) || e.Kind != tally.InvalidArgument || e.Message != "incrementing a string" {
		t.Errorf("Increment: %#v", err)
	}
	f.fail = func(string) *wit.Error { return &wit.Error{Case: 3, Message: "log down"} }
	if _, _, err := Get("o", ""); !errors.Is(err, tally.ErrUnavailable) {
		t.Errorf("Get: %v", err)
	}
	if _, err := Commit(); !errors.Is(err, tally.ErrUnavailable) {
		t.Errorf("Commit: %v", err)
	}
	f.fail = func(string) *wit.Error { return &wit.Error{Case: 4, Message: "a transaction's writes"} }
	if _, _, err := GetValue[int]("o", ""); !errors.Is(err, tally.ErrTooLarge) {
		t.Errorf("GetValue: %v", err)
	}
}

func TestTransactionRetriesWhileItConflicts(t *testing.T) {
	f := &fake{commits: []bool{false, true}}
	f.install(t)
	runs := 0
	committed, err := Transaction(3, func() error {
		runs++
		return Increment("counters", "/n", 1)
	})
	if err != nil || !committed || runs != 2 {
		t.Errorf("Transaction = %v, %v after %d runs; want committed after 2", committed, err, runs)
	}
	f.expect(t,
		"begin", "increment counters /n 1", "commit",
		"begin", "increment counters /n 1", "commit",
	)
}

func TestTransactionGivesUpAfterItsRetries(t *testing.T) {
	f := &fake{commits: []bool{false, false, false, true}}
	f.install(t)
	runs := 0
	committed, err := Transaction(2, func() error { runs++; return nil })
	if err != nil || committed || runs != 3 {
		t.Errorf("Transaction = %v, %v after %d runs; want a conflict after 3", committed, err, runs)
	}
	f.expect(t, "begin", "commit", "begin", "commit", "begin", "commit")

	f.commits = []bool{false}
	committed, err = Transaction(0, func() error { return nil })
	if err != nil || committed {
		t.Errorf("Transaction(0) = %v, %v; want one conflicting run", committed, err)
	}
	f.expect(t, "begin", "commit")
}

func TestABodyErrorAbortsTheTransaction(t *testing.T) {
	f := &fake{}
	f.install(t)
	insufficient := errors.New("insufficient funds")
	committed, err := Transaction(5, func() error {
		if err := Increment("accounts", "/alice", -10); err != nil {
			return err
		}
		return insufficient
	})
	if err != insufficient || committed {
		t.Errorf("Transaction = %v, %v; want the body's error", committed, err)
	}
	f.expect(t, "begin", "increment accounts /alice -10", "abort")

	// A platform error in the body aborts too, and is returned as it is.
	f.fail = func(call string) *wit.Error {
		if strings.HasPrefix(call, "increment") {
			return &wit.Error{Case: 0, Message: "not a number"}
		}
		return nil
	}
	committed, err = Transaction(5, func() error { return Increment("accounts", "/name", 1) })
	if !errors.Is(err, tally.ErrInvalidArgument) || committed {
		t.Errorf("Transaction = %v, %v; want the increment's error", committed, err)
	}
	f.expect(t, "begin", "increment accounts /name 1", "abort")

	// A failed abort joins the body's error.
	f.fail = func(call string) *wit.Error {
		if call == "abort" {
			return &wit.Error{Case: 0, Message: "no transaction is in progress"}
		}
		return nil
	}
	_, err = Transaction(0, func() error { return insufficient })
	if !errors.Is(err, insufficient) || !errors.Is(err, tally.ErrInvalidArgument) {
		t.Errorf("Transaction = %v; want the body's error and the abort's", err)
	}
	f.expect(t, "begin", "abort")
}

func TestAPanicInTheBodyAbortsTheTransaction(t *testing.T) {
	f := &fake{}
	f.install(t)
	func() {
		defer func() {
			if value := recover(); value != "boom" {
				t.Errorf("recovered %v, want the body's panic", value)
			}
		}()
		Transaction(1, func() error { panic("boom") })
	}()
	f.expect(t, "begin", "abort")
}

func TestTransactionStopsAtAPlatformError(t *testing.T) {
	f := &fake{fail: func(call string) *wit.Error {
		if call == "begin" {
			return &wit.Error{Case: 0, Message: "a transaction is in progress already"}
		}
		return nil
	}}
	f.install(t)
	runs := 0
	committed, err := Transaction(3, func() error { runs++; return nil })
	if !errors.Is(err, tally.ErrInvalidArgument) || committed || runs != 0 {
		t.Errorf("failed begin: %v, %v after %d runs", committed, err, runs)
	}
	f.expect(t, "begin")

	// A failed commit ends the transaction (the platform drops it): no abort, no retry.
	f.fail = func(call string) *wit.Error {
		if call == "commit" {
			return &wit.Error{Case: 5, Message: "commit"}
		}
		return nil
	}
	committed, err = Transaction(3, func() error { runs++; return nil })
	if !errors.Is(err, tally.ErrTimeout) || committed || runs != 1 {
		t.Errorf("failed commit: %v, %v after %d runs", committed, err, runs)
	}
	f.expect(t, "begin", "commit")
}

func TestTransactionRefusesNegativeRetries(t *testing.T) {
	f := &fake{}
	f.install(t)
	committed, err := Transaction(-1, func() error { t.Error("the body ran"); return nil })
	if !errors.Is(err, tally.ErrInvalidArgument) || committed {
		t.Errorf("Transaction(-1) = %v, %v", committed, err)
	}
	if want := "invalid argument: the retries of a transaction are negative: -1"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
	f.expect(t)
}

func TestReadOnlyTransaction(t *testing.T) {
	f := &fake{get: text("3"), commits: []bool{true}}
	f.install(t)
	var n int
	err := ReadOnlyTransaction(func() error {
		var err error
		n, _, err = GetValue[int]("counters", "/n")
		return err
	})
	if err != nil || n != 3 {
		t.Errorf("ReadOnlyTransaction = %v, n = %d", err, n)
	}
	f.expect(t, "begin read-only", "get counters /n", "commit")

	failed := errors.New("failed")
	if err := ReadOnlyTransaction(func() error { return failed }); err != failed {
		t.Errorf("ReadOnlyTransaction = %v, want the body's error", err)
	}
	f.expect(t, "begin read-only", "abort")
}
