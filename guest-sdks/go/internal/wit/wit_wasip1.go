//go:build wasip1

package wit

import (
	"sync"
	"unsafe"
)

// The imports, flattened by the canonical ABI: a u64 is an i64, a list or string an
// (i32 pointer, i32 length) pair, and a result of more than one flat value is written
// by the host into the area at the last i32. Pointers are unsafe.Pointer, so that the
// garbage collector keeps what they point to alive during the call.

//go:wasmimport tally:platform/log append
func logAppend(tags unsafe.Pointer, tagsLen uint32, data unsafe.Pointer, dataLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/log cond-append
func logCondAppend(tags unsafe.Pointer, tagsLen uint32, data unsafe.Pointer, dataLen uint32, condTag uint64, condPos uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/log read-next
func logReadNext(tag uint64, min uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/log read-prev
func logReadPrev(tag uint64, max uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/log check-tail
func logCheckTail(tag uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/log trim
func logTrim(tag uint64, seqnum uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/log set-aux-data
func logSetAuxData(seqnum uint64, data unsafe.Pointer, dataLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/invoke call
func invokeCall(function unsafe.Pointer, functionLen uint32, input unsafe.Pointer, inputLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/state get
func stateGet(table unsafe.Pointer, tableLen uint32, key unsafe.Pointer, keyLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/state put
func statePut(table unsafe.Pointer, tableLen uint32, key unsafe.Pointer, keyLen uint32, value unsafe.Pointer, valueLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/state delete
func stateDelete(table unsafe.Pointer, tableLen uint32, key unsafe.Pointer, keyLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects get
func objectsGet(object unsafe.Pointer, objectLen uint32, path unsafe.Pointer, pathLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects set
func objectsSet(object unsafe.Pointer, objectLen uint32, path unsafe.Pointer, pathLen uint32, json unsafe.Pointer, jsonLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects increment
func objectsIncrement(object unsafe.Pointer, objectLen uint32, path unsafe.Pointer, pathLen uint32, by int64, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects push
func objectsPush(object unsafe.Pointer, objectLen uint32, path unsafe.Pointer, pathLen uint32, json unsafe.Pointer, jsonLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects remove
func objectsRemove(object unsafe.Pointer, objectLen uint32, path unsafe.Pointer, pathLen uint32, ret unsafe.Pointer)

// The bool is flattened to an i32, 0 or 1.
//
//go:wasmimport tally:platform/objects begin
func objectsBegin(readOnly uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/objects commit
func objectsCommit(ret unsafe.Pointer)

//go:wasmimport tally:platform/objects abort
func objectsAbort(ret unsafe.Pointer)

//go:wasmimport tally:platform/queues push
func queuesPush(queue unsafe.Pointer, queueLen uint32, message unsafe.Pointer, messageLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/queues pop
func queuesPop(queue unsafe.Pointer, queueLen uint32, timeoutMs uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/queues pop-many
func queuesPopMany(queue unsafe.Pointer, queueLen uint32, max uint32, timeoutMs uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/locks acquire
func locksAcquire(lock unsafe.Pointer, lockLen uint32, timeoutMs uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/locks release
func locksRelease(lock unsafe.Pointer, lockLen uint32, ret unsafe.Pointer)

//go:wasmimport tally:platform/context invocation-id
func contextInvocationID(ret unsafe.Pointer)

//go:wasmimport tally:platform/context book-id
func contextBookID() uint64

//go:wasmimport tally:platform/context attempt
func contextAttempt() uint32

//go:wasmimport tally:platform/context function-name
func contextFunctionName(ret unsafe.Pointer)

//go:wasmimport tally:platform/context key
func contextKey(ret unsafe.Pointer)

//go:wasmimport tally:platform/context sleep
func contextSleep(ms uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/context sleep-until
func contextSleepUntil(unixMs uint64, ret unsafe.Pointer)

//go:wasmimport tally:platform/context promise-create
func contextPromiseCreate(ret unsafe.Pointer)

// The option<u64> timeout is flattened to its case (0 none, 1 some) and the u64.
//
//go:wasmimport tally:platform/context promise-await
func contextPromiseAwait(id unsafe.Pointer, idLen uint32, timeoutCase uint32, timeoutMs uint64, ret unsafe.Pointer)

//go:wasmimport wasi:config/store@0.2.0-rc.1 get
func configGet(key unsafe.Pointer, keyLen uint32, ret unsafe.Pointer)

//go:wasmimport wasi:config/store@0.2.0-rc.1 get-all
func configGetAll(ret unsafe.Pointer)

// Pauses the monotonic clock of the WASI adapter, which then answers from a cached
// value instead of calling the host: see cabiRealloc.
//
//go:wasmimport wasi_snapshot_preview1 adapter_monotonic_clock_set_paused
func adapterMonotonicClockSetPaused(paused bool)

// procPin and procUnpin keep the runtime from starting a garbage collection or making
// this goroutine assist one; the runtime allows these two links (go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// linearMemory is the module's own memory.
type linearMemory struct{}

// Bytes returns the n bytes at address ptr, without a copy.
func (linearMemory) Bytes(ptr, n uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), n)
}

var (
	// mu serializes host calls: they share the return area and the list of pins.
	// Only one goroutine runs at a time in Wasm, but another may run between a call
	// and the decoding of its result.
	mu sync.Mutex
	// area is the return area of every import; a global, not a local, because the
	// goroutine's stack may move while the host calls cabi_realloc.
	area [areaBytes / 8]uint64
)

func areaSlice() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&area)), areaBytes)
}

// begin starts a host call; end, deferred, finishes it after its result is decoded.
func begin() {
	mu.Lock()
}

func end() {
	releasePins()
	mu.Unlock()
}

func ptr[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }
func sptr(s string) unsafe.Pointer    { return unsafe.Pointer(unsafe.StringData(s)) }
func size[T any](s []T) uint32        { return uint32(len(s)) }

// LogAppend is tally:platform/log.append.
func LogAppend(tags []uint64, data []byte) (uint64, *Error) {
	begin()
	defer end()
	logAppend(ptr(tags), size(tags), ptr(data), size(data), unsafe.Pointer(&area))
	return DecodeU64Result(linearMemory{}, areaSlice())
}

// LogCondAppend is tally:platform/log.cond-append.
func LogCondAppend(tags []uint64, data []byte, condTag, condPos uint64) (uint64, *Error) {
	begin()
	defer end()
	logCondAppend(ptr(tags), size(tags), ptr(data), size(data), condTag, condPos, unsafe.Pointer(&area))
	return DecodeU64Result(linearMemory{}, areaSlice())
}

// LogReadNext is tally:platform/log.read-next.
func LogReadNext(tag, min uint64) (*Record, *Error) {
	begin()
	defer end()
	logReadNext(tag, min, unsafe.Pointer(&area))
	return DecodeRecordResult(linearMemory{}, areaSlice())
}

// LogReadPrev is tally:platform/log.read-prev.
func LogReadPrev(tag, max uint64) (*Record, *Error) {
	begin()
	defer end()
	logReadPrev(tag, max, unsafe.Pointer(&area))
	return DecodeRecordResult(linearMemory{}, areaSlice())
}

// LogCheckTail is tally:platform/log.check-tail.
func LogCheckTail(tag uint64) (*Record, *Error) {
	begin()
	defer end()
	logCheckTail(tag, unsafe.Pointer(&area))
	return DecodeRecordResult(linearMemory{}, areaSlice())
}

// LogTrim is tally:platform/log.trim.
func LogTrim(tag, seqnum uint64) *Error {
	begin()
	defer end()
	logTrim(tag, seqnum, unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// LogSetAuxData is tally:platform/log.set-aux-data.
func LogSetAuxData(seqnum uint64, data []byte) *Error {
	begin()
	defer end()
	logSetAuxData(seqnum, ptr(data), size(data), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// InvokeCall is tally:platform/invoke.call.
func InvokeCall(function string, input []byte) ([]byte, *Error) {
	begin()
	defer end()
	invokeCall(sptr(function), uint32(len(function)), ptr(input), size(input), unsafe.Pointer(&area))
	return DecodeBytesResult(linearMemory{}, areaSlice())
}

// StateGet is tally:platform/state.get.
func StateGet(table string, key []byte) ([]byte, bool, *Error) {
	begin()
	defer end()
	stateGet(sptr(table), uint32(len(table)), ptr(key), size(key), unsafe.Pointer(&area))
	return DecodeOptionBytesResult(linearMemory{}, areaSlice())
}

// StatePut is tally:platform/state.put.
func StatePut(table string, key, value []byte) *Error {
	begin()
	defer end()
	statePut(sptr(table), uint32(len(table)), ptr(key), size(key), ptr(value), size(value), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// StateDelete is tally:platform/state.delete.
func StateDelete(table string, key []byte) *Error {
	begin()
	defer end()
	stateDelete(sptr(table), uint32(len(table)), ptr(key), size(key), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsGet is tally:platform/objects.get.
func ObjectsGet(object, path string) (string, bool, *Error) {
	begin()
	defer end()
	objectsGet(sptr(object), uint32(len(object)), sptr(path), uint32(len(path)), unsafe.Pointer(&area))
	return DecodeOptionStringResult(linearMemory{}, areaSlice())
}

// ObjectsSet is tally:platform/objects.set.
func ObjectsSet(object, path, json string) *Error {
	begin()
	defer end()
	objectsSet(sptr(object), uint32(len(object)), sptr(path), uint32(len(path)), sptr(json), uint32(len(json)), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsIncrement is tally:platform/objects.increment.
func ObjectsIncrement(object, path string, by int64) *Error {
	begin()
	defer end()
	objectsIncrement(sptr(object), uint32(len(object)), sptr(path), uint32(len(path)), by, unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsPush is tally:platform/objects.push.
func ObjectsPush(object, path, json string) *Error {
	begin()
	defer end()
	objectsPush(sptr(object), uint32(len(object)), sptr(path), uint32(len(path)), sptr(json), uint32(len(json)), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsRemove is tally:platform/objects.remove.
func ObjectsRemove(object, path string) *Error {
	begin()
	defer end()
	objectsRemove(sptr(object), uint32(len(object)), sptr(path), uint32(len(path)), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsBegin is tally:platform/objects.begin.
func ObjectsBegin(readOnly bool) *Error {
	begin()
	defer end()
	var flag uint32
	if readOnly {
		flag = 1
	}
	objectsBegin(flag, unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// ObjectsCommit is tally:platform/objects.commit.
func ObjectsCommit() (bool, *Error) {
	begin()
	defer end()
	objectsCommit(unsafe.Pointer(&area))
	return DecodeBoolResult(linearMemory{}, areaSlice())
}

// ObjectsAbort is tally:platform/objects.abort.
func ObjectsAbort() *Error {
	begin()
	defer end()
	objectsAbort(unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// QueuesPush is tally:platform/queues.push.
func QueuesPush(queue string, message []byte) *Error {
	begin()
	defer end()
	queuesPush(sptr(queue), uint32(len(queue)), ptr(message), size(message), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// QueuesPop is tally:platform/queues.pop.
func QueuesPop(queue string, timeoutMs uint64) ([]byte, bool, *Error) {
	begin()
	defer end()
	queuesPop(sptr(queue), uint32(len(queue)), timeoutMs, unsafe.Pointer(&area))
	return DecodeOptionBytesResult(linearMemory{}, areaSlice())
}

// QueuesPopMany is tally:platform/queues.pop-many.
func QueuesPopMany(queue string, max uint32, timeoutMs uint64) ([][]byte, *Error) {
	begin()
	defer end()
	queuesPopMany(sptr(queue), uint32(len(queue)), max, timeoutMs, unsafe.Pointer(&area))
	return DecodeBytesListResult(linearMemory{}, areaSlice())
}

// LocksAcquire is tally:platform/locks.acquire.
func LocksAcquire(lock string, timeoutMs uint64) (bool, *Error) {
	begin()
	defer end()
	locksAcquire(sptr(lock), uint32(len(lock)), timeoutMs, unsafe.Pointer(&area))
	return DecodeBoolResult(linearMemory{}, areaSlice())
}

// LocksRelease is tally:platform/locks.release.
func LocksRelease(lock string) *Error {
	begin()
	defer end()
	locksRelease(sptr(lock), uint32(len(lock)), unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// InvocationID is tally:platform/context.invocation-id.
func InvocationID() string {
	begin()
	defer end()
	contextInvocationID(unsafe.Pointer(&area))
	return DecodeString(linearMemory{}, areaSlice())
}

// BookID is tally:platform/context.book-id.
func BookID() uint64 {
	return contextBookID()
}

// Attempt is tally:platform/context.attempt.
func Attempt() uint32 {
	return contextAttempt()
}

// FunctionName is tally:platform/context.function-name.
func FunctionName() string {
	begin()
	defer end()
	contextFunctionName(unsafe.Pointer(&area))
	return DecodeString(linearMemory{}, areaSlice())
}

// Key is tally:platform/context.key.
func Key() (string, bool) {
	begin()
	defer end()
	contextKey(unsafe.Pointer(&area))
	return DecodeOptionString(linearMemory{}, areaSlice())
}

// Sleep is tally:platform/context.sleep. A long sleep does not return: the host ends
// the attempt and runs the invocation again at the wake time.
func Sleep(ms uint64) *Error {
	begin()
	defer end()
	contextSleep(ms, unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// SleepUntil is tally:platform/context.sleep-until, as Sleep.
func SleepUntil(unixMs uint64) *Error {
	begin()
	defer end()
	contextSleepUntil(unixMs, unsafe.Pointer(&area))
	return DecodeUnitResult(linearMemory{}, areaSlice())
}

// PromiseCreate is tally:platform/context.promise-create.
func PromiseCreate() (string, *Error) {
	begin()
	defer end()
	contextPromiseCreate(unsafe.Pointer(&area))
	return DecodeStringResult(linearMemory{}, areaSlice())
}

// PromiseAwait is tally:platform/context.promise-await, with the timeout when
// hasTimeout. A long wait does not return: the host ends the attempt and runs the
// invocation again at the completion or the timeout.
func PromiseAwait(id string, hasTimeout bool, timeoutMs uint64) ([]byte, *Error) {
	begin()
	defer end()
	var timeoutCase uint32
	if hasTimeout {
		timeoutCase = 1
	} else {
		timeoutMs = 0
	}
	contextPromiseAwait(sptr(id), uint32(len(id)), timeoutCase, timeoutMs, unsafe.Pointer(&area))
	return DecodeBytesResult(linearMemory{}, areaSlice())
}

// ConfigGet is wasi:config/store.get.
func ConfigGet(key string) (string, bool, *ConfigError) {
	begin()
	defer end()
	configGet(sptr(key), uint32(len(key)), unsafe.Pointer(&area))
	return DecodeConfigGet(linearMemory{}, areaSlice())
}

// ConfigGetAll is wasi:config/store.get-all.
func ConfigGetAll() ([][2]string, *ConfigError) {
	begin()
	defer end()
	configGetAll(unsafe.Pointer(&area))
	return DecodeConfigGetAll(linearMemory{}, areaSlice())
}

// Call lets internal/wasihttp make its host calls as this file does: it takes the
// lock, hands the shared return area (as the pointer to pass and as bytes to decode)
// and the memory to make, and the returned function, deferred, releases the host's
// allocations and the lock once the result is decoded.
func Call() (ret unsafe.Pointer, result []byte, mem Memory, done func()) {
	begin()
	return unsafe.Pointer(&area), areaSlice(), linearMemory{}, end
}

// The allocator. The host calls cabi_realloc to place the lists and strings of an
// import's result, during the import call, and the export's input, before the call;
// the WASI adapter calls cabi_realloc_adapter for its own state.
//
// The allocations of an import's result live in the Go heap: a result may be an
// output of megabytes, so a fixed arena would not do. Three things make that safe while the Go code
// that made the call is suspended in it:
//   - The new object's only reference is an address the host writes into the return
//     area, which the garbage collector does not see; pins keeps the objects alive
//     until the result is decoded into slices (end, or the export for its input).
//   - A garbage collection must not start, since it calls imports (clocks, poll), and
//     the component model traps any import call made from cabi_realloc: procPin keeps
//     the runtime from starting one or assisting one, and pausing the adapter's
//     monotonic clock answers the runtime's clock reads (when it scavenges while
//     growing the heap) without a host call.
//   - The return area is a global, so the stack may move (if the allocation needs more
//     of it) without moving the place the host writes the result to.
//
// The adapter's calls, and any before the package is initialized (while the runtime
// initializes, the Go heap is not usable yet), are served from a static arena.

var (
	// pins are the objects allocated for the host since the last release.
	pins []unsafe.Pointer
	// heapReady is set once the runtime is initialized and this package's variables
	// are set.
	heapReady bool
	// zeroSized is what a zero-byte allocation returns: any aligned address will do.
	zeroSized uint64
	// arena serves the adapter's state and its stack: 128 KiB in all with the
	// adapter of wasmtime 50, so twice that leaves room.
	arena     [arenaBytes / 8]uint64
	arenaUsed uintptr
)

const arenaBytes = 256 << 10

func init() {
	pins = make([]unsafe.Pointer, 0, 8)
	heapReady = true
}

//go:wasmexport cabi_realloc
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if !heapReady {
		return arenaRealloc(old, oldSize, align, newSize)
	}
	if newSize == 0 {
		return unsafe.Pointer(&zeroSized)
	}
	procPin()
	adapterMonotonicClockSetPaused(true)
	var p unsafe.Pointer
	switch {
	case align <= 1:
		p = unsafe.Pointer(unsafe.SliceData(make([]byte, newSize)))
	case align <= 8:
		// Go aligns an object to its element type: a list<u64> needs 8.
		p = unsafe.Pointer(unsafe.SliceData(make([]uint64, (uintptr(newSize)+7)/8)))
	default:
		panic("tally: cabi_realloc: alignment above 8")
	}
	if old != nil && oldSize > 0 {
		copy(unsafe.Slice((*byte)(p), newSize), unsafe.Slice((*byte)(old), min(oldSize, newSize)))
	}
	pins = append(pins, p)
	adapterMonotonicClockSetPaused(false)
	procUnpin()
	return p
}

//go:wasmexport cabi_realloc_adapter
func cabiReallocAdapter(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	return arenaRealloc(old, oldSize, align, newSize)
}

// arenaRealloc bumps through the arena; it never frees. It uses neither the heap nor
// much stack, since the runtime may not be initialized yet.
//
//go:nosplit
func arenaRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if align == 0 {
		align = 1
	}
	base := uintptr(unsafe.Pointer(&arena))
	offset := (base+arenaUsed+uintptr(align)-1)&^(uintptr(align)-1) - base
	if offset+uintptr(newSize) > arenaBytes {
		// Out of arena: the adapter asked for more than it ever does.
		panic("tally: cabi_realloc: the static arena is exhausted")
	}
	arenaUsed = offset + uintptr(newSize)
	p := unsafe.Add(unsafe.Pointer(&arena), offset)
	if old != nil {
		n := min(oldSize, newSize)
		for i := uintptr(0); i < uintptr(n); i++ {
			*(*byte)(unsafe.Add(p, i)) = *(*byte)(unsafe.Add(old, i))
		}
	}
	return p
}

// releasePins drops the references to the host's allocations, once the result that
// holds them is decoded.
func releasePins() {
	clear(pins)
	pins = pins[:0]
}

var (
	// handleArea is the export's return area.
	handleArea [2]uint64
	// output and message keep the export's result alive until the host has read it.
	output  []byte
	message string
)

// exportHandle is the world's export, handle: func(input: list<u8>) -> result<list<u8>,
// string>. The host allocated the input with cabi_realloc; the result goes back through
// handleArea.
//
//go:wasmexport handle
func exportHandle(inputPtr unsafe.Pointer, inputLen uint32) unsafe.Pointer {
	input := []byte{}
	if inputLen > 0 {
		input = unsafe.Slice((*byte)(inputPtr), inputLen)
	}
	releasePins()

	handler := Handler
	failed := true
	message = "tally: no handler is declared: call tally.Handle from an init function of the main package (main itself never runs)"
	if handler != nil {
		output, message, failed = handler(input)
	}

	area := unsafe.Slice((*byte)(unsafe.Pointer(&handleArea)), handleAreaBytes)
	if failed {
		output = nil
		EncodeHandleResult(area, true, uint32(uintptr(sptr(message))), uint32(len(message)))
	} else {
		message = ""
		EncodeHandleResult(area, false, uint32(uintptr(ptr(output))), uint32(len(output)))
	}
	return unsafe.Pointer(&handleArea)
}

// postHandle runs after the host has read the export's result.
//
//go:wasmexport cabi_post_handle
func postHandle(unsafe.Pointer) {
	output, message = nil, ""
}
