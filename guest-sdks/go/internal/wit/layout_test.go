package wit

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// fakeMemory is a linear memory of the size a test needs: the areas' pointers are
// offsets into it.
type fakeMemory struct{ b []byte }

func (m *fakeMemory) Bytes(ptr, n uint32) []byte { return m.b[ptr : ptr+n] }

// put places data in memory 8-aligned and returns its address, as cabi_realloc does.
func (m *fakeMemory) put(data []byte) uint32 {
	for len(m.b)%8 != 0 {
		m.b = append(m.b, 0xAA)
	}
	ptr := uint32(len(m.b))
	m.b = append(m.b, data...)
	return ptr
}

func newMemory() *fakeMemory {
	// Address 0 stays unused, so a zero pointer is never valid data.
	return &fakeMemory{b: make([]byte, 8)}
}

// areaOf builds a return area: the bytes at each offset, the rest 0xEE as garbage a
// decoder must not read.
type field struct {
	at    int
	value any // uint8, uint32 or uint64
}

func areaOf(n int, fields ...field) []byte {
	area := make([]byte, n)
	for i := range area {
		area[i] = 0xEE
	}
	for _, f := range fields {
		switch v := f.value.(type) {
		case uint8:
			area[f.at] = v
		case uint32:
			binary.LittleEndian.PutUint32(area[f.at:], v)
		case uint64:
			binary.LittleEndian.PutUint64(area[f.at:], v)
		}
	}
	return area
}

func TestDecodeU64Result(t *testing.T) {
	mem := newMemory()
	seqnum, err := DecodeU64Result(mem, areaOf(32, field{0, uint8(0)}, field{8, uint64(1 << 63)}))
	if err != nil || seqnum != 1<<63 {
		t.Errorf("ok: %d, %v", seqnum, err)
	}
	msg := mem.put([]byte("tag 0 is not a condition"))
	_, err = DecodeU64Result(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(0)}, field{16, msg}, field{20, uint32(24)}))
	if want := (&Error{Case: 0, Message: "tag 0 is not a condition"}); !reflect.DeepEqual(err, want) {
		t.Errorf("invalid-argument: %#v", err)
	}
}

func TestDecodeErrorEveryCase(t *testing.T) {
	mem := newMemory()
	msg := mem.put([]byte("why"))
	for c := uint8(0); c <= 6; c++ {
		if c == caseConflict {
			continue
		}
		err := DecodeUnitResult(mem, areaOf(32, field{0, uint8(1)}, field{8, c}, field{16, msg}, field{20, uint32(3)}))
		if want := (&Error{Case: c, Message: "why"}); !reflect.DeepEqual(err, want) {
			t.Errorf("case %d: %#v", c, err)
		}
	}
	err := DecodeUnitResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(2)}, field{16, uint8(1)}, field{24, uint64(77)}))
	if want := (&Error{Case: 2, Holder: 77, HolderKnown: true}); !reflect.DeepEqual(err, want) {
		t.Errorf("conflict with a holder: %#v", err)
	}
	err = DecodeUnitResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(2)}, field{16, uint8(0)}))
	if want := (&Error{Case: 2}); !reflect.DeepEqual(err, want) {
		t.Errorf("conflict without a holder: %#v", err)
	}
	if err := DecodeUnitResult(mem, areaOf(32, field{0, uint8(0)})); err != nil {
		t.Errorf("ok: %#v", err)
	}
	// An empty message has no memory behind its pointer.
	err = DecodeUnitResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(3)}, field{16, uint32(0xFFFF_FFF0)}, field{20, uint32(0)}))
	if want := (&Error{Case: 3}); !reflect.DeepEqual(err, want) {
		t.Errorf("empty message: %#v", err)
	}
}

func TestDecodeRecordResult(t *testing.T) {
	mem := newMemory()
	var tags []byte
	for _, tag := range []uint64{3, 1<<63 - 1} {
		tags = binary.LittleEndian.AppendUint64(tags, tag)
	}
	tagsPtr := mem.put(tags)
	dataPtr := mem.put([]byte("one"))
	auxPtr := mem.put([]byte("snapshot"))
	record := func(auxCase uint8) []byte {
		return areaOf(56,
			field{0, uint8(0)}, field{8, uint8(1)},
			field{16, uint64(42)},
			field{24, tagsPtr}, field{28, uint32(2)},
			field{32, dataPtr}, field{36, uint32(3)},
			field{40, auxCase}, field{44, auxPtr}, field{48, uint32(8)},
		)
	}
	got, err := DecodeRecordResult(mem, record(1))
	want := &Record{SeqNum: 42, Tags: []uint64{3, 1<<63 - 1}, Data: []byte("one"), Aux: []byte("snapshot")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("with aux: %#v, %v", got, err)
	}
	got, err = DecodeRecordResult(mem, record(0))
	want.Aux = nil
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("without aux: %#v, %v", got, err)
	}
	// Some empty aux data is not none.
	empty := record(1)
	binary.LittleEndian.PutUint32(empty[48:], 0)
	got, _ = DecodeRecordResult(mem, empty)
	if got.Aux == nil || len(got.Aux) != 0 {
		t.Errorf("empty aux: %#v", got.Aux)
	}
	// No tags, no data.
	bare := record(0)
	binary.LittleEndian.PutUint32(bare[28:], 0)
	binary.LittleEndian.PutUint32(bare[36:], 0)
	got, _ = DecodeRecordResult(mem, bare)
	if len(got.Tags) != 0 || len(got.Data) != 0 {
		t.Errorf("bare record: %#v", got)
	}
	got, err = DecodeRecordResult(mem, areaOf(56, field{0, uint8(0)}, field{8, uint8(0)}))
	if got != nil || err != nil {
		t.Errorf("none: %#v, %v", got, err)
	}
	msg := mem.put([]byte("log down"))
	got, err = DecodeRecordResult(mem, areaOf(56, field{0, uint8(1)}, field{8, uint8(3)}, field{16, msg}, field{20, uint32(8)}))
	if got != nil || !reflect.DeepEqual(err, &Error{Case: 3, Message: "log down"}) {
		t.Errorf("error: %#v, %#v", got, err)
	}
}

func TestDecodeBytesResults(t *testing.T) {
	mem := newMemory()
	big := []byte(strings.Repeat("v", 512<<10))
	ptr := mem.put(big)
	out, err := DecodeBytesResult(mem, areaOf(32, field{0, uint8(0)}, field{8, ptr}, field{12, uint32(len(big))}))
	if err != nil || len(out) != len(big) || &out[0] != &mem.b[ptr] {
		t.Errorf("call output: %d bytes, %v, not the memory itself", len(out), err)
	}
	value, ok, err := DecodeOptionBytesResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(1)}, field{12, ptr}, field{16, uint32(5)}))
	if err != nil || !ok || string(value) != "vvvvv" {
		t.Errorf("some value: %q, %v, %v", value, ok, err)
	}
	value, ok, err = DecodeOptionBytesResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(1)}, field{12, uint32(0)}, field{16, uint32(0)}))
	if err != nil || !ok || value == nil || len(value) != 0 {
		t.Errorf("some empty value: %q, %v, %v", value, ok, err)
	}
	value, ok, err = DecodeOptionBytesResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(0)}))
	if err != nil || ok || value != nil {
		t.Errorf("none: %q, %v, %v", value, ok, err)
	}
}

func TestDecodeBytesListResult(t *testing.T) {
	mem := newMemory()
	a, b := mem.put([]byte("first")), mem.put([]byte("2nd"))
	pairs := mem.put(areaOf(24, field{0, a}, field{4, uint32(5)}, field{8, uint32(0)}, field{12, uint32(0)}, field{16, b}, field{20, uint32(3)}))
	list, err := DecodeBytesListResult(mem, areaOf(32, field{0, uint8(0)}, field{8, pairs}, field{12, uint32(3)}))
	if err != nil || len(list) != 3 || string(list[0]) != "first" || list[1] == nil || len(list[1]) != 0 || string(list[2]) != "2nd" {
		t.Errorf("three lists: %q, %v", list, err)
	}
	if &list[0][0] != &mem.b[a] {
		t.Errorf("the lists are copies, not the memory itself")
	}
	list, err = DecodeBytesListResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint32(0)}, field{12, uint32(0)}))
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("none: %q, %v", list, err)
	}
	msg := mem.put([]byte("max is 1 to 100"))
	list, err = DecodeBytesListResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(0)}, field{16, msg}, field{20, uint32(15)}))
	if err == nil || err.Case != 0 || err.Message != "max is 1 to 100" || list != nil {
		t.Errorf("error: %q, %+v", list, err)
	}
}

func TestDecodeString(t *testing.T) {
	mem := newMemory()
	ptr := mem.put([]byte("inv-1é"))
	if s := DecodeString(mem, areaOf(8, field{0, ptr}, field{4, uint32(7)})); s != "inv-1é" {
		t.Errorf("string %q", s)
	}
}

func TestDecodeStringResult(t *testing.T) {
	mem := newMemory()
	id := mem.put([]byte("0123456789abcdef0123456789abcdef"))
	s, err := DecodeStringResult(mem, areaOf(32, field{0, uint8(0)}, field{8, id}, field{12, uint32(32)}))
	if err != nil || s != "0123456789abcdef0123456789abcdef" {
		t.Errorf("ok: %q, %v", s, err)
	}
	if s, err := DecodeStringResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint32(0)}, field{12, uint32(0)})); err != nil || s != "" {
		t.Errorf("empty: %q, %v", s, err)
	}
	msg := mem.put([]byte("no quorum"))
	s, err = DecodeStringResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(3)}, field{16, msg}, field{20, uint32(9)}))
	if want := (&Error{Case: 3, Message: "no quorum"}); s != "" || !reflect.DeepEqual(err, want) {
		t.Errorf("unavailable: %q, %#v", s, err)
	}
}

func TestDecodeOptionStringResult(t *testing.T) {
	mem := newMemory()
	ptr := mem.put([]byte(`{"a":[1,"é"]}`))
	json, ok, err := DecodeOptionStringResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(1)}, field{12, ptr}, field{16, uint32(14)}))
	if err != nil || !ok || json != `{"a":[1,"é"]}` {
		t.Errorf("some: %q, %v, %v", json, ok, err)
	}
	json, ok, err = DecodeOptionStringResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(0)}))
	if err != nil || ok || json != "" {
		t.Errorf("none: %q, %v, %v", json, ok, err)
	}
	msg := mem.put([]byte("bad pointer"))
	json, ok, err = DecodeOptionStringResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(0)}, field{16, msg}, field{20, uint32(11)}))
	if ok || json != "" || !reflect.DeepEqual(err, &Error{Case: 0, Message: "bad pointer"}) {
		t.Errorf("error: %q, %v, %#v", json, ok, err)
	}
}

func TestDecodeBoolResult(t *testing.T) {
	mem := newMemory()
	for _, c := range []struct {
		b    uint8
		want bool
	}{{0, false}, {1, true}, {2, true}} {
		got, err := DecodeBoolResult(mem, areaOf(32, field{0, uint8(0)}, field{8, c.b}))
		if err != nil || got != c.want {
			t.Errorf("byte %d: %v, %v", c.b, got, err)
		}
	}
	got, err := DecodeBoolResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(2)}, field{16, uint8(1)}, field{24, uint64(5)}))
	if got || !reflect.DeepEqual(err, &Error{Case: 2, Holder: 5, HolderKnown: true}) {
		t.Errorf("error: %v, %#v", got, err)
	}
}

func TestDecodeOptionString(t *testing.T) {
	mem := newMemory()
	ptr := mem.put([]byte("user-42"))
	key, ok := DecodeOptionString(mem, areaOf(12, field{0, uint8(1)}, field{4, ptr}, field{8, uint32(7)}))
	if !ok || key != "user-42" {
		t.Errorf("some: %q, %v", key, ok)
	}
	key, ok = DecodeOptionString(mem, areaOf(12, field{0, uint8(1)}, field{4, uint32(0)}, field{8, uint32(0)}))
	if !ok || key != "" {
		t.Errorf("some empty: %q, %v", key, ok)
	}
	key, ok = DecodeOptionString(mem, areaOf(12, field{0, uint8(0)}))
	if ok || key != "" {
		t.Errorf("none: %q, %v", key, ok)
	}
}

func TestInvalidDiscriminantsPanic(t *testing.T) {
	mem := newMemory()
	for name, decode := range map[string]func(){
		"result": func() { DecodeUnitResult(mem, areaOf(32, field{0, uint8(2)})) },
		"error":  func() { DecodeUnitResult(mem, areaOf(32, field{0, uint8(1)}, field{8, uint8(7)})) },
		"option": func() { DecodeRecordResult(mem, areaOf(56, field{0, uint8(0)}, field{8, uint8(2)})) },
		"option<string> result": func() {
			DecodeOptionStringResult(mem, areaOf(32, field{0, uint8(0)}, field{8, uint8(2)}))
		},
		"option<string>": func() { DecodeOptionString(mem, areaOf(12, field{0, uint8(2)})) },
		"bool result":    func() { DecodeBoolResult(mem, areaOf(32, field{0, uint8(2)})) },
		"string result": func() {
			DecodeStringResult(mem, areaOf(32, field{0, uint8(3)}))
		},
		"utf-8": func() {
			ptr := mem.put([]byte{0xff})
			DecodeString(mem, areaOf(8, field{0, ptr}, field{4, uint32(1)}))
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			decode()
		}()
	}
}

func TestEncodeHandleResult(t *testing.T) {
	area := areaOf(12)
	EncodeHandleResult(area, false, 0x1000, 5)
	if want := []byte{0, 0, 0, 0, 0, 0x10, 0, 0, 5, 0, 0, 0}; !reflect.DeepEqual(area, want) {
		t.Errorf("ok: % x", area)
	}
	EncodeHandleResult(area, true, 0x20, 3)
	if want := []byte{1, 0, 0, 0, 0x20, 0, 0, 0, 3, 0, 0, 0}; !reflect.DeepEqual(area, want) {
		t.Errorf("error: % x", area)
	}
}
