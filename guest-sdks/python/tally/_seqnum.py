"""A record's position in its book."""

from __future__ import annotations

import operator
from typing import ClassVar, SupportsIndex

from ._convert import U64_MAX

__all__ = ["SeqNum"]


class SeqNum(int):
    """A record's position in its book: seqnums are totally ordered across the whole
    book, whatever the record's tags.

    It is an ``int`` from 0 to 2^64-1, so it compares, hashes, prints and parses like
    one (``str(seqnum)`` is its decimal number, ``SeqNum(int(text))`` reads it back);
    arithmetic on it gives a plain ``int``.

    >>> SeqNum(42) == 42, str(SeqNum(42))
    (True, '42')
    """

    __slots__ = ()

    #: The smallest seqnum: ``log.read_next(tag, SeqNum.MIN)`` reads a stream's first
    #: record.
    MIN: ClassVar[SeqNum]
    #: The largest seqnum: ``log.read_prev(tag, SeqNum.MAX)`` reads a stream's last
    #: record.
    MAX: ClassVar[SeqNum]

    def __new__(cls, seqnum: SupportsIndex = 0) -> SeqNum:
        """The seqnum with this number; ``ValueError`` outside 0 to 2^64-1."""
        number = operator.index(seqnum)
        if not 0 <= number <= U64_MAX:
            raise ValueError(f"a seqnum is from 0 to 2**64-1, not {number}")
        return super().__new__(cls, number)

    def next(self) -> SeqNum | None:
        """The seqnum after this one, or ``None`` after :attr:`MAX`. Reading a stream
        forward continues from ``record.seqnum.next()``."""
        return SeqNum(self + 1) if self < U64_MAX else None

    def prev(self) -> SeqNum | None:
        """The seqnum before this one, or ``None`` before :attr:`MIN`. Reading a stream
        backward continues from ``record.seqnum.prev()``."""
        return SeqNum(self - 1) if self > 0 else None

    def __repr__(self) -> str:
        return f"SeqNum({int.__repr__(self)})"

    # `int.__str__` is `object.__str__`, which would call the `__repr__` above.
    __str__ = int.__repr__


SeqNum.MIN = SeqNum(0)
SeqNum.MAX = SeqNum(U64_MAX)
