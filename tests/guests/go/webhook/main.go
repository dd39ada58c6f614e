// The webhook guest: checks an HMAC-SHA256 signature of the body, forwards the body
// upstream, counts the deliveries in state and answers with the count and what the
// upstream said. The host's tests drive every language's webhook the same way.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"tally.dev/tally/config"
	tallyhttp "tally.dev/tally/http"
	"tally.dev/tally/state"
)

func init() {
	tallyhttp.HandleFunc(webhook)
}

func webhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		reply(w, http.StatusBadRequest, err.Error())
		return
	}
	secret, _, err := config.Get("webhook_secret")
	if err != nil {
		reply(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !signed(body, r.Header.Get("X-Signature"), secret) {
		reply(w, http.StatusUnauthorized, "bad signature")
		return
	}
	upstream, ok, err := config.Get("upstream")
	if err != nil {
		reply(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !ok {
		reply(w, http.StatusInternalServerError, "the setting upstream is missing")
		return
	}
	resp, err := tallyhttp.Fetch(http.MethodPost, upstream,
		http.Header{"Content-Type": {"application/octet-stream"}}, body)
	if err != nil {
		reply(w, http.StatusBadGateway, err.Error())
		return
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		reply(w, http.StatusBadGateway, "upstream answered "+strconv.Itoa(resp.StatusCode))
		return
	}
	count, err := record(resp.Body)
	if err != nil {
		reply(w, http.StatusInternalServerError, err.Error())
		return
	}
	reply(w, http.StatusCreated, fmt.Sprintf("%d %s", count, resp.Body))
}

// reply answers status with text as it is (http.Error would add a newline).
func reply(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	io.WriteString(w, text)
}

// signed says whether signature is "sha256=" and the hex HMAC-SHA256 of body under
// secret, compared in constant time.
func signed(body []byte, signature, secret string) bool {
	given, ok := strings.CutPrefix(signature, "sha256=")
	if !ok {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(given), []byte(want))
}

// record counts the delivery in table hooks and keeps the upstream's answer; it
// returns the new count.
func record(answer []byte) (int64, error) {
	count, _, err := state.GetInt64("hooks", "count")
	if err != nil {
		return 0, err
	}
	count++
	if err := state.PutInt64("hooks", "count", count); err != nil {
		return 0, err
	}
	return count, state.Put("hooks", "last", answer)
}

// main is required by the Go compiler but never runs: the platform calls the handler
// declared in init.
func main() {}
