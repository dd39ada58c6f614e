"""Locks of the invocation's book (BokiFlow, Boki §5.1).

A lock is held by one invocation at a time and named by a string (1 to 256 bytes). A
holder that crashes keeps it while the platform runs it again, and an invocation's
locks are released when it finishes, whatever its outcome, so a lock is never left
held by a dead invocation.

>>> from tally import locks
>>> if locks.acquire("inventory", 5000):                      # doctest: +SKIP
...     try:
...         ...  # alone among the invocations that take "inventory"
...     finally:
...         locks.release("inventory")
>>> with locks.holding("inventory", 5000):                    # doctest: +SKIP
...     ...  # the same
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from . import _bindings
from ._convert import DurationLike, to_duration_ms, to_str
from ._errors import Timeout, from_wit

__all__ = ["acquire", "holding", "release"]


def acquire(lock: str, timeout: DurationLike) -> bool:
    """Acquires ``lock`` for this invocation, waiting up to ``timeout`` while another
    invocation holds it: ``True`` once it is held, ``False`` if the wait timed out.
    Acquiring a lock this invocation already holds is ``True`` at once.

    ``timeout`` is an ``int`` of **milliseconds** or a :class:`datetime.timedelta` (its
    fraction of a millisecond dropped), as :func:`tally.context.sleep` takes; 0 does not
    wait, and the wait ends before the function's time limit whatever ``timeout`` says. A bad ``timeout`` raises the errors of
    ``sleep``'s duration.
    """
    lock = to_str(lock, "lock")
    timeout_ms = to_duration_ms(timeout, "timeout")
    try:
        return _bindings.locks.acquire(lock, timeout_ms)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def release(lock: str) -> None:
    """Releases ``lock``; :class:`~tally.InvalidArgument` if this invocation does not
    hold it."""
    lock = to_str(lock, "lock")
    try:
        _bindings.locks.release(lock)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


@contextlib.contextmanager
def holding(lock: str, timeout: DurationLike) -> Iterator[None]:
    """Holds ``lock`` for the ``with`` block: acquires it as :func:`acquire` does, raising
    :class:`~tally.Timeout` if the wait timed out, and releases it when the block ends,
    however it ends.

    Locks do not count: a ``holding`` of a lock inside another of the same lock releases
    it at the end of the inner block.
    """
    timeout_ms = to_duration_ms(timeout, "timeout")
    if not acquire(lock, timeout_ms):
        raise Timeout(f"lock {lock!r} was not acquired within {timeout_ms} ms")
    try:
        yield
    finally:
        release(lock)
