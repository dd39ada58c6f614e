// Package config reads the function's settings: wasi:config/store, the values set at
// deploy (tally deploy --config K=V --secret K=V) or later (tally config set). It works
// in both worlds, function and http-function.
//
//	upstream, ok, err := config.Get("upstream")
//
// A secret reads like any other setting; keep it out of logs and error messages. A
// re-execution of the invocation reads what its first execution read, so a setting
// changed meanwhile does not change a replay.
package config

import "tally.dev/tally/internal/wit"

// Error is a failure of the settings store: Upstream for the store's own failure, else
// an I/O failure.
type Error struct {
	Upstream bool
	Message  string
}

func (e *Error) Error() string {
	if e.Upstream {
		return "config: upstream: " + e.Message
	}
	return "config: io: " + e.Message
}

// Get returns the setting key, and false when it is not set.
func Get(key string) (string, bool, error) {
	value, ok, err := wit.ConfigGet(key)
	return value, ok, configErr(err)
}

// All returns every setting, by key.
func All() (map[string]string, error) {
	pairs, err := wit.ConfigGetAll()
	if err != nil {
		return nil, configErr(err)
	}
	all := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		all[pair[0]] = pair[1]
	}
	return all, nil
}

// configErr returns the *Error for a store error, or a nil error for nil (never a typed
// nil).
func configErr(e *wit.ConfigError) error {
	if e == nil {
		return nil
	}
	return &Error{Upstream: e.Upstream, Message: e.Message}
}
