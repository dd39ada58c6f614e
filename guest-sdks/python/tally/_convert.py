"""Checks and conversions of arguments before they reach the bindings, which trap on a
value of the wrong type or range instead of raising."""

from __future__ import annotations

import operator
from typing import Iterable, SupportsIndex, Union

#: What the SDK takes where the WIT has ``list<u8>``: bytes, or text sent as UTF-8.
BytesLike = Union[bytes, bytearray, memoryview, str]

U64_MAX = (1 << 64) - 1


def to_bytes(value: BytesLike, what: str) -> bytes:
    """``value`` as ``bytes``, with ``str`` encoded as UTF-8."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def to_str(value: str, what: str) -> str:
    """``value``, checked to be text."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    return value


def to_u64(value: SupportsIndex, what: str) -> int:
    """``value`` as an ``int`` from 0 to 2^64-1."""
    number = operator.index(value)
    if not 0 <= number <= U64_MAX:
        raise ValueError(f"{what} must be from 0 to 2**64-1, not {number}")
    return int(number)


def to_u64_list(values: Iterable[SupportsIndex], what: str) -> list[int]:
    """``values`` as a list of ``int`` from 0 to 2^64-1."""
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a list of tags, not {type(values).__name__}")
    return [to_u64(value, what) for value in values]
