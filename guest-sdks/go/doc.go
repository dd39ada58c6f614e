// Package tally writes Tally functions in Go.
//
// A Tally function is a WebAssembly component of world tally:platform/function: it
// gets the invocation's input as bytes and returns bytes or an error message. While it
// runs it may use the shared log of the book it is bound to (package
// [tally.dev/tally/logbook]), keep exactly-once key-value state in the book's tables
// ([tally.dev/tally/state]), keep durable JSON objects with transactions across them
// ([tally.dev/tally/objects]), pass messages through durable queues
// ([tally.dev/tally/queues]), hold locks ([tally.dev/tally/locks]), call other
// functions ([tally.dev/tally/invoke]) and ask what the invocation is
// ([tally.dev/tally/invocation]).
//
// An HTTP function (world tally:platform/http-function) declares a net/http handler
// and sends requests out with [tally.dev/tally/http]; every function reads its
// settings with [tally.dev/tally/config].
//
// This package holds what they share: [Handle], which declares the function's entry
// point, the [Tag] and [SeqNum] of the log, and the [Error] every platform call may
// return.
//
// A function is a main package whose init function registers the handler:
//
//	package main
//
//	import (
//		"strconv"
//
//		"tally.dev/tally"
//		"tally.dev/tally/logbook"
//	)
//
//	// Each order is a record in the "orders" stream of the book.
//	var orders = tally.NamedTag("orders")
//
//	func init() {
//		tally.Handle(func(order []byte) ([]byte, error) {
//			seqnum, err := logbook.Append([]tally.Tag{orders}, order)
//			if err != nil {
//				return nil, err
//			}
//			return []byte(strconv.FormatUint(uint64(seqnum), 10)), nil
//		})
//	}
//
//	// main is required by the Go compiler but never runs: the platform calls the
//	// handler registered by init.
//	func main() {}
//
// and `tally build .` in its directory makes the component to deploy (see the SDK's
// README.md for the commands it runs).
//
// Calls to the platform return an error that is an [*Error] when the platform refused
// or could not do the call (a lost conditional append, an unavailable log, a failed
// child, a malformed value): something the function can handle. The platform traps the
// invocation only for a broken guest or a host bug.
package tally
