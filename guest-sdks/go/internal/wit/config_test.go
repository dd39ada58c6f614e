package wit

import (
	"reflect"
	"testing"
)

func TestDecodeConfigGet(t *testing.T) {
	mem := newMemory()
	value := mem.put([]byte("http://127.0.0.1:9000/sink"))
	got, ok, err := DecodeConfigGet(mem, areaOf(16, field{0, uint8(0)}, field{4, uint8(1)}, field{8, value}, field{12, uint32(26)}))
	if got != "http://127.0.0.1:9000/sink" || !ok || err != nil {
		t.Errorf("some: %q, %v, %v", got, ok, err)
	}
	if _, ok, err := DecodeConfigGet(mem, areaOf(16, field{0, uint8(0)}, field{4, uint8(0)})); ok || err != nil {
		t.Errorf("none: %v, %v", ok, err)
	}
	msg := mem.put([]byte("sealed store down"))
	for c, upstream := range []bool{true, false} {
		_, _, err := DecodeConfigGet(mem, areaOf(16, field{0, uint8(1)}, field{4, uint8(c)}, field{8, msg}, field{12, uint32(17)}))
		if want := (&ConfigError{Upstream: upstream, Message: "sealed store down"}); !reflect.DeepEqual(err, want) {
			t.Errorf("error case %d: %#v", c, err)
		}
	}
}

func TestDecodeConfigGetAll(t *testing.T) {
	mem := newMemory()
	k1, v1, k2 := mem.put([]byte("upstream")), mem.put([]byte("u")), mem.put([]byte("empty"))
	list := mem.put(nil)
	for _, n := range []uint32{k1, 8, v1, 1, k2, 5, 0, 0} {
		mem.b = append(mem.b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	got, err := DecodeConfigGetAll(mem, areaOf(16, field{0, uint8(0)}, field{4, list}, field{8, uint32(2)}))
	if want := [][2]string{{"upstream", "u"}, {"empty", ""}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("all: %q, %v", got, err)
	}
	if got, err := DecodeConfigGetAll(mem, areaOf(16, field{0, uint8(0)}, field{4, uint32(0)}, field{8, uint32(0)})); err != nil || len(got) != 0 {
		t.Errorf("none: %q, %v", got, err)
	}
}
