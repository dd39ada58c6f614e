//go:build wasip1

package wasihttp

import (
	"errors"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"tally.dev/tally/internal/wit"
)

// The imports, flattened by the canonical ABI as in internal/wit: a resource is an
// i32 handle (borrowed by a [method], owned where the WIT says own), a list or string
// an (i32 pointer, i32 length) pair, and a result of more than one flat value is
// written into the area at the last i32.

//go:wasmimport wasi:http/types@0.2.10 [static]fields.from-list
func fieldsFromList(entries unsafe.Pointer, n uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [method]fields.entries
func fieldsEntries(fields uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]fields
func dropFields(fields uint32)

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-request.method
func incomingRequestMethod(request uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-request.path-with-query
func incomingRequestPathWithQuery(request uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-request.headers
func incomingRequestHeaders(request uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-request.consume
func incomingRequestConsume(request uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]incoming-request
func dropIncomingRequest(request uint32)

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-body.stream
func incomingBodyStream(body uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [static]incoming-body.finish
func incomingBodyFinish(body uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]future-trailers
func dropFutureTrailers(trailers uint32)

//go:wasmimport wasi:http/types@0.2.10 [constructor]outgoing-response
func newOutgoingResponse(headers uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-response.set-status-code
func outgoingResponseSetStatusCode(response uint32, status uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-response.body
func outgoingResponseBody(response uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]outgoing-response
func dropOutgoingResponse(response uint32)

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-body.write
func outgoingBodyWrite(body uint32, ret unsafe.Pointer)

// The option<own<trailers>> is flattened to its case and the handle.
//
//go:wasmimport wasi:http/types@0.2.10 [static]outgoing-body.finish
func outgoingBodyFinish(body uint32, trailersCase uint32, trailers uint32, ret unsafe.Pointer)

// The response is a result<own<outgoing-response>, error-code>, flattened to its case
// and the join of the handle with error-code's seven flat values (the third an i64);
// the SDK only sends ok, so everything after the handle is 0.
//
//go:wasmimport wasi:http/types@0.2.10 [static]response-outparam.set
func responseOutparamSet(out uint32, resultCase uint32, response uint32, p1 uint32, p2 uint64, p3, p4, p5, p6 uint32)

//go:wasmimport wasi:http/types@0.2.10 [constructor]outgoing-request
func newOutgoingRequest(headers uint32) uint32

// A method is flattened to its case and other's string.
//
//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-request.set-method
func outgoingRequestSetMethod(request uint32, methodCase uint32, other unsafe.Pointer, otherLen uint32) uint32

// An option<scheme> is flattened to the option's case, the scheme's case and other's
// string.
//
//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-request.set-scheme
func outgoingRequestSetScheme(request uint32, some uint32, schemeCase uint32, other unsafe.Pointer, otherLen uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-request.set-authority
func outgoingRequestSetAuthority(request uint32, some uint32, authority unsafe.Pointer, authorityLen uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-request.set-path-with-query
func outgoingRequestSetPathWithQuery(request uint32, some uint32, path unsafe.Pointer, pathLen uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]outgoing-request.body
func outgoingRequestBody(request uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]outgoing-request
func dropOutgoingRequest(request uint32)

//go:wasmimport wasi:http/types@0.2.10 [method]future-incoming-response.subscribe
func futureIncomingResponseSubscribe(future uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]future-incoming-response.get
func futureIncomingResponseGet(future uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]future-incoming-response
func dropFutureIncomingResponse(future uint32)

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-response.status
func incomingResponseStatus(response uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-response.headers
func incomingResponseHeaders(response uint32) uint32

//go:wasmimport wasi:http/types@0.2.10 [method]incoming-response.consume
func incomingResponseConsume(response uint32, ret unsafe.Pointer)

//go:wasmimport wasi:http/types@0.2.10 [resource-drop]incoming-response
func dropIncomingResponse(response uint32)

// The option<own<request-options>> is flattened to its case and the handle.
//
//go:wasmimport wasi:http/outgoing-handler@0.2.10 handle
func outgoingHandlerHandle(request uint32, optionsCase uint32, options uint32, ret unsafe.Pointer)

//go:wasmimport wasi:io/streams@0.2.10 [method]input-stream.blocking-read
func inputStreamBlockingRead(stream uint32, n uint64, ret unsafe.Pointer)

//go:wasmimport wasi:io/streams@0.2.10 [resource-drop]input-stream
func dropInputStream(stream uint32)

//go:wasmimport wasi:io/streams@0.2.10 [method]output-stream.blocking-write-and-flush
func outputStreamBlockingWriteAndFlush(stream uint32, data unsafe.Pointer, n uint32, ret unsafe.Pointer)

//go:wasmimport wasi:io/streams@0.2.10 [resource-drop]output-stream
func dropOutputStream(stream uint32)

//go:wasmimport wasi:io/error@0.2.10 [resource-drop]error
func dropIOError(err uint32)

//go:wasmimport wasi:io/poll@0.2.10 [method]pollable.block
func pollableBlock(pollable uint32)

//go:wasmimport wasi:io/poll@0.2.10 [resource-drop]pollable
func dropPollable(pollable uint32)

// handle is the world's export, wasi:http/incoming-handler.handle: it collects the
// request, runs the Handler and sends its response. It returns nothing; the response
// goes through the outparam.
//
//go:wasmexport wasi:http/incoming-handler@0.2.10#handle
func handle(request uint32, out uint32) {
	req, err := incoming(request)
	var resp *Response
	switch {
	case err != nil:
		resp = textResponse(500, "tally: reading the request: "+err.Error())
	case Handler == nil:
		resp = textResponse(500, "tally: no HTTP handler is declared: call http.Handle from an init function of the main package")
	default:
		resp = Handler(req)
	}
	if err := respond(out, resp); err != nil {
		// The response is already set, or cannot be: all that is left is to say why.
		_, _ = syscall.Write(2, []byte("tally: sending the response: "+err.Error()+"\n"))
	}
}

func textResponse(status uint16, text string) *Response {
	return &Response{
		Status: status,
		Fields: []wit.Field{{Name: "content-type", Value: []byte("text/plain; charset=utf-8")}},
		Body:   []byte(text),
	}
}

// incoming collects the exported request and drops it: its headers (a child of the
// request) first, then the body's stream (a child of the body), then the body.
func incoming(request uint32) (*Request, error) {
	defer dropIncomingRequest(request)
	req := &Request{Method: method(request)}
	req.PathWithQuery, _ = pathWithQuery(request)
	headers := incomingRequestHeaders(request)
	req.Fields = entries(headers)
	dropFields(headers)
	body, ok := handleResult(func(ret unsafe.Pointer) { incomingRequestConsume(request, ret) })
	if !ok {
		return nil, errors.New("the body was already consumed")
	}
	var err error
	req.Body, err = readBody(body)
	return req, err
}

// respond sends resp through the outparam: the response is set before its body is
// written, so that a body larger than the host's pipe does not wait for a reader that
// is not there yet. Headers the host refuses fail it before anything is set, with a
// 500 sent instead.
func respond(out uint32, resp *Response) error {
	headers, refused := fromList(resp.Fields)
	if refused != "" {
		resp = textResponse(500, "tally: the host refused the response's headers: "+refused)
		headers, _ = fromList(resp.Fields)
	}
	response := newOutgoingResponse(headers)
	if outgoingResponseSetStatusCode(response, uint32(resp.Status)) != 0 {
		dropOutgoingResponse(response)
		resp = textResponse(500, "tally: the response's status is not valid: "+strconv.Itoa(int(resp.Status)))
		headers, _ = fromList(resp.Fields)
		response = newOutgoingResponse(headers)
	}
	body, ok := handleResult(func(ret unsafe.Pointer) { outgoingResponseBody(response, ret) })
	if !ok {
		panic("tally: a new response has no body")
	}
	responseOutparamSet(out, 0, response, 0, 0, 0, 0, 0, 0)
	return writeBody(body, resp.Body)
}

// Fetch sends req out through wasi:http/outgoing-handler and collects its response.
// A wasi:http error-code comes back as code; anything else as err.
func Fetch(req *Request) (resp *Response, code *wit.ErrorCode, err error) {
	headers, refused := fromList(req.Fields)
	if refused != "" {
		return nil, nil, errors.New("the request's headers were refused: " + refused)
	}
	request := newOutgoingRequest(headers)
	if what := setTarget(request, req); what != "" {
		dropOutgoingRequest(request)
		return nil, nil, errors.New("the request's " + what + " is not valid")
	}
	body, ok := handleResult(func(ret unsafe.Pointer) { outgoingRequestBody(request, ret) })
	if !ok {
		panic("tally: a new request has no body")
	}
	future, code := send(request)
	if code != nil {
		return nil, code, nil
	}
	defer dropFutureIncomingResponse(future)
	if err := writeBody(body, req.Body); err != nil {
		return nil, nil, err
	}
	response, code := await(future)
	if code != nil {
		return nil, code, nil
	}
	defer dropIncomingResponse(response)
	resp = &Response{Status: uint16(incomingResponseStatus(response))}
	fields := incomingResponseHeaders(response)
	resp.Fields = entries(fields)
	dropFields(fields)
	incomingBody, ok := handleResult(func(ret unsafe.Pointer) { incomingResponseConsume(response, ret) })
	if !ok {
		panic("tally: a new response's body was already consumed")
	}
	resp.Body, err = readBody(incomingBody)
	return resp, nil, err
}

// setTarget sets the method, scheme, authority and path of a request out, and names
// the first one the host refused.
func setTarget(request uint32, req *Request) string {
	methodCase, other := wit.MethodCase(req.Method)
	if outgoingRequestSetMethod(request, methodCase, sptr(other), uint32(len(other))) != 0 {
		return "method"
	}
	schemeCase, other := wit.SchemeCase(req.Scheme)
	if outgoingRequestSetScheme(request, 1, schemeCase, sptr(other), uint32(len(other))) != 0 {
		return "scheme"
	}
	if outgoingRequestSetAuthority(request, 1, sptr(req.Authority), uint32(len(req.Authority))) != 0 {
		return "authority"
	}
	if outgoingRequestSetPathWithQuery(request, 1, sptr(req.PathWithQuery), uint32(len(req.PathWithQuery))) != 0 {
		return "path"
	}
	return ""
}

func send(request uint32) (uint32, *wit.ErrorCode) {
	ret, area, mem, done := wit.Call()
	defer done()
	outgoingHandlerHandle(request, 0, 0, ret)
	return wit.DecodeHandleOrErrorCode(mem, area)
}

// await waits for the response without spinning: it blocks on the future's pollable
// until the response (or the failure) is there.
func await(future uint32) (uint32, *wit.ErrorCode) {
	for {
		if response, code, ready := futureGet(future); ready {
			return response, code
		}
		pollable := futureIncomingResponseSubscribe(future)
		pollableBlock(pollable)
		dropPollable(pollable)
	}
}

func futureGet(future uint32) (uint32, *wit.ErrorCode, bool) {
	ret, area, mem, done := wit.Call()
	defer done()
	futureIncomingResponseGet(future, ret)
	return wit.DecodeFutureResponse(mem, area)
}

// readBody reads an incoming body to its end, then drops its stream and finishes it
// (the trailers are not read).
func readBody(body uint32) ([]byte, error) {
	defer func() { dropFutureTrailers(incomingBodyFinish(body)) }()
	stream, ok := handleResult(func(ret unsafe.Pointer) { incomingBodyStream(body, ret) })
	if !ok {
		return nil, errors.New("the body's stream was already taken")
	}
	defer dropInputStream(stream)
	data := []byte{}
	for {
		chunk, status := read(stream)
		switch status {
		case wit.StreamClosed:
			return data, nil
		case wit.StreamFailed:
			return nil, errors.New("reading the body failed")
		}
		data = append(data, chunk...)
	}
}

func read(stream uint32) ([]byte, wit.StreamStatus) {
	ret, area, mem, done := wit.Call()
	defer done()
	inputStreamBlockingRead(stream, readChunkBytes, ret)
	chunk, status, ioError := wit.DecodeReadResult(mem, area)
	if status == wit.StreamFailed {
		dropIOError(ioError)
	}
	return chunk, status
}

// writeBody writes data to an outgoing body in the chunks the stream takes, then drops
// the stream and finishes the body without trailers.
func writeBody(body uint32, data []byte) error {
	stream, ok := handleResult(func(ret unsafe.Pointer) { outgoingBodyWrite(body, ret) })
	if !ok {
		panic("tally: a new body's stream was already taken")
	}
	for len(data) > 0 {
		n := min(len(data), writeChunkBytes)
		if status := write(stream, data[:n]); status != wit.StreamOK {
			dropOutputStream(stream)
			return errors.New("writing the body failed: the stream is closed or failed")
		}
		data = data[n:]
	}
	dropOutputStream(stream)
	if code := finish(body); code != nil {
		return errors.New("finishing the body failed: " + code.Name())
	}
	return nil
}

func write(stream uint32, data []byte) wit.StreamStatus {
	ret, area, _, done := wit.Call()
	defer done()
	outputStreamBlockingWriteAndFlush(stream, unsafe.Pointer(unsafe.SliceData(data)), uint32(len(data)), ret)
	status, ioError := wit.DecodeWriteResult(area)
	if status == wit.StreamFailed {
		dropIOError(ioError)
	}
	return status
}

func finish(body uint32) *wit.ErrorCode {
	ret, area, mem, done := wit.Call()
	defer done()
	outgoingBodyFinish(body, 0, 0, ret)
	return wit.DecodeUnitOrErrorCode(mem, area)
}

func method(request uint32) string {
	ret, area, mem, done := wit.Call()
	defer done()
	incomingRequestMethod(request, ret)
	return wit.DecodeMethod(mem, area)
}

func pathWithQuery(request uint32) (string, bool) {
	ret, area, mem, done := wit.Call()
	defer done()
	incomingRequestPathWithQuery(request, ret)
	return wit.DecodeOptionString(mem, area)
}

func entries(fields uint32) []wit.Field {
	ret, area, mem, done := wit.Call()
	defer done()
	fieldsEntries(fields, ret)
	list := wit.DecodeFields(mem, area)
	// The values are the host's allocations, which done releases: copy them into one
	// block the fields keep alive.
	size := 0
	for _, f := range list {
		size += len(f.Value)
	}
	block := make([]byte, 0, size)
	for i, f := range list {
		block = append(block, f.Value...)
		list[i].Value = block[len(block)-len(f.Value):]
	}
	return list
}

// fromList makes a fields resource of the list, or names why the host refused it
// (a forbidden or malformed header).
func fromList(fields []wit.Field) (uint32, string) {
	// The list is (name pointer, name length, value pointer, value length) per field,
	// as u32s: a Wasm address is 32 bits, a Go pointer 64.
	flat := make([]uint32, 0, 4*len(fields))
	for _, f := range fields {
		flat = append(flat,
			uint32(uintptr(sptr(f.Name))), uint32(len(f.Name)),
			uint32(uintptr(unsafe.Pointer(unsafe.SliceData(f.Value)))), uint32(len(f.Value)))
	}
	ret, area, _, done := wit.Call()
	defer done()
	fieldsFromList(unsafe.Pointer(unsafe.SliceData(flat)), uint32(len(fields)), ret)
	runtime.KeepAlive(fields)
	handle, refused := wit.DecodeFromListResult(area)
	if refused != "" {
		return 0, refused
	}
	return handle, ""
}

// handleResult makes a call that returns a result<own<T>> through an area.
func handleResult(call func(ret unsafe.Pointer)) (uint32, bool) {
	ret, area, _, done := wit.Call()
	defer done()
	call(ret)
	return wit.DecodeHandleResult(area)
}

func sptr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }
