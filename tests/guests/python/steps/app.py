"""A function of several exactly-once steps, for the host's crash-injection tests: a
crash at any point and a re-execution must leave each counter incremented once.

This is the Python guest of ``tests/guests/STEPS.md``, which the ``steps`` guest of every
SDK language implements (the Rust one, ``tests/guests/steps/src/lib.rs``, is the
reference): ``run``, ``child``, ``read`` and a ``script`` of ops over the SDK's calls, so
that the host's tests give every language the same inputs and compare the outputs byte
for byte. Hence the helpers below that split, trim, parse and quote text exactly as the
Rust reference does (Rust's Unicode whitespace, integer syntax and ``{:?}``), where
Python's own functions differ at the edges.
"""

from __future__ import annotations

import os
import re
import sys
import time
import unicodedata

from tally import (
    Conflict,
    Failed,
    InvalidArgument,
    NotFound,
    SeqNum,
    Tag,
    TallyError,
    Timeout,
    TooLarge,
    Unavailable,
    context,
    invoke,
    locks,
    log,
    objects,
    queues,
    state,
)


class GuestError(Exception):
    """Fails the handler with its message (the handler's error, HTTP 500
    ``function_error``)."""


def handle(input: bytes) -> bytes:
    """``run``, ``child``, ``read`` or ``script`` (STEPS.md)."""
    try:
        text = input.decode("utf-8")
    except UnicodeDecodeError:
        raise GuestError("the input is not UTF-8") from None
    words = split_whitespace(text)
    if len(words) == 2 and words[0] == "run":
        return run(words[1], None)
    if len(words) == 3 and words[0] == "run":
        sleep_ms = parse_uint(words[2], 64)
        if sleep_ms is None:
            raise GuestError(f"sleep_ms {debug(words[2])} is not a u64")
        return run(words[1], sleep_ms)
    if len(words) == 2 and words[0] == "child":
        return str(increment(words[1], "c")).encode()
    if words and words[0] == "script":
        return script(text.lstrip(WHITESPACE).removeprefix("script")).encode()
    if len(words) == 3 and words[0] == "read":
        value = platform(state.get, words[1], words[2])
        return b"none" if value is None else value
    raise GuestError(
        "expected `run <table> [sleep_ms]`, `child <table>` or `read <table> <key>`, "
        f"found {debug(text)}"
    )


def run(table: str, sleep_ms: int | None) -> bytes:
    """Takes the four steps of ``run``, with a pause between them if ``sleep_ms`` is given."""

    def pause() -> None:
        if sleep_ms is not None:
            sleep(sleep_ms)

    a = increment(table, "a")
    pause()

    # Calling the name this function was deployed under keeps the test independent of
    # how it is deployed.
    output = platform(invoke.call, context.function_name(), f"child {table}")
    try:
        c = parse_int(output.decode("utf-8"), 64)
    except UnicodeDecodeError:
        c = None
    if c is None:
        raise GuestError(f"the child returned {debug(lossy(output))}, not a decimal i64")
    pause()

    b = increment(table, "b")
    pause()

    platform(state.put, table, "tmp", "x")
    platform(state.delete, table, "tmp")

    return f"a={a} b={b} c={c}".encode()


def script(ops: str) -> str:
    """Runs a ``;``-separated script of ops (STEPS.md)."""
    results: list[str] = []
    for op in ops.split(";"):
        op = op.strip(WHITESPACE)
        if op:
            words = [substitute(word, results) for word in split_whitespace(op)]
            results.append(script_op(op, words))
    return ",".join(results)


def script_op(op: str, words: list[str]) -> str:
    """The result of one op, whose words are ``words`` after substitution."""
    name, args = words[0], words[1:]
    match name, len(args):
        case "get", 2:
            value = platform(state.get, args[0], args[1])
            return "none" if value is None else lossy(value)
        case "put", 3:
            platform(state.put, args[0], args[1], args[2])
            return "ok"
        case "del", 2:
            platform(state.delete, args[0], args[1])
            return "ok"
        case "inc", 2:
            return str(increment(args[0], args[1]))
        case "child", 2:
            output = platform(invoke.call, context.function_name(), f"script inc {args[0]} {args[1]}")
            return lossy(output)
        case "call", n if n >= 1:
            return reported(lambda: lossy(invoke.call(args[0], " ".join(args[1:]))))
        case "append", 2:
            return reported(lambda: str(log.append(tags(args[0]), args[1])))
        case "rawappend", 2:
            tag = parse_uint(args[0], 64)
            if tag is None:
                raise GuestError(f"{debug(args[0])} is not a tag number")
            return reported(lambda: str(log.append([Tag(tag)], args[1])))
        case "cond", 3:
            position = parse_uint(args[1], 64)
            if position is None:
                raise GuestError(f"{debug(args[1])} is not a position")
            tag = named(args[0])
            cond_tags = [] if tag == Tag.ALL else [tag]
            return reported(lambda: str(log.cond_append(cond_tags, args[2], tag, position)))
        case "next", 2:
            at = seqnum(args[1])
            return reported(lambda: shown(log.read_next(named(args[0]), at)))
        case "prev", 2:
            at = seqnum(args[1])
            return reported(lambda: shown(log.read_prev(named(args[0]), at)))
        case "tail", 1:
            return reported(lambda: shown(log.check_tail(named(args[0]))))
        case "tags", 2:
            at = seqnum(args[1])
            return reported(lambda: record_tags(log.read_next(named(args[0]), at)))
        case "aux", 2:
            at = seqnum(args[0])
            return reported(lambda: log.set_aux_data(at, args[1]) or "ok")
        case "trim", 2:
            at = seqnum(args[1])
            return reported(lambda: log.trim(named(args[0]), at) or "ok")
        case "trim0", 1:
            at = seqnum(args[0])
            return reported(lambda: log.trim(Tag.ALL, at) or "ok")
        case "tag", 1:
            return str(named(args[0]))
        case "ctx", 0:
            return f"{context.function_name()}/{context.book_id()}/{context.attempt()}"
        case "id", 0:
            return context.invocation_id()
        case "sleep", 1:
            ms = milliseconds("sleep", args[0])
            sleep(ms)
            return "ok"
        case "nap", 1:
            ms = milliseconds("nap", args[0])
            return reported(lambda: context.sleep(ms) or "ok")
        case "promise", 0:
            return reported(context.promise_create)
        case "await", 1:
            return reported(lambda: lossy(context.promise_await(args[0])))
        case "await", 2:
            ms = milliseconds("await", args[1])
            return reported(lambda: lossy(context.promise_await(args[0], ms)))
        case "oget", 2:
            return reported(lambda: none_or(objects.get(args[0], pointer(args[1]))))
        case "oset", 3:
            return reported(lambda: objects.set(args[0], pointer(args[1]), args[2]) or "ok")
        case "oinc", 3:
            by = parse_int(args[2], 64)
            if by is None:
                raise GuestError(f"oinc {debug(args[2])}: not an i64")
            return reported(lambda: objects.increment(args[0], pointer(args[1]), by) or "ok")
        case "opush", 3:
            return reported(lambda: objects.push(args[0], pointer(args[1]), args[2]) or "ok")
        case "orm", 2:
            return reported(lambda: objects.remove(args[0], pointer(args[1])) or "ok")
        case "begin", 0:
            return reported(lambda: objects.begin(read_only=False) or "ok")
        case "beginro", 0:
            return reported(lambda: objects.begin(read_only=True) or "ok")
        case "commit", 0:
            return reported(lambda: "committed" if objects.commit() else "conflict")
        case "abort", 0:
            return reported(lambda: objects.abort() or "ok")
        case "qpush", 2:
            return reported(lambda: queues.push(args[0], args[1]) or "ok")
        case "qpop", 2:
            ms = milliseconds("qpop", args[1])
            return reported(lambda: none_or(queues.pop(args[0], ms)))
        case "qpopn", 3:
            n = milliseconds("qpopn", args[1])
            ms = milliseconds("qpopn", args[2])
            return reported(lambda: "+".join(lossy(m) for m in queues.pop_many(args[0], min(n, 2**32 - 1), ms)) or "none")
        case "lock", 2:
            ms = milliseconds("lock", args[1])
            return reported(lambda: "true" if locks.acquire(args[0], ms) else "false")
        case "unlock", 1:
            return reported(lambda: locks.release(args[0]) or "ok")
        case "key", 0:
            return none_or(context.key())
        case "chain", n if n >= 1:
            return chain(args[0], args[1:])
        case "fail", _:
            raise GuestError(" ".join(args))
        case "crash", 0:
            # Python's own way of dying: abort() is a wasm `unreachable`, a trap.
            print("crash requested by the script", file=sys.stderr, flush=True)
            os.abort()
    raise GuestError(f"unknown script op {debug(op)}")


def chain(name: str, rest: list[str]) -> str:
    """One link of a chain of functions on one book (STEPS.md): appends this function's
    name to the stream of ``name`` once, counts itself in table ``chain``, and calls the
    next link."""
    tag = named(name)
    me = context.function_name()
    before = stream(tag)
    mine = before.index(me) if me in before else None
    seen = joined(before if mine is None else before[:mine])
    if mine is None:
        try:
            log.cond_append([tag], me, tag, len(before))
        except TallyError as error:
            return reported_error(error)
    increment("chain", me)
    if not rest:
        return f"{me}:{seen}"
    call_input = f"script chain {name} {' '.join(rest[1:])}".rstrip(WHITESPACE)
    try:
        output = lossy(invoke.call(rest[0], call_input))
    except TallyError as error:
        return reported_error(error)
    return f"{me}:{seen} > {output} < {joined(stream(tag))}"


def stream(tag: Tag) -> list[str]:
    """The data of every record in a stream, in order."""
    records: list[str] = []
    at: SeqNum | None = SeqNum.MIN
    while at is not None:
        record = platform(log.read_next, tag, at)
        if record is None:
            break
        records.append(lossy(record.data))
        at = record.seqnum.next()
    return records


def joined(data: list[str]) -> str:
    """Stream data joined by ``+``, ``-`` for none."""
    return "+".join(data) if data else "-"


def milliseconds(op: str, word: str) -> int:
    """The milliseconds of op ``op``, a u64 in decimal."""
    ms = parse_uint(word, 64)
    if ms is None:
        raise GuestError(f"{op} {debug(word)}: not a u64")
    return ms


def sleep(ms: int) -> None:
    """Sleeps ``ms`` milliseconds; past 10^12 (30 years), as good as forever, where
    ``time.sleep`` would raise ``OverflowError`` (the host's deadline ends both)."""
    time.sleep(min(ms, 10**12) / 1000)


def substitute(word: str, results: list[str]) -> str:
    """``word``, or for ``$N`` the result of op ``N`` so far."""
    if not word.startswith("$"):
        return word
    n = parse_uint(word[1:], 32)
    if n is None or not 1 <= n <= len(results):
        raise GuestError(f"{word}: no such earlier op (ops count from 1)")
    return results[n - 1]


def named(name: str) -> Tag:
    """The tag of a name, with ``*`` for the whole book."""
    return Tag.ALL if name == "*" else Tag.named(name)


def tags(names: str) -> list[Tag]:
    """The tags of a comma-separated list of names, ``-`` for none."""
    return [] if names == "-" else [named(name) for name in names.split(",")]


def seqnum(word: str) -> SeqNum:
    """A seqnum in decimal, or ``max`` for 2^64-1."""
    if word == "max":
        return SeqNum.MAX
    number = parse_uint(word, 64)
    if number is None:
        raise GuestError(f"{debug(word)} is not a seqnum")
    return SeqNum(number)


def shown(record: log.Record | None) -> str:
    """A record read by ``next``, ``prev`` or ``tail``: ``<seqnum>:<data>:<aux or none>``."""
    if record is None:
        return "none"
    aux = "none" if record.aux is None else lossy(record.aux)
    return f"{record.seqnum}:{lossy(record.data)}:{aux}"


def pointer(word: str) -> str:
    """A path of an object op: a JSON pointer, with ``.`` for ``""`` (the whole object)."""
    return "" if word == "." else word


def none_or(value: str | bytes | None) -> str:
    """A value read by ``oget``, ``qpop`` or ``key``: text as is, bytes as UTF-8 (lossy),
    ``none`` for nothing."""
    if value is None:
        return "none"
    return value if isinstance(value, str) else lossy(value)


def record_tags(record: log.Record | None) -> str:
    """The tags of a record read by ``tags``."""
    if record is None:
        return "none"
    if not record.tags:
        return "-"
    return "+".join(str(tag) for tag in record.tags)


# The code of each platform error in a result, `error:<code>`.
CODES = {
    InvalidArgument: "invalid_argument",
    NotFound: "not_found",
    Unavailable: "unavailable",
    TooLarge: "too_large",
    Timeout: "timeout",
    Failed: "failed",
}


def reported(op) -> str:
    """The result of ``op()``, with a platform error as ``error:<code>``."""
    try:
        return op()
    except TallyError as error:
        return reported_error(error)


def reported_error(error: TallyError) -> str:
    """A platform error as an op's result, ``error:<code>``."""
    if isinstance(error, Conflict):
        return f"error:conflict:{'none' if error.holder is None else error.holder}"
    return f"error:{CODES[type(error)]}"


def platform(call, *args):
    """``call(*args)``, with a platform error failing the handler with the error's text."""
    try:
        return call(*args)
    except TallyError as error:
        raise GuestError(str(error)) from None


def increment(table: str, key: str) -> int:
    """Adds 1 to the counter ``key`` in ``table`` and returns its new value."""
    value = (platform(state.get_i64, table, key) or 0) + 1
    if value > I64_MAX:
        raise GuestError(f"the counter {debug(key)} in table {debug(table)} overflows an i64")
    platform(state.put_i64, table, key, value)
    return value


# Text as Rust handles it, so that the outputs match the reference byte for byte.

I64_MAX = (1 << 63) - 1

# Rust's `char::is_whitespace` (Unicode White_Space); `str.split()` also splits on
# U+001C..U+001F.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
WHITESPACE_RUN = re.compile(f"[{WHITESPACE}]+")


def split_whitespace(text: str) -> list[str]:
    """Rust's ``str::split_whitespace``."""
    return [word for word in WHITESPACE_RUN.split(text) if word]


# What Rust's `FromStr` of the integer types accepts: a sign (only `+` when unsigned),
# then at least one ASCII digit.
UNSIGNED = re.compile(r"\+?([0-9]+)")
SIGNED = re.compile(r"([+-]?)([0-9]+)")


def parse_uint(word: str, bits: int) -> int | None:
    """Rust's ``u64::from_str`` (``u32`` for 32 bits); ``None`` where it fails."""
    match = UNSIGNED.fullmatch(word)
    return None if match is None else in_range(match[1], False, 0, (1 << bits) - 1)


def parse_int(word: str, bits: int) -> int | None:
    """Rust's ``i64::from_str`` (for 64 bits); ``None`` where it fails."""
    match = SIGNED.fullmatch(word)
    limit = 1 << (bits - 1)
    return None if match is None else in_range(match[2], match[1] == "-", -limit, limit - 1)


def in_range(digits: str, negative: bool, low: int, high: int) -> int | None:
    """The number of ``digits``, if it is from ``low`` to ``high``."""
    # Leading zeros are fine, however many: drop them before `int`, which refuses more
    # than 4300 digits.
    digits = digits.lstrip("0") or "0"
    if len(digits) > 20:
        return None
    number = -int(digits) if negative else int(digits)
    return number if low <= number <= high else None


def lossy(data: bytes) -> str:
    """Rust's ``String::from_utf8_lossy``."""
    return data.decode("utf-8", "replace")


DEBUG_ESCAPES = {"\0": "\\0", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\", '"': '\\"'}
# Printable characters that Rust's `{:?}` still escapes (checked against Rust 1.99):
# the Grapheme_Extend ones outside categories Mn and Me, and the Hangul fillers.
ESCAPED_PRINTABLE = frozenset(
    {
        0x9BE, 0x9D7, 0xB3E, 0xB57, 0xBBE, 0xBD7, 0xCC0, 0xCC2, 0xCC7, 0xCC8, 0xCCA, 0xCCB,
        0xCD5, 0xCD6, 0xD3E, 0xD57, 0xDCF, 0xDDF, 0x115F, 0x1160, 0x1715, 0x1734, 0x1B35,
        0x1B3B, 0x1B3D, 0x1B43, 0x1B44, 0x1BAA, 0x1BF2, 0x1BF3, 0x302E, 0x302F, 0x3164,
        0xA953, 0xA9C0, 0xFFA0, 0x111C0, 0x11235, 0x1133E, 0x1134D, 0x11357, 0x114B0,
        0x114BD, 0x115AF, 0x116B6, 0x11930, 0x1193D, 0x16FF0, 0x16FF1, 0x1D165, 0x1D166,
        0x1D16D, 0x1D16E, 0x1D16F, 0x1D170, 0x1D171, 0x1D172,
    }
)


def debug(text: str) -> str:
    """Rust's ``{:?}`` of a ``str``."""
    out = ['"']
    for char in text:
        if char in DEBUG_ESCAPES:
            out.append(DEBUG_ESCAPES[char])
        elif char < "\x7f" and char >= " ":
            out.append(char)
        elif (
            unicodedata.category(char) in ("Mn", "Me")
            or ord(char) in ESCAPED_PRINTABLE
            or not char.isprintable()
        ):
            out.append(f"\\u{{{ord(char):x}}}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
