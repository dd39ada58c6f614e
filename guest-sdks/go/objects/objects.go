// Package objects is durable JSON objects with transactions across them (BokiStore,
// Boki §5.2): WIT interface tally:platform/objects.
//
// An object of the invocation's book is named by a string (1 to 256 bytes) and holds
// one JSON value, null until it is first written. A path is a JSON pointer (RFC 6901):
// "" is the whole object, "/a/0/b~1c" is field "b/c" of element 0 of field "a". Writes
// make missing parent objects. Every call is exactly-once across re-executions of the
// invocation, as in package state: a read returns what it returned the first time, a
// write takes effect once; so a function makes the same calls in the same order when
// the platform runs it again.
//
// Outside a transaction, a read sees the object as of the invocation's last logged
// step (its own writes included), and each write is logged on its own. Between [Begin]
// and [Commit], reads see one snapshot of every object of the book, taken at Begin,
// with the transaction's own writes, and writes are buffered: Commit logs them in one
// record and says whether they took effect. Transactions are serializable: one commits
// exactly when no object it read was written by someone else between its Begin and its
// Commit; otherwise Commit returns false and nothing of it takes effect. [Transaction]
// runs a function in a transaction and runs it again while it conflicts.
//
// Objects written but not read never conflict: [Increment] and [Push] apply to
// whatever the field holds when the record is applied. An operation that does not fit
// the object as the caller sees it (incrementing a string) fails with
// [tally.ErrInvalidArgument]; one that stops fitting because of a concurrent write
// does nothing.
//
// Values cross as JSON text ([Get], [Set], [Push]) or as Go values encoded with
// encoding/json ([GetValue], [SetValue], [PushValue]):
//
//	// Moves amount from one account to another, whatever runs concurrently.
//	committed, err := objects.Transaction(10, func() error {
//		from, _, err := objects.GetValue[int64]("accounts", "/"+payer)
//		if err != nil {
//			return err
//		}
//		if from < amount {
//			return errInsufficientFunds
//		}
//		if err := objects.Increment("accounts", "/"+payer, -amount); err != nil {
//			return err
//		}
//		return objects.Increment("accounts", "/"+payee, amount)
//	})
package objects

import (
	"encoding/json"
	"errors"
	"strconv"

	"tally.dev/tally"
	"tally.dev/tally/internal/hostcall"
	"tally.dev/tally/internal/wit"
)

// The platform's imports: variables, so that the tests put a fake platform in their
// place.
var (
	witGet       = wit.ObjectsGet
	witSet       = wit.ObjectsSet
	witIncrement = wit.ObjectsIncrement
	witPush      = wit.ObjectsPush
	witRemove    = wit.ObjectsRemove
	witBegin     = wit.ObjectsBegin
	witCommit    = wit.ObjectsCommit
	witAbort     = wit.ObjectsAbort
)

// Get returns the JSON text at path of object, and false if nothing is there.
func Get(object, path string) (string, bool, error) {
	json, ok, err := witGet(object, path)
	return json, ok, hostcall.Err(err)
}

// Set sets the value at path of object to json, a JSON text: "{}" and "[]" make an
// empty object or array. Text that is not JSON is refused with
// [tally.ErrInvalidArgument].
func Set(object, path, json string) error {
	return hostcall.Err(witSet(object, path, json))
}

// Increment adds by to the number at path of object, 0 when missing; integers
// saturate.
func Increment(object, path string, by int64) error {
	return hostcall.Err(witIncrement(object, path, by))
}

// Push appends json, a JSON text, to the array at path of object, an empty one when
// missing.
func Push(object, path, json string) error {
	return hostcall.Err(witPush(object, path, json))
}

// Remove removes the field or array element at path of object; the path "" empties
// the object.
func Remove(object, path string) error {
	return hostcall.Err(witRemove(object, path))
}

// MakeObject sets the value at path of object to an empty JSON object, {}.
func MakeObject(object, path string) error {
	return Set(object, path, "{}")
}

// MakeArray sets the value at path of object to an empty JSON array, [].
func MakeArray(object, path string) error {
	return Set(object, path, "[]")
}

// GetValue returns the value at path of object decoded into a T by encoding/json, and
// false (with T's zero value) if nothing is there. A value that does not decode into a
// T fails with [tally.ErrInvalidArgument].
//
//	balance, ok, err := objects.GetValue[int64]("accounts", "/alice")
func GetValue[T any](object, path string) (T, bool, error) {
	var value T
	text, ok, err := Get(object, path)
	if err != nil || !ok {
		return value, false, err
	}
	if err := json.Unmarshal([]byte(text), &value); err != nil {
		return value, false, &tally.Error{
			Kind: tally.InvalidArgument,
			Message: "the value at " + strconv.Quote(path) + " of object " + strconv.Quote(object) +
				" does not decode: " + err.Error(),
		}
	}
	return value, true, nil
}

// SetValue sets the value at path of object to value encoded by encoding/json. A value
// encoding/json cannot encode (a channel, a function, a cycle) fails with
// [tally.ErrInvalidArgument], without a call to the platform.
func SetValue(object, path string, value any) error {
	text, err := encode(value)
	if err != nil {
		return err
	}
	return Set(object, path, text)
}

// PushValue appends value encoded by encoding/json to the array at path of object, as
// [Push] does, and fails as [SetValue] does.
func PushValue(object, path string, value any) error {
	text, err := encode(value)
	if err != nil {
		return err
	}
	return Push(object, path, text)
}

func encode(value any) (string, error) {
	text, err := json.Marshal(value)
	if err != nil {
		return "", &tally.Error{Kind: tally.InvalidArgument, Message: "the value is not JSON: " + err.Error()}
	}
	return string(text), nil
}

// Begin begins a read-write transaction: until [Commit] or [Abort], reads see the
// snapshot of every object taken now, with the transaction's own writes, and writes
// are buffered. An invocation runs one transaction at a time: Begin in a transaction
// fails with [tally.ErrInvalidArgument].
func Begin() error {
	return hostcall.Err(witBegin(false))
}

// BeginReadOnly begins a read-only transaction: reads see one snapshot, writes are
// refused with [tally.ErrInvalidArgument], and [Commit] always returns true.
func BeginReadOnly() error {
	return hostcall.Err(witBegin(true))
}

// Commit ends the transaction: true if it committed, false if it conflicted (an object
// it read was written by someone else since [Begin]) and nothing of it took effect.
// Either way the transaction is over. Without one, Commit fails with
// [tally.ErrInvalidArgument].
func Commit() (bool, error) {
	committed, err := witCommit()
	return committed, hostcall.Err(err)
}

// Abort drops the transaction: none of its writes take effect. Without one, Abort
// fails with [tally.ErrInvalidArgument].
func Abort() error {
	return hostcall.Err(witAbort())
}

// Transaction runs body in a read-write transaction and commits it; while the commit
// conflicts, it runs body again in a new transaction, at most retries more times.
// It returns whether a run committed: false, with a nil error, when the last of the
// 1+retries runs conflicted too.
//
// When body returns an error, Transaction aborts the transaction and returns the
// error without running body again; so does a failed [Begin] or [Commit]. A panic in
// body aborts the transaction too, then goes on. Body must not begin, commit or abort
// itself; since a run's writes take effect only if it commits, body should change
// nothing outside the objects that a later run would not undo (a retry runs it again
// from the start, and each run is exactly-once on its own). A negative retries is
// refused with [tally.ErrInvalidArgument], without a call to the platform.
func Transaction(retries int, body func() error) (bool, error) {
	if retries < 0 {
		return false, &tally.Error{
			Kind:    tally.InvalidArgument,
			Message: "the retries of a transaction are negative: " + strconv.Itoa(retries),
		}
	}
	for range retries + 1 {
		committed, err := run(false, body)
		if err != nil || committed {
			return committed, err
		}
	}
	return false, nil
}

// ReadOnlyTransaction runs body in a read-only transaction, which always commits: its
// reads see one snapshot of every object. An error from body, or a panic, aborts the
// transaction, as in [Transaction].
func ReadOnlyTransaction(body func() error) error {
	committed, err := run(true, body)
	if err == nil && !committed {
		// The platform promises that a read-only transaction commits.
		panic("tally: the platform reported a conflict for a read-only transaction")
	}
	return err
}

// run runs body in one transaction and commits it, or aborts it on an error or a panic
// from body.
func run(readOnly bool, body func() error) (committed bool, err error) {
	if err := hostcall.Err(witBegin(readOnly)); err != nil {
		return false, err
	}
	ended := false
	defer func() {
		if !ended {
			// body panicked: the transaction must not outlive it, in case the panic
			// is recovered. The panic goes on, so the abort's own error has nowhere
			// to go.
			_ = witAbort()
		}
	}()
	bodyErr := body()
	ended = true
	if bodyErr != nil {
		if abortErr := Abort(); abortErr != nil {
			return false, errors.Join(bodyErr, abortErr)
		}
		return false, bodyErr
	}
	return Commit()
}
