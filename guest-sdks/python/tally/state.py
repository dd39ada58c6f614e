"""Durable key-value state with exactly-once semantics (Halfmoon, SOSP '23).

Values live under byte-string keys in named tables of the invocation's book. Every
operation is exactly-once across re-executions of the invocation: when the platform runs
a function again after a crash, with the same
:func:`~tally.context.invocation_id`, each :func:`get` returns what it returned the
first time and each :func:`put` and :func:`delete` takes effect once. Operations are
told apart by their order within the invocation, so a function should make the same
calls in the same order when it runs again: decide from the input and from what the
platform returns, not from clocks or randomness.

Each table has a protocol, chosen at deploy or in the node's configuration:
``read-optimized`` (log-free reads), ``write-optimized`` (log-free writes),
``symmetric`` (logs both), ``unsafe`` (no logging, no guarantee) or ``auto``. The
protocol changes the cost of each operation, not the code that calls it.

Operations are not transactions: two invocations that read and then write the same key
concurrently may lose an update.

Table names are 1 to 64 of ``a-z 0-9 - _``; keys are 1 to 1024 bytes; values are at
most 512 KiB. Anything else is refused with :class:`~tally.InvalidArgument` or
:class:`~tally.TooLarge`. Keys and values are ``bytes``; a ``str`` is accepted too and
sent as UTF-8.

>>> from tally import state
>>> # Adds 1 to the visits of a page, once per invocation however often it runs.
>>> visits = (state.get_i64("pages", "index.html") or 0) + 1   # doctest: +SKIP
>>> state.put_i64("pages", "index.html", visits)              # doctest: +SKIP
"""

from __future__ import annotations

import re

from . import _bindings
from ._convert import I64_MAX, I64_MIN, BytesLike, to_bytes, to_i64, to_str
from ._errors import InvalidArgument, from_wit

__all__ = ["delete", "get", "get_i64", "put", "put_i64"]


def get(table: str, key: BytesLike) -> bytes | None:
    """The value of ``key`` in ``table``, or ``None`` if the key is absent."""
    table = to_str(table, "table")
    key = to_bytes(key, "key")
    try:
        value = _bindings.state.get(table, key)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return None if value is None else bytes(value)


def put(table: str, key: BytesLike, value: BytesLike) -> None:
    """Sets the value of ``key`` in ``table`` to ``value``."""
    table = to_str(table, "table")
    key = to_bytes(key, "key")
    value = to_bytes(value, "value")
    try:
        _bindings.state.put(table, key, value)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def delete(table: str, key: BytesLike) -> None:
    """Removes ``key`` from ``table``; nothing happens if it is absent."""
    table = to_str(table, "table")
    key = to_bytes(key, "key")
    try:
        _bindings.state.delete(table, key)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def get_i64(table: str, key: BytesLike) -> int | None:
    """The value of ``key`` in ``table`` read as an integer in decimal text, as
    :func:`put_i64` writes it, or ``None`` if the key is absent.

    A value that is not a decimal ``i64`` (an optional ``+`` or ``-`` and ASCII digits,
    from -2^63 to 2^63-1, nothing else) raises :class:`~tally.InvalidArgument`.
    """
    key = to_bytes(key, "key")
    value = get(table, key)
    return None if value is None else _parse_i64(table, key, value)


def put_i64(table: str, key: BytesLike, value: int) -> None:
    """Sets the value of ``key`` in ``table`` to the integer ``value`` in decimal text,
    which :func:`get_i64` reads back and other languages can read too.

    ``value`` must be an ``int`` from -2^63 to 2^63-1 (``ValueError`` otherwise).
    """
    put(table, key, str(to_i64(value, "value")))


# What Rust's `i64::from_str` accepts: a sign, then at least one ASCII digit.
_DECIMAL = re.compile(rb"[+-]?[0-9]+")


def _parse_i64(table: str, key: bytes, value: bytes) -> int:
    """Reads a value written by :func:`put_i64`; ``table`` and ``key`` only name it in the
    error, whose text is the Rust SDK's."""
    if _DECIMAL.fullmatch(value):
        negative = value.startswith(b"-")
        # Leading zeros are fine, however many: drop them before `int`, which refuses
        # more than 4300 digits.
        digits = value.lstrip(b"+-").lstrip(b"0") or b"0"
        if len(digits) <= 19:
            number = -int(digits) if negative else int(digits)
            if I64_MIN <= number <= I64_MAX:
                return number
    raise InvalidArgument(
        f'the value of key "{_escape_ascii(key)}" in table {_debug_str(table)} '
        f'is not a decimal i64: "{_preview(value)}"'
    )


_PREVIEW_BYTES_MAX = 32


def _preview(value: bytes) -> str:
    """The start of a value, escaped, for an error message: a value may be up to 512 KiB."""
    if len(value) > _PREVIEW_BYTES_MAX:
        return _escape_ascii(value[:_PREVIEW_BYTES_MAX]) + "..."
    return _escape_ascii(value)


# Rust's `<[u8]>::escape_ascii`: printable ASCII as is except backslash and quotes,
# the usual backslash escapes, and `\xNN` for everything else.
_ESCAPED_BYTE = [
    {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}.get(
        byte, chr(byte) if 0x20 <= byte < 0x7F else f"\\x{byte:02x}"
    )
    for byte in range(256)
]


def _escape_ascii(data: bytes) -> str:
    """``data`` escaped like Rust's ``escape_ascii``."""
    return "".join(_ESCAPED_BYTE[byte] for byte in data)


def _debug_str(text: str) -> str:
    """``text`` quoted like Rust's ``{:?}`` (enough for a table name, which the platform
    has already checked to be ``a-z 0-9 - _``)."""
    escaped = []
    for char in text:
        if char in _DEBUG_ESCAPES:
            escaped.append(_DEBUG_ESCAPES[char])
        elif char.isprintable():
            escaped.append(char)
        else:
            escaped.append(f"\\u{{{ord(char):x}}}")
    return '"' + "".join(escaped) + '"'


_DEBUG_ESCAPES = {"\0": "\\0", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\", '"': '\\"'}
