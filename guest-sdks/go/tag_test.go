package tally

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

func checkTag(t *testing.T, name string, want uint64) {
	t.Helper()
	if got := NamedTag(name); uint64(got) != want {
		t.Errorf("NamedTag(%q) = %d, want %d", name, got, want)
	}
}

func TestNamedTagMatchesTheDocumentedVectors(t *testing.T) {
	checkTag(t, "", 0x4bf29ce484222325)
	checkTag(t, "a", 0x2f63dc4c8601ec8c)
	checkTag(t, "orders", 0x00125d9250be8b4c)
}

// The host and every SDK test the same file.
func TestNamedTagMatchesTheSharedVectors(t *testing.T) {
	raw, err := os.ReadFile("../test-vectors/tags.json")
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var file struct {
		Vectors []struct {
			Name string `json:"name"`
			Tag  string `json:"tag"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("the shared vectors: none")
	}
	for _, v := range file.Vectors {
		want, err := strconv.ParseUint(v.Tag, 10, 64)
		if err != nil {
			t.Fatalf("vector %q: tag %q: %v", v.Name, v.Tag, err)
		}
		checkTag(t, v.Name, want)
	}
}

func TestTagFromHashAvoidsAllAndReservedTags(t *testing.T) {
	// No short name hashes to these, so the hash-to-tag step is checked alone.
	for _, c := range []struct{ hash, want uint64 }{
		{0, 1},
		{1 << 63, 1},
		{1<<64 - 1, 1<<63 - 1},
		{42, 42},
	} {
		if got := tagFromHash(c.hash); uint64(got) != c.want {
			t.Errorf("tagFromHash(%#x) = %#x, want %#x", c.hash, uint64(got), c.want)
		}
	}
}

func TestTagAndSeqNumPrintInDecimal(t *testing.T) {
	if s := NamedTag("orders").String(); s != "5169432582064972" {
		t.Errorf("tag %s", s)
	}
	if s := SeqNumMax.String(); s != "18446744073709551615" {
		t.Errorf("seqnum %s", s)
	}
	if s, err := ParseSeqNum("42"); err != nil || s != 42 {
		t.Errorf("ParseSeqNum(42) = %v, %v", s, err)
	}
	if _, err := ParseSeqNum("-1"); err == nil {
		t.Error("ParseSeqNum(-1) succeeded")
	}
}

func TestSeqNumStepsStopAtTheEnds(t *testing.T) {
	if n, ok := SeqNum(5).Next(); !ok || n != 6 {
		t.Errorf("5.Next() = %v, %v", n, ok)
	}
	if n, ok := SeqNum(5).Prev(); !ok || n != 4 {
		t.Errorf("5.Prev() = %v, %v", n, ok)
	}
	if _, ok := SeqNumMax.Next(); ok {
		t.Error("SeqNumMax has a next")
	}
	if _, ok := SeqNumMin.Prev(); ok {
		t.Error("SeqNumMin has a previous")
	}
}
