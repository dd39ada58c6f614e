"""The integer helpers' parsing, with the Rust SDK's vectors and error text."""

import pytest

import tally
from tally.state import _parse_i64

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def not_i64(shown: str) -> str:
    return f'invalid argument: the value of key "alice" in table "accounts" is not a decimal i64: "{shown}"'


@pytest.mark.parametrize("value", [0, 1, -1, 42, I64_MIN, I64_MAX])
def test_parse_i64_reads_what_put_i64_writes(value):
    assert _parse_i64("accounts", b"alice", str(value).encode()) == value


@pytest.mark.parametrize(("text", "value"), [(b"+5", 5), (b"-0", 0), (b"007", 7), (b"0" * 5000 + b"1", 1)])
def test_parse_i64_reads_what_rust_reads(text, value):
    assert _parse_i64("accounts", b"alice", text) == value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (b"", ""),
        (b" 1", " 1"),
        (b"1\n", "1\\n"),
        (b"1.5", "1.5"),
        (b"9223372036854775808", "9223372036854775808"),
        (b"-9223372036854775809", "-9223372036854775809"),
        (b"\xff", "\\xff"),
        (b"x" * 33, "x" * 32 + "..."),
        (b"x" * 32, "x" * 32),
        (b"1_000", "1_000"),
        (b"+", "+"),
        (b"-", "-"),
        (b"+-1", "+-1"),
        ("\u0661".encode(), "\\xd9\\xa1"),  # a digit to Python's int(), not to Rust
        (b"'\"\\\t\r\x00\x7f", "\\'\\\"\\\\\\t\\r\\x00\\x7f"),
    ],
)
def test_parse_i64_refuses_anything_else(value, shown):
    with pytest.raises(tally.InvalidArgument) as raised:
        _parse_i64("accounts", b"alice", value)
    assert str(raised.value) == not_i64(shown)


def test_parse_i64_escapes_the_key():
    with pytest.raises(tally.InvalidArgument) as raised:
        _parse_i64("t", b'a"\n\xc3\xa9', b"x")
    assert str(raised.value) == 'invalid argument: the value of key "a\\"\\n\\xc3\\xa9" in table "t" is not a decimal i64: "x"'
