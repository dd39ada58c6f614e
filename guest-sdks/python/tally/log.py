"""The book's shared log: the LogBook API of Boki (§3).

Every invocation is bound to one book, and these calls act on it; a function never
names a book, so it cannot read or write another one. Seqnums are totally ordered
across the book; a :class:`~tally.Tag` selects a sub-stream of it, and
:attr:`Tag.ALL <tally.Tag.ALL>` is the whole book::

      tag 0 (ALL):  1   2   3   4   5   6   7        every record, by seqnum
      tag "a":      1       3           6            records that carry "a"
      tag "b":          2   3       5                records that carry "b"
                                ^
      read_next("a", 4) = 6     read_prev("b", 4) = 3     check_tail("a") = 6

Each call raises a :class:`~tally.TallyError` subclass when the platform refuses or
fails it. Data is ``bytes``; a ``str`` is accepted too and sent as UTF-8.

>>> from tally import Tag, log
>>> ORDERS = Tag.named("orders")
>>> seqnum = log.append([ORDERS], b"order 1")          # doctest: +SKIP
>>> log.read_next(ORDERS, seqnum).data                 # doctest: +SKIP
b'order 1'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, SupportsIndex

from . import _bindings
from ._convert import BytesLike, to_bytes, to_u64, to_u64_list
from ._errors import from_wit
from ._seqnum import SeqNum
from ._tag import Tag

__all__ = [
    "Record",
    "append",
    "check_tail",
    "cond_append",
    "read_next",
    "read_prev",
    "set_aux_data",
    "trim",
]


@dataclass(frozen=True)
class Record:
    """A record read from the log."""

    #: The record's position in the book.
    seqnum: SeqNum
    #: The tags the record was appended with, sorted, without :attr:`Tag.ALL`.
    tags: tuple[Tag, ...]
    #: The record's payload, as appended.
    data: bytes
    #: Data attached later by :func:`set_aux_data`, if the node that served the read
    #: has it. It is a cache: it may be missing even after it was set.
    aux: bytes | None

    @classmethod
    def _from_wit(cls, record: Any) -> Record:
        """Converts the generated ``LogRecord``."""
        return cls(
            seqnum=SeqNum(record.seqnum),
            tags=tuple(Tag(tag) for tag in record.tags),
            data=bytes(record.data),
            aux=None if record.aux_data is None else bytes(record.aux_data),
        )


def append(tags: Iterable[SupportsIndex], data: BytesLike) -> SeqNum:
    """Appends a record with ``data`` to the streams of ``tags``, and returns its seqnum.

    With no tags (``[]``) the record is only in the whole book's stream. Tags with the top
    bit set are refused with :class:`~tally.InvalidArgument`.
    """
    tags = to_u64_list(tags, "tags")
    data = to_bytes(data, "data")
    try:
        return SeqNum(_bindings.log.append(tags, data))
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def cond_append(tags: Iterable[SupportsIndex], data: BytesLike, cond_tag: SupportsIndex, cond_pos: SupportsIndex) -> SeqNum:
    """Appends like :func:`append`, but only if the record becomes entry number
    ``cond_pos`` (counting from 0) of ``cond_tag``'s stream.

    When another record holds that position, the append raises
    :class:`~tally.Conflict`, whose ``holder`` names that record unless it has been
    trimmed since. This is the building block for exactly-once steps and log-based
    locks; ``cond_tag`` must not be :attr:`Tag.ALL`.
    """
    tags = to_u64_list(tags, "tags")
    data = to_bytes(data, "data")
    cond_tag = to_u64(cond_tag, "cond_tag")
    cond_pos = to_u64(cond_pos, "cond_pos")
    try:
        return SeqNum(_bindings.log.cond_append(tags, data, cond_tag, cond_pos))
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def read_next(tag: SupportsIndex, min_seqnum: SupportsIndex) -> Record | None:
    """Reads the first record of ``tag``'s stream at or after ``min_seqnum``, or ``None``
    if there is none yet."""
    tag = to_u64(tag, "tag")
    min_seqnum = to_u64(min_seqnum, "min_seqnum")
    try:
        record = _bindings.log.read_next(tag, min_seqnum)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return None if record is None else Record._from_wit(record)


def read_prev(tag: SupportsIndex, max_seqnum: SupportsIndex) -> Record | None:
    """Reads the last record of ``tag``'s stream at or before ``max_seqnum``, or ``None``
    if there is none."""
    tag = to_u64(tag, "tag")
    max_seqnum = to_u64(max_seqnum, "max_seqnum")
    try:
        record = _bindings.log.read_prev(tag, max_seqnum)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return None if record is None else Record._from_wit(record)


def check_tail(tag: SupportsIndex) -> Record | None:
    """Reads the last record of ``tag``'s stream, or ``None`` if the stream is empty."""
    tag = to_u64(tag, "tag")
    try:
        record = _bindings.log.check_tail(tag)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return None if record is None else Record._from_wit(record)


def trim(tag: SupportsIndex, seqnum: SupportsIndex) -> None:
    """Removes the records of ``tag``'s stream before ``seqnum``; with :attr:`Tag.ALL`,
    the records of every stream before ``seqnum``."""
    tag = to_u64(tag, "tag")
    seqnum = to_u64(seqnum, "seqnum")
    try:
        _bindings.log.trim(tag, seqnum)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def set_aux_data(seqnum: SupportsIndex, data: BytesLike) -> None:
    """Attaches ``data`` to the record ``seqnum`` as its aux data, a best-effort cache that
    later reads may return in :attr:`Record.aux` (Boki §3).

    The typical use is a snapshot of a state machine's value as of this record, so that
    the next reader replays the log from here instead of from the start (Boki §5.4).
    """
    seqnum = to_u64(seqnum, "seqnum")
    data = to_bytes(data, "data")
    try:
        _bindings.log.set_aux_data(seqnum, data)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
