// {{name}}: a Tally function that returns its input unchanged.
package main

import "tally.dev/tally"

func init() {
	tally.Handle(func(input []byte) ([]byte, error) {
		return input, nil
	})
}

// main is required by the Go compiler, but a Tally function is a library: the
// platform calls the handler declared in init, and main never runs.
func main() {}
