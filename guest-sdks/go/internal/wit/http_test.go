package wit

import (
	"reflect"
	"testing"
)

func TestMethods(t *testing.T) {
	mem := newMemory()
	for i, method := range methods {
		c, other := MethodCase(method)
		if c != uint32(i) || other != "" {
			t.Errorf("%s: case %d, other %q", method, c, other)
		}
		if got := DecodeMethod(mem, areaOf(12, field{0, uint8(i)})); got != method {
			t.Errorf("decoding case %d: %q", i, got)
		}
	}
	if c, other := MethodCase("PURGE"); c != 9 || other != "PURGE" {
		t.Errorf("other: case %d, %q", c, other)
	}
	// Methods are case-sensitive: "get" is not GET.
	if c, _ := MethodCase("get"); c != 9 {
		t.Errorf("lowercase get: case %d", c)
	}
	purge := mem.put([]byte("PURGE"))
	if got := DecodeMethod(mem, areaOf(12, field{0, uint8(9)}, field{4, purge}, field{8, uint32(5)})); got != "PURGE" {
		t.Errorf("decoding other: %q", got)
	}
}

func TestSchemes(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		c      uint32
		other  string
	}{{"http", 0, ""}, {"https", 1, ""}, {"ftp", 2, "ftp"}} {
		if c, other := SchemeCase(tc.scheme); c != tc.c || other != tc.other {
			t.Errorf("%s: case %d, %q", tc.scheme, c, other)
		}
	}
}

func TestDecodeHandleResults(t *testing.T) {
	if h, ok := DecodeHandleResult(areaOf(8, field{0, uint8(0)}, field{4, uint32(7)})); !ok || h != 7 {
		t.Errorf("ok: %d, %v", h, ok)
	}
	if _, ok := DecodeHandleResult(areaOf(8, field{0, uint8(1)})); ok {
		t.Error("error: ok")
	}
	if h, refused := DecodeFromListResult(areaOf(8, field{0, uint8(0)}, field{4, uint32(3)})); h != 3 || refused != "" {
		t.Errorf("from-list ok: %d, %q", h, refused)
	}
	for c, name := range []string{"invalid-syntax", "forbidden", "immutable"} {
		if _, refused := DecodeFromListResult(areaOf(8, field{0, uint8(1)}, field{4, uint8(c)})); refused != name {
			t.Errorf("header-error %d: %q", c, refused)
		}
	}
}

func TestDecodeFields(t *testing.T) {
	mem := newMemory()
	name, value := mem.put([]byte("x-a")), mem.put([]byte("1"))
	other := mem.put([]byte("2"))
	list := mem.put(nil)
	for _, f := range [][4]uint32{{name, 3, value, 1}, {name, 3, other, 1}, {name, 3, 0, 0}} {
		for _, n := range f {
			mem.b = append(mem.b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
		}
	}
	got := DecodeFields(mem, areaOf(8, field{0, list}, field{4, uint32(3)}))
	want := []Field{{"x-a", []byte("1")}, {"x-a", []byte("2")}, {"x-a", []byte{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields: %q", got)
	}
	if got := DecodeFields(mem, areaOf(8, field{0, uint32(0)}, field{4, uint32(0)})); len(got) != 0 {
		t.Errorf("no fields: %q", got)
	}
}

func TestDecodeStreamResults(t *testing.T) {
	mem := newMemory()
	chunk := mem.put([]byte("body"))
	data, status, _ := DecodeReadResult(mem, areaOf(12, field{0, uint8(0)}, field{4, chunk}, field{8, uint32(4)}))
	if string(data) != "body" || status != StreamOK {
		t.Errorf("read: %q, %d", data, status)
	}
	if _, status, _ := DecodeReadResult(mem, areaOf(12, field{0, uint8(1)}, field{4, uint8(1)})); status != StreamClosed {
		t.Errorf("closed: %d", status)
	}
	if _, status, handle := DecodeReadResult(mem, areaOf(12, field{0, uint8(1)}, field{4, uint8(0)}, field{8, uint32(9)})); status != StreamFailed || handle != 9 {
		t.Errorf("failed: %d, %d", status, handle)
	}
	if status, _ := DecodeWriteResult(areaOf(12, field{0, uint8(0)})); status != StreamOK {
		t.Errorf("written: %d", status)
	}
	if status, handle := DecodeWriteResult(areaOf(12, field{0, uint8(1)}, field{4, uint8(0)}, field{8, uint32(4)})); status != StreamFailed || handle != 4 {
		t.Errorf("write failed: %d, %d", status, handle)
	}
}

func TestDecodeErrorCode(t *testing.T) {
	mem := newMemory()
	msg := mem.put([]byte("no route"))
	for _, tc := range []struct {
		area       []byte
		name, said string
	}{
		{areaOf(32, field{0, uint8(15)}), "HTTP-request-denied", ""},
		{areaOf(32, field{0, uint8(6)}), "connection-refused", ""},
		{areaOf(32, field{0, uint8(38)}, field{8, uint8(1)}, field{12, msg}, field{16, uint32(8)}), "internal-error", "no route"},
		{areaOf(32, field{0, uint8(38)}, field{8, uint8(0)}), "internal-error", ""},
		{areaOf(32, field{0, uint8(1)}, field{8, uint8(1)}, field{12, msg}, field{16, uint32(8)}), "DNS-error", "no route"},
		{areaOf(32, field{0, uint8(28)}, field{8, uint8(1)}, field{16, uint64(786432)}), "HTTP-response-body-size", "limit 786432 bytes"},
	} {
		e := DecodeErrorCode(mem, tc.area)
		if e.Name() != tc.name || e.Detail != tc.said {
			t.Errorf("%s: %s, %q", tc.name, e.Name(), e.Detail)
		}
	}
	if len(errorCodes) != 39 {
		t.Errorf("error-code has 39 cases, not %d", len(errorCodes))
	}
}

func TestDecodeOutgoingResults(t *testing.T) {
	mem := newMemory()
	if h, e := DecodeHandleOrErrorCode(mem, areaOf(40, field{0, uint8(0)}, field{8, uint32(5)})); h != 5 || e != nil {
		t.Errorf("sent: %d, %v", h, e)
	}
	if _, e := DecodeHandleOrErrorCode(mem, areaOf(40, field{0, uint8(1)}, field{8, uint8(15)})); e == nil || e.Name() != "HTTP-request-denied" {
		t.Errorf("denied: %v", e)
	}
	if e := DecodeUnitOrErrorCode(mem, areaOf(40, field{0, uint8(0)})); e != nil {
		t.Errorf("finished: %v", e)
	}
	if _, _, ready := DecodeFutureResponse(mem, areaOf(56, field{0, uint8(0)})); ready {
		t.Error("pending: ready")
	}
	h, e, ready := DecodeFutureResponse(mem, areaOf(56, field{0, uint8(1)}, field{8, uint8(0)}, field{16, uint8(0)}, field{24, uint32(11)}))
	if !ready || h != 11 || e != nil {
		t.Errorf("response: %d, %v, %v", h, e, ready)
	}
	_, e, ready = DecodeFutureResponse(mem, areaOf(56, field{0, uint8(1)}, field{8, uint8(0)}, field{16, uint8(1)}, field{24, uint8(8)}))
	if !ready || e == nil || e.Name() != "connection-timeout" {
		t.Errorf("failed: %v, %v", e, ready)
	}
}
