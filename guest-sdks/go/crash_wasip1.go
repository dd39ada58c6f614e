//go:build wasip1

package tally

import "syscall"

// writeStderr writes text to the guest's stderr (with package syscall, which a Wasm
// build links anyway, rather than package os).
func writeStderr(text string) {
	_, _ = syscall.Write(2, []byte(text))
}

// die ends the instance as a Go program that panics does, with exit status 2; the host
// reports a trap.
func die(any) {
	syscall.Exit(2)
}
