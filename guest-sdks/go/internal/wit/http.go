package wit

// The layouts of the wasi:http@0.2.10 and wasi:io@0.2.10 values that package
// tally.dev/tally/http exchanges with the host (its imports and its export live in
// internal/wasihttp, linked only into functions that import that package, since the
// world `function` has no wasi:http). Resources cross as i32 handles.

// Field is one header: wasi:http's tuple<field-name, field-value>. Repeated names are
// repeated fields.
type Field struct {
	Name  string
	Value []byte
}

// fieldBytes is the size of a tuple<string, list<u8>> in a list: two (pointer, length).
const fieldBytes = 16

// The cases of the method variant, in WIT order; a method not among them is `other`.
var methods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

const methodOther = uint32(len(methods))

// MethodCase returns the method variant's case for method and, for `other`, its
// payload.
func MethodCase(method string) (uint32, string) {
	for i, m := range methods {
		if m == method {
			return uint32(i), ""
		}
	}
	return methodOther, method
}

// DecodeMethod reads a returned method, 12 bytes: the case at 0 and other's string at 4.
func DecodeMethod(mem Memory, area []byte) string {
	switch c := uint32(area[0]); {
	case c < methodOther:
		return methods[c]
	case c == methodOther:
		return text(mem, area, 4)
	default:
		badCase("method", area[0])
		return ""
	}
}

// SchemeCase returns the scheme variant's case for scheme (as in a URL, lowercase)
// and, for `other`, its payload.
func SchemeCase(scheme string) (uint32, string) {
	switch scheme {
	case "http":
		return 0, ""
	case "https":
		return 1, ""
	default:
		return 2, scheme
	}
}

// DecodeHandleResult reads a result<own<T>> whose error is unit (incoming-request's
// consume, incoming-body's stream, outgoing-body's write, ...), 8 bytes: the case at 0,
// the handle at 4. False: the resource was already taken.
func DecodeHandleResult(area []byte) (uint32, bool) {
	switch area[0] {
	case 0:
		return u32(area, 4), true
	case 1:
		return 0, false
	default:
		badCase("result<own<_>>", area[0])
		return 0, false
	}
}

// DecodeFromListResult reads fields.from-list's result<own<fields>, header-error>, 8
// bytes: the case at 0, then the handle or header-error's case at 4.
func DecodeFromListResult(area []byte) (uint32, string) {
	switch area[0] {
	case 0:
		return u32(area, 4), ""
	case 1:
		switch area[4] {
		case 0:
			return 0, "invalid-syntax"
		case 1:
			return 0, "forbidden"
		case 2:
			return 0, "immutable"
		}
		badCase("header-error", area[4])
	default:
		badCase("result<fields, header-error>", area[0])
	}
	return 0, ""
}

// DecodeFields reads a returned list<tuple<field-name, field-value>>: (pointer,
// length) at 0. Names are copied; values are the memory itself.
func DecodeFields(mem Memory, area []byte) []Field {
	n := u32(area, 4)
	fields := make([]Field, n)
	if n == 0 {
		return fields
	}
	raw := mem.Bytes(u32(area, 0), n*fieldBytes)
	for i := range fields {
		entry := raw[i*fieldBytes:]
		fields[i] = Field{Name: text(mem, entry, 0), Value: bytes(mem, entry, 8)}
	}
	return fields
}

// StreamStatus is how a wasi:io stream operation ended.
type StreamStatus uint8

const (
	// StreamOK: the operation succeeded.
	StreamOK StreamStatus = iota
	// StreamClosed: the stream is closed (for a read: the end of the body).
	StreamClosed
	// StreamFailed: the last operation failed; the error resource's handle comes with it.
	StreamFailed
)

// decodeStreamError reads a stream-error at 4 of a result: its case at 4 and
// last-operation-failed's error handle at 8.
func decodeStreamError(area []byte) (StreamStatus, uint32) {
	switch area[4] {
	case 0:
		return StreamFailed, u32(area, 8)
	case 1:
		return StreamClosed, 0
	default:
		badCase("stream-error", area[4])
		return 0, 0
	}
}

// DecodeReadResult reads blocking-read's result<list<u8>, stream-error>, 12 bytes: the
// case at 0, the list or the stream-error at 4. The error handle is the host's error
// resource when the status is StreamFailed, for the caller to drop.
func DecodeReadResult(mem Memory, area []byte) ([]byte, StreamStatus, uint32) {
	switch area[0] {
	case 0:
		return bytes(mem, area, 4), StreamOK, 0
	case 1:
		status, handle := decodeStreamError(area)
		return nil, status, handle
	default:
		badCase("result<list<u8>, stream-error>", area[0])
		return nil, 0, 0
	}
}

// DecodeWriteResult reads blocking-write-and-flush's result<_, stream-error>, 12 bytes.
func DecodeWriteResult(area []byte) (StreamStatus, uint32) {
	switch area[0] {
	case 0:
		return StreamOK, 0
	case 1:
		return decodeStreamError(area)
	default:
		badCase("result<_, stream-error>", area[0])
		return 0, 0
	}
}

// ErrorCode is a wasi:http error-code as it crossed the boundary.
type ErrorCode struct {
	// Case is the variant's discriminant, an index into errorCodes.
	Case uint8
	// Detail is the payload's text, when the case has one worth telling: an internal
	// error's message, a DNS error's rcode, a coding's name, a size limit.
	Detail string
}

// The error-code variant's cases, in WIT order.
var errorCodes = [...]string{
	"DNS-timeout", "DNS-error", "destination-not-found", "destination-unavailable",
	"destination-IP-prohibited", "destination-IP-unroutable", "connection-refused",
	"connection-terminated", "connection-timeout", "connection-read-timeout",
	"connection-write-timeout", "connection-limit-reached", "TLS-protocol-error",
	"TLS-certificate-error", "TLS-alert-received", "HTTP-request-denied",
	"HTTP-request-length-required", "HTTP-request-body-size", "HTTP-request-method-invalid",
	"HTTP-request-URI-invalid", "HTTP-request-URI-too-long",
	"HTTP-request-header-section-size", "HTTP-request-header-size",
	"HTTP-request-trailer-section-size", "HTTP-request-trailer-size",
	"HTTP-response-incomplete", "HTTP-response-header-section-size",
	"HTTP-response-header-size", "HTTP-response-body-size",
	"HTTP-response-trailer-section-size", "HTTP-response-trailer-size",
	"HTTP-response-transfer-coding", "HTTP-response-content-coding",
	"HTTP-response-timeout", "HTTP-upgrade-failed", "HTTP-protocol-error",
	"loop-detected", "configuration-error", "internal-error",
}

// Name is the case's WIT name, as in "HTTP-request-denied".
func (e *ErrorCode) Name() string {
	return errorCodes[e.Case]
}

// The cases whose payload DecodeErrorCode reads.
const (
	codeDNSError          = 1
	codeRequestBodySize   = 17
	codeResponseBodySize  = 28
	codeTransferCoding    = 31
	codeContentCoding     = 32
	codeInternalError     = 38
	errorCodeBytes        = 32
	errorCodeCases        = uint8(len(errorCodes))
	errorCodePayloadStart = 8
)

// DecodeErrorCode reads an error-code, 32 bytes: the case at 0 and the payload at 8
// (option<u64> makes the variant 8-aligned). option<string> payloads have their case
// at 8 and the string at 12; option<u64> its case at 8 and the u64 at 16.
func DecodeErrorCode(mem Memory, area []byte) *ErrorCode {
	e := &ErrorCode{Case: area[0]}
	if e.Case >= errorCodeCases {
		badCase("error-code", area[0])
	}
	p := errorCodePayloadStart
	switch e.Case {
	case codeDNSError, codeTransferCoding, codeContentCoding, codeInternalError:
		// DNS-error's payload starts with its rcode, an option<string>.
		if area[p] == 1 {
			e.Detail = text(mem, area, p+4)
		}
	case codeRequestBodySize, codeResponseBodySize:
		if area[p] == 1 {
			e.Detail = "limit " + itoa(u64(area, p+8)) + " bytes"
		}
	}
	return e
}

// DecodeHandleOrErrorCode reads a result<own<T>, error-code>, 40 bytes: the case at 0,
// the handle or the error-code at 8 (outgoing-handler's handle).
func DecodeHandleOrErrorCode(mem Memory, area []byte) (uint32, *ErrorCode) {
	switch area[0] {
	case 0:
		return u32(area, 8), nil
	case 1:
		return 0, DecodeErrorCode(mem, area[8:])
	default:
		badCase("result<own<_>, error-code>", area[0])
		return 0, nil
	}
}

// DecodeUnitOrErrorCode reads a result<_, error-code>, 40 bytes (outgoing-body's
// finish).
func DecodeUnitOrErrorCode(mem Memory, area []byte) *ErrorCode {
	_, err := DecodeHandleOrErrorCode(mem, area)
	return err
}

// DecodeFutureResponse reads future-incoming-response's get,
// option<result<result<own<incoming-response>, error-code>>>, 56 bytes: the option's
// case at 0, the outer result's at 8, the inner result's at 16 and its payload at 24.
// ready is false while the response has not arrived. The outer result's error (the
// response was already taken) is a broken caller: it panics.
func DecodeFutureResponse(mem Memory, area []byte) (response uint32, err *ErrorCode, ready bool) {
	switch area[0] {
	case 0:
		return 0, nil, false
	case 1:
	default:
		badCase("option<result<...>>", area[0])
	}
	if area[8] != 0 {
		panic("tally: the response of a request out was taken twice")
	}
	response, err = DecodeHandleOrErrorCode(mem, area[16:])
	return response, err, true
}
