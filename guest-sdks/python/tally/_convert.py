"""Checks and conversions of arguments before they reach the bindings, which trap on a
value of the wrong type or range instead of raising."""

from __future__ import annotations

import operator
from datetime import datetime, timedelta, timezone
from typing import Iterable, SupportsIndex, Union

#: What the SDK takes where the WIT has ``list<u8>``: bytes, or text sent as UTF-8.
BytesLike = Union[bytes, bytearray, memoryview, str]

#: A duration: an ``int`` of milliseconds, or a ``timedelta``.
DurationLike = Union[SupportsIndex, timedelta]

#: A point in time: an aware or naive-UTC ``datetime``, or milliseconds since the Unix epoch.
TimeLike = Union[SupportsIndex, datetime]

U64_MAX = (1 << 64) - 1
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


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


def _to_int(value: SupportsIndex, what: str) -> int:
    """``value`` as an ``int``, refusing a ``bool``: ``True`` is an ``int``, but surely
    not an amount or a count."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be int, not bool")
    try:
        return int(operator.index(value))
    except TypeError:
        raise TypeError(f"{what} must be int, not {type(value).__name__}") from None


def to_i64(value: SupportsIndex, what: str) -> int:
    """``value`` as an ``int`` from -2^63 to 2^63-1 (not a ``bool``)."""
    number = _to_int(value, what)
    if not I64_MIN <= number <= I64_MAX:
        raise ValueError(f"{what} must be from -2**63 to 2**63-1, not {number}")
    return number


def to_count(value: SupportsIndex, what: str) -> int:
    """``value`` as an ``int`` from 0 up (not a ``bool``)."""
    number = _to_int(value, what)
    if number < 0:
        raise ValueError(f"{what} must not be negative, not {number}")
    return number


def to_bool(value: bool, what: str) -> bool:
    """``value``, checked to be a ``bool``: the bindings trap on anything else."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be bool, not {type(value).__name__}")
    return value


def to_u64_list(values: Iterable[SupportsIndex], what: str) -> list[int]:
    """``values`` as a list of ``int`` from 0 to 2^64-1."""
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a list of tags, not {type(values).__name__}")
    return [to_u64(value, what) for value in values]


_MILLISECOND = timedelta(milliseconds=1)
_EPOCH_AWARE = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_NAIVE = datetime(1970, 1, 1)


def _to_ms_int(value: SupportsIndex, what: str, expected: str) -> int:
    """``value`` as an ``int`` of milliseconds from 0 to 2^64-1; ``expected`` names what
    else the argument may be, for the ``TypeError``."""
    # `True` is an `int`, but surely not a number of milliseconds.
    if isinstance(value, bool):
        raise TypeError(f"{what} must be {expected}, not bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be {expected}, not {type(value).__name__}") from None
    return to_u64(number, f"{what} in milliseconds")


def to_duration_ms(value: DurationLike, what: str) -> int:
    """``value`` as whole milliseconds from 0 to 2^64-1: an ``int`` is milliseconds; a
    ``timedelta`` must not be negative and loses any fraction of a millisecond (as the
    Rust SDK's ``Duration::as_millis``)."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError(f"{what} must not be negative, not {value!r}")
        # At most 999999999 days, far below 2^64 ms.
        return value // _MILLISECOND
    return _to_ms_int(value, what, "an int (milliseconds) or a datetime.timedelta")


def to_unix_ms(value: TimeLike, what: str) -> int:
    """``value`` as whole milliseconds since the Unix epoch, from 0 to 2^64-1: an ``int``
    is taken as is; an aware ``datetime`` is converted from its time zone and a naive one
    is taken as UTC, a time before the epoch is 0 (as in the Rust SDK) and any fraction
    of a millisecond is dropped."""
    if isinstance(value, datetime):
        aware = value.tzinfo is not None and value.utcoffset() is not None
        since_epoch = value - (_EPOCH_AWARE if aware else _EPOCH_NAIVE)
        # Floor division: drops the fraction of a millisecond after the epoch.
        return max(since_epoch // _MILLISECOND, 0)
    return _to_ms_int(value, what, "an int (milliseconds since the Unix epoch) or a datetime.datetime")
