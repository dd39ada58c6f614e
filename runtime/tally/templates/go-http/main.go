// {{name}}: a Tally HTTP function that answers with the request's method and path.
package main

import (
	"fmt"
	"net/http"

	tallyhttp "tally.dev/tally/http"
)

func init() {
	tallyhttp.HandleFunc(func(w http.ResponseWriter, r *http.Request) {
		// State, the log and calls work here as in any function, e.g.
		//   visits, _, err := state.GetInt64("visits", r.URL.Path)   // tally.dev/tally/state
		// and so do calls out, to destinations allowed with `tally deploy --outbound`:
		//   resp, err := tallyhttp.Fetch("GET", "https://api.example.com/", nil, nil)
		// Settings (`tally deploy --config K=V`): config.Get("K") of tally.dev/tally/config.
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "hello from {{name}}: %s %s", r.Method, r.URL.Path)
	})
}

// main is required by the Go compiler, but a Tally function is a library: the
// platform calls the handler declared in init, and main never runs.
func main() {}
