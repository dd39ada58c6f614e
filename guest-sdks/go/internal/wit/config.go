package wit

// The layouts of wasi:config/store@0.2.0-rc.1, the function's settings.

// ConfigError is wasi:config/store's error variant as it crossed the boundary.
type ConfigError struct {
	// Upstream is true for the upstream case, false for io.
	Upstream bool
	Message  string
}

// decodeConfigError reads the error at 4 of a result: its case at 4, the string at 8.
func decodeConfigError(mem Memory, area []byte) *ConfigError {
	switch area[4] {
	case 0, 1:
		return &ConfigError{Upstream: area[4] == 0, Message: text(mem, area, 8)}
	default:
		badCase("wasi:config error", area[4])
		return nil
	}
}

// configResult reads a result's case at 0 and returns its error, nil for ok.
func configResult(mem Memory, area []byte) *ConfigError {
	switch area[0] {
	case 0:
		return nil
	case 1:
		return decodeConfigError(mem, area)
	default:
		badCase("result<_, wasi:config error>", area[0])
		return nil
	}
}

// DecodeConfigGet reads get's result<option<string>, error>, 16 bytes: the option's
// case at 4 and the string at 8.
func DecodeConfigGet(mem Memory, area []byte) (string, bool, *ConfigError) {
	if err := configResult(mem, area); err != nil {
		return "", false, err
	}
	value, ok := DecodeOptionString(mem, area[4:])
	return value, ok, nil
}

// DecodeConfigGetAll reads get-all's result<list<tuple<string, string>>, error>, 16
// bytes: the list's (pointer, length) at 4, 16 bytes an element.
func DecodeConfigGetAll(mem Memory, area []byte) ([][2]string, *ConfigError) {
	if err := configResult(mem, area); err != nil {
		return nil, err
	}
	n := u32(area, 8)
	pairs := make([][2]string, n)
	if n == 0 {
		return pairs, nil
	}
	raw := mem.Bytes(u32(area, 4), n*16)
	for i := range pairs {
		pairs[i] = [2]string{text(mem, raw[i*16:], 0), text(mem, raw[i*16:], 8)}
	}
	return pairs, nil
}
