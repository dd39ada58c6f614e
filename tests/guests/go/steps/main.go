// The steps test guest in Go: tests/guests/STEPS.md, whose reference is the Rust guest
// tests/guests/steps. The host's tests give every language's guest the same inputs and
// compare the outputs byte for byte, so the messages below reproduce the Rust guest's,
// including Rust's Debug quoting ({:?}) and its lossy UTF-8 decoding. One difference
// remains: debug uses Go's Unicode tables (Unicode 15), so a character assigned or
// reclassified since then is quoted differently from Rust's in an error message.
package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"tally.dev/tally"
	"tally.dev/tally/invocation"
	"tally.dev/tally/invoke"
	"tally.dev/tally/locks"
	"tally.dev/tally/logbook"
	"tally.dev/tally/objects"
	"tally.dev/tally/queues"
	"tally.dev/tally/state"
)

func init() {
	tally.Handle(handle)
}

// main is required by the Go compiler, but a Tally function is a library: the
// platform calls the handler declared in init, and main never runs.
func main() {}

func handle(input []byte) ([]byte, error) {
	if !utf8.Valid(input) {
		return nil, errors.New("the input is not UTF-8")
	}
	text := string(input)
	words := strings.Fields(text)
	switch {
	case len(words) == 2 && words[0] == "run":
		return run(words[1], 0)
	case len(words) == 3 && words[0] == "run":
		ms, ok := parseU64(words[2])
		if !ok {
			return nil, errors.New("sleep_ms " + debug(words[2]) + " is not a u64")
		}
		return run(words[1], millis(ms))
	case len(words) == 2 && words[0] == "child":
		c, err := increment(words[1], "c")
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, c, 10), nil
	case len(words) >= 1 && words[0] == "script":
		return script(strings.TrimPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), "script"))
	case len(words) == 3 && words[0] == "read":
		value, ok, err := state.Get(words[1], words[2])
		if err != nil {
			return nil, err
		}
		if !ok {
			return []byte("none"), nil
		}
		return value, nil
	default:
		return nil, errors.New("expected `run <table> [sleep_ms]`, `child <table>` or `read <table> <key>`, found " + debug(text))
	}
}

// run takes the four steps of run, with a pause between them if pause is not 0.
func run(table string, pause time.Duration) ([]byte, error) {
	a, err := increment(table, "a")
	if err != nil {
		return nil, err
	}
	time.Sleep(pause)

	// Calling the name this function was deployed under keeps the test independent of
	// how it is deployed.
	output, err := invoke.Call(invocation.FunctionName(), []byte("child "+table))
	if err != nil {
		return nil, err
	}
	c, err := strconv.ParseInt(string(output), 10, 64)
	if err != nil || !utf8.Valid(output) {
		return nil, errors.New("the child returned " + debug(lossy(output)) + ", not a decimal i64")
	}
	time.Sleep(pause)

	b, err := increment(table, "b")
	if err != nil {
		return nil, err
	}
	time.Sleep(pause)

	if err := state.Put(table, "tmp", "x"); err != nil {
		return nil, err
	}
	if err := state.Delete(table, "tmp"); err != nil {
		return nil, err
	}
	return []byte("a=" + itoa(a) + " b=" + itoa(b) + " c=" + itoa(c)), nil
}

// script runs a ;-separated script of ops (STEPS.md).
func script(ops string) ([]byte, error) {
	var results []string
	for _, op := range strings.Split(ops, ";") {
		op = strings.TrimSpace(op)
		if op == "" {
			continue
		}
		fields := strings.Fields(op)
		words := make([]string, len(fields))
		for i, word := range fields {
			var err error
			if words[i], err = substitute(word, results); err != nil {
				return nil, err
			}
		}
		result, err := runOp(op, words)
		if err != nil {
			return nil, err
		}
		results = append(results, result)
	}
	return []byte(strings.Join(results, ",")), nil
}

// runOp runs one op of a script, whose words are substituted, and returns its result.
// A returned error fails the whole script.
func runOp(op string, words []string) (string, error) {
	n := len(words)
	switch {
	case n == 3 && words[0] == "get":
		value, ok, err := state.Get(words[1], words[2])
		if err != nil {
			return "", err
		}
		if !ok {
			return "none", nil
		}
		return lossy(value), nil
	case n == 4 && words[0] == "put":
		if err := state.Put(words[1], words[2], words[3]); err != nil {
			return "", err
		}
		return "ok", nil
	case n == 3 && words[0] == "del":
		if err := state.Delete(words[1], words[2]); err != nil {
			return "", err
		}
		return "ok", nil
	case n == 3 && words[0] == "inc":
		value, err := increment(words[1], words[2])
		if err != nil {
			return "", err
		}
		return itoa(value), nil
	case n == 3 && words[0] == "child":
		output, err := invoke.Call(invocation.FunctionName(), []byte("script inc "+words[1]+" "+words[2]))
		if err != nil {
			return "", err
		}
		return lossy(output), nil
	case n >= 2 && words[0] == "call":
		output, err := invoke.Call(words[1], []byte(strings.Join(words[2:], " ")))
		return reported(lossy(output), err), nil
	case n == 3 && words[0] == "append":
		seqnum, err := logbook.Append(tags(words[1]), []byte(words[2]))
		return reported(seqnum.String(), err), nil
	case n == 3 && words[0] == "rawappend":
		tag, ok := parseU64(words[1])
		if !ok {
			return "", errors.New(debug(words[1]) + " is not a tag number")
		}
		seqnum, err := logbook.Append([]tally.Tag{tally.Tag(tag)}, []byte(words[2]))
		return reported(seqnum.String(), err), nil
	case n == 4 && words[0] == "cond":
		position, ok := parseU64(words[2])
		if !ok {
			return "", errors.New(debug(words[2]) + " is not a position")
		}
		tag := named(words[1])
		var tags []tally.Tag
		if tag != tally.TagAll {
			tags = []tally.Tag{tag}
		}
		seqnum, err := logbook.CondAppend(tags, []byte(words[3]), tag, position)
		return reported(seqnum.String(), err), nil
	case n == 3 && words[0] == "next":
		from, err := seqnum(words[2])
		if err != nil {
			return "", err
		}
		record, err := logbook.ReadNext(named(words[1]), from)
		return reported(shown(record), err), nil
	case n == 3 && words[0] == "prev":
		upto, err := seqnum(words[2])
		if err != nil {
			return "", err
		}
		record, err := logbook.ReadPrev(named(words[1]), upto)
		return reported(shown(record), err), nil
	case n == 2 && words[0] == "tail":
		record, err := logbook.CheckTail(named(words[1]))
		return reported(shown(record), err), nil
	case n == 3 && words[0] == "tags":
		from, err := seqnum(words[2])
		if err != nil {
			return "", err
		}
		record, err := logbook.ReadNext(named(words[1]), from)
		return reported(shownTags(record), err), nil
	case n == 3 && words[0] == "aux":
		at, err := seqnum(words[1])
		if err != nil {
			return "", err
		}
		return reported("ok", logbook.SetAuxData(at, []byte(words[2]))), nil
	case n == 3 && words[0] == "trim":
		before, err := seqnum(words[2])
		if err != nil {
			return "", err
		}
		return reported("ok", logbook.Trim(named(words[1]), before)), nil
	case n == 2 && words[0] == "trim0":
		before, err := seqnum(words[1])
		if err != nil {
			return "", err
		}
		return reported("ok", logbook.Trim(tally.TagAll, before)), nil
	case n == 2 && words[0] == "tag":
		return named(words[1]).String(), nil
	case n == 1 && words[0] == "ctx":
		return invocation.FunctionName() + "/" + strconv.FormatUint(invocation.BookID(), 10) + "/" +
			strconv.FormatUint(uint64(invocation.Attempt()), 10), nil
	case n == 1 && words[0] == "id":
		return invocation.ID(), nil
	case n == 2 && words[0] == "sleep":
		ms, ok := parseU64(words[1])
		if !ok {
			return "", errors.New("sleep " + debug(words[1]) + ": not a u64")
		}
		time.Sleep(millis(ms))
		return "ok", nil
	case n == 2 && words[0] == "nap":
		ms, ok := parseU64(words[1])
		if !ok {
			return "", errors.New("nap " + debug(words[1]) + ": not a u64")
		}
		return reported("ok", invocation.Sleep(millis(ms))), nil
	case n == 1 && words[0] == "promise":
		return reported(invocation.PromiseCreate()), nil
	case n == 2 && words[0] == "await":
		value, err := invocation.PromiseAwait(words[1])
		return reported(lossy(value), err), nil
	case n == 3 && words[0] == "await":
		ms, ok := parseU64(words[2])
		if !ok {
			return "", errors.New("await " + debug(words[2]) + ": not a u64")
		}
		value, err := invocation.PromiseAwaitTimeout(words[1], millis(ms))
		return reported(lossy(value), err), nil
	case n == 3 && words[0] == "oget":
		json, ok, err := objects.Get(words[1], pointer(words[2]))
		if err == nil && !ok {
			json = "none"
		}
		return reported(json, err), nil
	case n == 4 && words[0] == "oset":
		return reported("ok", objects.Set(words[1], pointer(words[2]), words[3])), nil
	case n == 4 && words[0] == "oinc":
		by, err := strconv.ParseInt(words[3], 10, 64)
		if err != nil {
			return "", errors.New("oinc " + debug(words[3]) + ": not an i64")
		}
		return reported("ok", objects.Increment(words[1], pointer(words[2]), by)), nil
	case n == 4 && words[0] == "opush":
		return reported("ok", objects.Push(words[1], pointer(words[2]), words[3])), nil
	case n == 3 && words[0] == "orm":
		return reported("ok", objects.Remove(words[1], pointer(words[2]))), nil
	case n == 1 && words[0] == "begin":
		return reported("ok", objects.Begin()), nil
	case n == 1 && words[0] == "beginro":
		return reported("ok", objects.BeginReadOnly()), nil
	case n == 1 && words[0] == "commit":
		committed, err := objects.Commit()
		result := "conflict"
		if committed {
			result = "committed"
		}
		return reported(result, err), nil
	case n == 1 && words[0] == "abort":
		return reported("ok", objects.Abort()), nil
	case n == 3 && words[0] == "qpush":
		return reported("ok", queues.Push(words[1], []byte(words[2]))), nil
	case n == 3 && words[0] == "qpop":
		ms, ok := parseU64(words[2])
		if !ok {
			return "", errors.New("qpop " + debug(words[2]) + ": not a u64")
		}
		message, ok, err := queues.Pop(words[1], millis(ms))
		if err == nil && !ok {
			return "none", nil
		}
		return reported(lossy(message), err), nil
	case n == 4 && words[0] == "qpopn":
		count, ok := parseU64(words[2])
		if !ok {
			return "", errors.New("qpopn " + debug(words[2]) + ": not a u64")
		}
		ms, ok := parseU64(words[3])
		if !ok {
			return "", errors.New("qpopn " + debug(words[3]) + ": not a u64")
		}
		messages, err := queues.PopMany(words[1], int(min(count, 1<<32-1)), millis(ms))
		if err == nil && len(messages) == 0 {
			return "none", nil
		}
		texts := make([]string, len(messages))
		for i, m := range messages {
			texts[i] = lossy(m)
		}
		return reported(strings.Join(texts, "+"), err), nil
	case n == 3 && words[0] == "lock":
		ms, ok := parseU64(words[2])
		if !ok {
			return "", errors.New("lock " + debug(words[2]) + ": not a u64")
		}
		acquired, err := locks.Acquire(words[1], millis(ms))
		return reported(strconv.FormatBool(acquired), err), nil
	case n == 2 && words[0] == "unlock":
		return reported("ok", locks.Release(words[1])), nil
	case n == 1 && words[0] == "key":
		if key, ok := invocation.Key(); ok {
			return key, nil
		}
		return "none", nil
	case n >= 2 && words[0] == "chain":
		return chain(words[1], words[2:])
	case n >= 1 && words[0] == "fail":
		return "", errors.New(strings.Join(words[1:], " "))
	case n == 1 && words[0] == "crash":
		panic("crash requested by the script")
	default:
		return "", errors.New("unknown script op " + debug(op))
	}
}

// chain runs one link of a chain of functions on one book (STEPS.md): appends this
// function's name to the stream of name once, counts itself in table chain, and calls
// the next link.
func chain(name string, rest []string) (string, error) {
	tag := named(name)
	me := invocation.FunctionName()
	before, err := stream(tag)
	if err != nil {
		return "", err
	}
	mine := len(before)
	for i, data := range before {
		if data == me {
			mine = i
			break
		}
	}
	seen := joined(before[:mine])
	if mine == len(before) {
		if _, err := logbook.CondAppend([]tally.Tag{tag}, []byte(me), tag, uint64(len(before))); err != nil {
			return reported("", err), nil
		}
	}
	if _, err := increment("chain", me); err != nil {
		return "", err
	}
	if len(rest) == 0 {
		return me + ":" + seen, nil
	}
	input := strings.TrimRightFunc("script chain "+name+" "+strings.Join(rest[1:], " "), unicode.IsSpace)
	output, err := invoke.Call(rest[0], []byte(input))
	if err != nil {
		return reported("", err), nil
	}
	after, err := stream(tag)
	if err != nil {
		return "", err
	}
	return me + ":" + seen + " > " + lossy(output) + " < " + joined(after), nil
}

// stream returns the data of every record in a stream, in order.
func stream(tag tally.Tag) ([]string, error) {
	var records []string
	for next, ok := tally.SeqNumMin, true; ok; {
		record, err := logbook.ReadNext(tag, next)
		if err != nil {
			return nil, err
		}
		if record == nil {
			break
		}
		records = append(records, lossy(record.Data))
		next, ok = record.SeqNum.Next()
	}
	return records, nil
}

// joined returns stream data joined by +, - for none.
func joined(data []string) string {
	if len(data) == 0 {
		return "-"
	}
	return strings.Join(data, "+")
}

// substitute returns word, or for $N the result of op N so far.
func substitute(word string, results []string) (string, error) {
	n, ok := strings.CutPrefix(word, "$")
	if !ok {
		return word, nil
	}
	if i, ok := parseU64(n); ok && i >= 1 && i <= uint64(len(results)) {
		return results[i-1], nil
	}
	return "", errors.New(word + ": no such earlier op (ops count from 1)")
}

// named returns the tag of a name, with * for the whole book.
func named(name string) tally.Tag {
	if name == "*" {
		return tally.TagAll
	}
	return tally.NamedTag(name)
}

// pointer returns the JSON pointer of an object op, with . for "", the whole object.
func pointer(word string) string {
	if word == "." {
		return ""
	}
	return word
}

// tags returns the tags of a comma-separated list of names, - for none.
func tags(names string) []tally.Tag {
	if names == "-" {
		return nil
	}
	var tags []tally.Tag
	for _, name := range strings.Split(names, ",") {
		tags = append(tags, named(name))
	}
	return tags
}

func seqnum(word string) (tally.SeqNum, error) {
	if word == "max" {
		return tally.SeqNumMax, nil
	}
	n, ok := parseU64(word)
	if !ok {
		return 0, errors.New(debug(word) + " is not a seqnum")
	}
	return tally.SeqNum(n), nil
}

// shown returns a record read by next, prev or tail: <seqnum>:<data>:<aux or none>.
func shown(record *logbook.Record) string {
	if record == nil {
		return "none"
	}
	aux := "none"
	if record.Aux != nil {
		aux = lossy(record.Aux)
	}
	return record.SeqNum.String() + ":" + lossy(record.Data) + ":" + aux
}

// shownTags returns the tags of a record read by tags: decimal, joined by +.
func shownTags(record *logbook.Record) string {
	switch {
	case record == nil:
		return "none"
	case len(record.Tags) == 0:
		return "-"
	}
	tags := make([]string, len(record.Tags))
	for i, tag := range record.Tags {
		tags[i] = tag.String()
	}
	return strings.Join(tags, "+")
}

// reported returns an op's result, or a platform error as error:<code>.
func reported(result string, err error) string {
	if err == nil {
		return result
	}
	var e *tally.Error
	if !errors.As(err, &e) {
		panic("not a platform error: " + err.Error())
	}
	switch e.Kind {
	case tally.InvalidArgument:
		return "error:invalid_argument"
	case tally.NotFound:
		return "error:not_found"
	case tally.Conflict:
		if e.HolderKnown {
			return "error:conflict:" + e.Holder.String()
		}
		return "error:conflict:none"
	case tally.Unavailable:
		return "error:unavailable"
	case tally.TooLarge:
		return "error:too_large"
	case tally.Timeout:
		return "error:timeout"
	case tally.Failed:
		return "error:failed"
	}
	panic("unknown error kind " + e.Kind.String())
}

// increment adds 1 to the counter key in table and returns its new value.
func increment(table, key string) (int64, error) {
	value, _, err := state.GetInt64(table, key)
	if err != nil {
		return 0, err
	}
	if value == math.MaxInt64 {
		return 0, errors.New("the counter " + debug(key) + " in table " + debug(table) + " overflows an i64")
	}
	value++
	if err := state.PutInt64(table, key, value); err != nil {
		return 0, err
	}
	return value, nil
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

// millis returns ms milliseconds, at most the longest time.Duration.
func millis(ms uint64) time.Duration {
	if ms > math.MaxInt64/uint64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// parseU64 reads a u64 as Rust's u64::from_str does: decimal digits after an optional
// +, and nothing else.
func parseU64(s string) (uint64, bool) {
	digits := s
	if len(s) > 1 && s[0] == '+' {
		digits = s[1:]
	}
	// strconv.ParseUint in base 10 accepts digits only, no sign and no underscores.
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// debug quotes s as Rust's Debug for str ({:?}) does: \0 \t \r \n \\ \" by name, and
// grapheme extenders and characters that are not printable (controls, format
// characters, unassigned code points, separators other than the space) as \u{X}.
func debug(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case 0:
			b.WriteString(`\0`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		default:
			if unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend) || !unicode.IsPrint(r) {
				b.WriteString(`\u{`)
				b.WriteString(strconv.FormatUint(uint64(r), 16))
				b.WriteByte('}')
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// lossy decodes b as UTF-8 the way Rust's String::from_utf8_lossy does: each maximal
// prefix of a valid sequence that is cut short, and each byte that cannot start one,
// becomes one U+FFFD. (Go's own decoding replaces every bad byte, which differs.)
func lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	continuation := func(c byte) bool { return c&0xC0 == 0x80 }
	var out strings.Builder
	for i := 0; i < len(b); {
		start, first := i, b[i]
		i++
		if first < 0x80 {
			out.WriteByte(first)
			continue
		}
		valid := false
		switch second := at(i); {
		case first >= 0xC2 && first <= 0xDF:
			if continuation(second) {
				i++
				valid = true
			}
		case first >= 0xE0 && first <= 0xEF:
			if first == 0xE0 && second >= 0xA0 && second <= 0xBF ||
				first >= 0xE1 && first <= 0xEC && continuation(second) ||
				first == 0xED && second >= 0x80 && second <= 0x9F ||
				first >= 0xEE && continuation(second) {
				i++
				if continuation(at(i)) {
					i++
					valid = true
				}
			}
		case first >= 0xF0 && first <= 0xF4:
			if first == 0xF0 && second >= 0x90 && second <= 0xBF ||
				first >= 0xF1 && first <= 0xF3 && continuation(second) ||
				first == 0xF4 && second >= 0x80 && second <= 0x8F {
				i++
				if continuation(at(i)) {
					i++
					if continuation(at(i)) {
						i++
						valid = true
					}
				}
			}
		}
		if valid {
			out.Write(b[start:i])
		} else {
			out.WriteString("\uFFFD")
		}
	}
	return out.String()
}
