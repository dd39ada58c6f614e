package tally

import "strconv"

// Tag selects a sub-stream of the book: every record carries a set of tags, and reads
// name the one tag whose stream they walk.
//
// Tag 0 ([TagAll]) is the whole book. Tags with the top bit (bit 63) set are reserved
// for the platform: appending with one fails with [InvalidArgument].
type Tag uint64

// TagAll is the whole book: every record is in tag 0's stream. It is only for reading
// and trimming; a record's own tags never include it.
const TagAll Tag = 0

// NamedTag returns the tag for a name, so functions agree on tags by name without a
// registry.
//
// The tag is the 64-bit FNV-1a hash of the name's UTF-8 bytes (offset basis
// 0xcbf29ce484222325, prime 0x100000001b3: for each byte, xor it in, then multiply,
// wrapping), with the top bit cleared because it is reserved for the platform, and 1
// in place of 0 because 0 is [TagAll]. The gateway uses the same function for
// ?tag=name, and so does every Tally SDK, so these must not change:
//
//	name       FNV-1a 64            tag (hex)            tag (decimal)
//	""         0xcbf29ce484222325   0x4bf29ce484222325   5472609002491880229
//	"a"        0xaf63dc4c8601ec8c   0x2f63dc4c8601ec8c   3414815163700866188
//	"orders"   0x00125d9250be8b4c   0x00125d9250be8b4c   5169432582064972
//
// It is cheap, so a function can name its tags in package-level variables:
//
//	var orders = tally.NamedTag("orders")
func NamedTag(name string) Tag {
	const (
		offsetBasis = 0xcbf29ce484222325
		prime       = 0x100000001b3
	)
	var hash uint64 = offsetBasis
	for i := 0; i < len(name); i++ {
		hash ^= uint64(name[i])
		hash *= prime
	}
	return tagFromHash(hash)
}

// tagFromHash makes a name's hash a tag a function may append with.
func tagFromHash(hash uint64) Tag {
	const reservedBit = 1 << 63
	if tag := hash &^ reservedBit; tag != 0 {
		return Tag(tag)
	}
	return 1
}

// String returns the tag's number in decimal.
func (t Tag) String() string {
	return strconv.FormatUint(uint64(t), 10)
}
