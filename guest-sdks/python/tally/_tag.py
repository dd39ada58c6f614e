"""Tags: the sub-streams of a book."""

from __future__ import annotations

import operator
from typing import ClassVar, SupportsIndex

from ._convert import U64_MAX

__all__ = ["Tag"]

_FNV_OFFSET_BASIS = 0xCBF2_9CE4_8422_2325
_FNV_PRIME = 0x0000_0100_0000_01B3
_RESERVED_BIT = 1 << 63


class Tag(int):
    """Selects a sub-stream of the book: every record carries a set of tags, and reads
    name the one tag whose stream they walk.

    A tag is an ``int`` from 0 to 2^64-1. Tag 0 (:attr:`ALL`) is the whole book. Tags
    with the top bit (bit 63) set are reserved for the platform: appending with one
    raises :class:`tally.InvalidArgument`. ``Tag(n)`` accepts any number in range; the
    platform refuses reserved ones when they are used.

    Name tags with :meth:`named`, at module level so that the hash is computed once, when
    the component is built:

    >>> ORDERS = Tag.named("orders")
    >>> ORDERS == 0x0012_5D92_50BE_8B4C
    True
    """

    __slots__ = ()

    #: The whole book: every record is in tag 0's stream. It is only for reading and
    #: trimming; a record's own tags never include it.
    ALL: ClassVar[Tag]

    def __new__(cls, tag: SupportsIndex = 0) -> Tag:
        """The tag with this number; ``ValueError`` outside 0 to 2^64-1."""
        number = operator.index(tag)
        if not 0 <= number <= U64_MAX:
            raise ValueError(f"a tag is from 0 to 2**64-1, not {number}")
        return super().__new__(cls, number)

    @classmethod
    def named(cls, name: str) -> Tag:
        """The tag for a name, so functions agree on tags by name without a registry.

        The tag is the 64-bit FNV-1a hash of the name's UTF-8 bytes (offset basis
        ``0xcbf29ce484222325``, prime ``0x100000001b3``: for each byte, xor it in, then
        multiply, wrapping), with the top bit cleared because it is reserved for the
        platform, and 1 in place of 0 because 0 is :attr:`ALL`. The gateway uses the
        same function for ``?tag=name``, and so does every SDK:

        ============  ======================  =========================
        name          tag (hex)               tag (decimal)
        ============  ======================  =========================
        ``""``        ``0x4bf29ce484222325``  ``5472609002491880229``
        ``"a"``       ``0x2f63dc4c8601ec8c``  ``3414815163700866188``
        ``"orders"``  ``0x00125d9250be8b4c``  ``5169432582064972``
        ============  ======================  =========================
        """
        if not isinstance(name, str):
            raise TypeError(f"a tag name must be str, not {type(name).__name__}")
        hash = _FNV_OFFSET_BASIS
        for byte in name.encode("utf-8"):
            hash = ((hash ^ byte) * _FNV_PRIME) & U64_MAX
        return cls._from_hash(hash)

    @classmethod
    def _from_hash(cls, hash: int) -> Tag:
        """Makes a name's hash a tag a function may append with."""
        return cls(hash & ~_RESERVED_BIT or 1)

    def __repr__(self) -> str:
        return f"Tag({int.__repr__(self)})"

    # `int.__str__` is `object.__str__`, which would call the `__repr__` above.
    __str__ = int.__repr__


Tag.ALL = Tag(0)
