"""What the current invocation is.

>>> from tally import context
>>> f"{context.function_name()} on book {context.book_id()}"   # doctest: +SKIP
'orders on book 1'
"""

from __future__ import annotations

from . import _bindings

__all__ = ["attempt", "book_id", "function_name", "invocation_id"]


def invocation_id() -> str:
    """The invocation's ID. It stays the same when the platform runs the invocation
    again, so it can key work that must happen once."""
    return _bindings.context.invocation_id()


def book_id() -> int:
    """The ID of the book the invocation is bound to, which every :mod:`tally.log` call
    acts on."""
    return _bindings.context.book_id()


def attempt() -> int:
    """Which execution of the invocation this is: 1 for the first, then 2, 3, ... when
    the platform runs it again."""
    return _bindings.context.attempt()


def function_name() -> str:
    """The name the function was deployed under."""
    return _bindings.context.function_name()
