//go:build !wasip1

package wit

// Outside a GOOS=wasip1 build there is no platform: these stand in for the imports so
// that code using the SDK compiles, and its pure parts test, on any platform.

const notWasm = "tally: the platform is only reachable from a Tally component (GOOS=wasip1 GOARCH=wasm)"

// LogAppend is tally:platform/log.append; it panics outside Wasm.
func LogAppend(tags []uint64, data []byte) (uint64, *Error) { panic(notWasm) }

// LogCondAppend is tally:platform/log.cond-append; it panics outside Wasm.
func LogCondAppend(tags []uint64, data []byte, condTag, condPos uint64) (uint64, *Error) {
	panic(notWasm)
}

// LogReadNext is tally:platform/log.read-next; it panics outside Wasm.
func LogReadNext(tag, min uint64) (*Record, *Error) { panic(notWasm) }

// LogReadPrev is tally:platform/log.read-prev; it panics outside Wasm.
func LogReadPrev(tag, max uint64) (*Record, *Error) { panic(notWasm) }

// LogCheckTail is tally:platform/log.check-tail; it panics outside Wasm.
func LogCheckTail(tag uint64) (*Record, *Error) { panic(notWasm) }

// LogTrim is tally:platform/log.trim; it panics outside Wasm.
func LogTrim(tag, seqnum uint64) *Error { panic(notWasm) }

// LogSetAuxData is tally:platform/log.set-aux-data; it panics outside Wasm.
func LogSetAuxData(seqnum uint64, data []byte) *Error { panic(notWasm) }

// InvokeCall is tally:platform/invoke.call; it panics outside Wasm.
func InvokeCall(function string, input []byte) ([]byte, *Error) { panic(notWasm) }

// StateGet is tally:platform/state.get; it panics outside Wasm.
func StateGet(table string, key []byte) ([]byte, bool, *Error) { panic(notWasm) }

// StatePut is tally:platform/state.put; it panics outside Wasm.
func StatePut(table string, key, value []byte) *Error { panic(notWasm) }

// StateDelete is tally:platform/state.delete; it panics outside Wasm.
func StateDelete(table string, key []byte) *Error { panic(notWasm) }

// ObjectsGet is tally:platform/objects.get; it panics outside Wasm.
func ObjectsGet(object, path string) (string, bool, *Error) { panic(notWasm) }

// ObjectsSet is tally:platform/objects.set; it panics outside Wasm.
func ObjectsSet(object, path, json string) *Error { panic(notWasm) }

// ObjectsIncrement is tally:platform/objects.increment; it panics outside Wasm.
func ObjectsIncrement(object, path string, by int64) *Error { panic(notWasm) }

// ObjectsPush is tally:platform/objects.push; it panics outside Wasm.
func ObjectsPush(object, path, json string) *Error { panic(notWasm) }

// ObjectsRemove is tally:platform/objects.remove; it panics outside Wasm.
func ObjectsRemove(object, path string) *Error { panic(notWasm) }

// ObjectsBegin is tally:platform/objects.begin; it panics outside Wasm.
func ObjectsBegin(readOnly bool) *Error { panic(notWasm) }

// ObjectsCommit is tally:platform/objects.commit; it panics outside Wasm.
func ObjectsCommit() (bool, *Error) { panic(notWasm) }

// ObjectsAbort is tally:platform/objects.abort; it panics outside Wasm.
func ObjectsAbort() *Error { panic(notWasm) }

// QueuesPush is tally:platform/queues.push; it panics outside Wasm.
func QueuesPush(queue string, message []byte) *Error { panic(notWasm) }

// QueuesPop is tally:platform/queues.pop; it panics outside Wasm.
func QueuesPop(queue string, timeoutMs uint64) ([]byte, bool, *Error) { panic(notWasm) }

// QueuesPopMany is tally:platform/queues.pop-many; it panics outside Wasm.
func QueuesPopMany(queue string, max uint32, timeoutMs uint64) ([][]byte, *Error) { panic(notWasm) }

// LocksAcquire is tally:platform/locks.acquire; it panics outside Wasm.
func LocksAcquire(lock string, timeoutMs uint64) (bool, *Error) { panic(notWasm) }

// LocksRelease is tally:platform/locks.release; it panics outside Wasm.
func LocksRelease(lock string) *Error { panic(notWasm) }

// InvocationID is tally:platform/context.invocation-id; it panics outside Wasm.
func InvocationID() string { panic(notWasm) }

// BookID is tally:platform/context.book-id; it panics outside Wasm.
func BookID() uint64 { panic(notWasm) }

// Attempt is tally:platform/context.attempt; it panics outside Wasm.
func Attempt() uint32 { panic(notWasm) }

// FunctionName is tally:platform/context.function-name; it panics outside Wasm.
func FunctionName() string { panic(notWasm) }

// Key is tally:platform/context.key; it panics outside Wasm.
func Key() (string, bool) { panic(notWasm) }

// Sleep is tally:platform/context.sleep; it panics outside Wasm.
func Sleep(ms uint64) *Error { panic(notWasm) }

// SleepUntil is tally:platform/context.sleep-until; it panics outside Wasm.
func SleepUntil(unixMs uint64) *Error { panic(notWasm) }

// PromiseCreate is tally:platform/context.promise-create; it panics outside Wasm.
func PromiseCreate() (string, *Error) { panic(notWasm) }

// PromiseAwait is tally:platform/context.promise-await; it panics outside Wasm.
func PromiseAwait(id string, hasTimeout bool, timeoutMs uint64) ([]byte, *Error) { panic(notWasm) }

// ConfigGet is wasi:config/store.get; it panics outside Wasm.
func ConfigGet(key string) (string, bool, *ConfigError) { panic(notWasm) }

// ConfigGetAll is wasi:config/store.get-all; it panics outside Wasm.
func ConfigGetAll() ([][2]string, *ConfigError) { panic(notWasm) }
