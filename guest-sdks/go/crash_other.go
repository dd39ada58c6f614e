//go:build !wasip1

package tally

import "os"

// writeStderr writes text to stderr.
func writeStderr(text string) {
	_, _ = os.Stderr.WriteString(text)
}

// die resumes the panic outside Wasm, where there is no instance to end.
func die(value any) {
	panic(value)
}
