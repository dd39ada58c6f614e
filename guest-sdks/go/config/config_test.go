package config

import (
	"testing"

	"tally.dev/tally/internal/wit"
)

func TestErrors(t *testing.T) {
	if err := configErr(nil); err != nil {
		t.Errorf("nil: %#v", err)
	}
	if got := configErr(&wit.ConfigError{Upstream: true, Message: "down"}).Error(); got != "config: upstream: down" {
		t.Errorf("upstream: %q", got)
	}
	if got := configErr(&wit.ConfigError{Message: "disk"}).Error(); got != "config: io: disk" {
		t.Errorf("io: %q", got)
	}
}
