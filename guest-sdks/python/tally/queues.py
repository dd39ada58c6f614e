"""Durable FIFO queues of the invocation's book (BokiQueue, Boki §5.3).

A queue is named by a string (1 to 256 bytes) and split into shards: the messages one
invocation pushes go to one shard, in order, and each shard is first in, first out.
Every message is popped exactly once, by one invocation, whatever crashes and
re-executions happen. Messages are ``bytes``; a ``str`` is accepted too and sent as
UTF-8.

>>> from tally import queues
>>> queues.push("jobs", b"resize image 7")                    # doctest: +SKIP
>>> queues.pop("jobs", 1000)                                  # doctest: +SKIP
b'resize image 7'
>>> queues.pop_many("jobs", 8, 1000)                          # doctest: +SKIP
[b'resize image 8', b'resize image 9']
"""

from __future__ import annotations

from . import _bindings
from ._convert import BytesLike, DurationLike, to_bytes, to_count, to_duration_ms, to_str
from ._errors import from_wit

__all__ = ["pop", "pop_many", "push"]


def push(queue: str, message: BytesLike) -> None:
    """Pushes ``message`` (at most 512 KiB, :class:`~tally.TooLarge` otherwise) to
    ``queue``."""
    queue = to_str(queue, "queue")
    message = to_bytes(message, "message")
    try:
        _bindings.queues.push(queue, message)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def pop(queue: str, timeout: DurationLike) -> bytes | None:
    """Pops the oldest message of one of ``queue``'s shards (this invocation's own shard
    first), or returns ``None`` if the queue stayed empty for ``timeout``.

    ``timeout`` is an ``int`` of **milliseconds** or a :class:`datetime.timedelta` (its
    fraction of a millisecond dropped), as :func:`tally.context.sleep` takes; 0 does not
    wait, and the wait ends before the function's time limit whatever ``timeout`` says.
    It does not spin: the invocation waits for a push. A bad ``timeout`` raises the errors of ``sleep``'s duration.
    """
    queue = to_str(queue, "queue")
    timeout_ms = to_duration_ms(timeout, "timeout")
    try:
        message = _bindings.queues.pop(queue, timeout_ms)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return None if message is None else bytes(message)


def pop_many(queue: str, max: int, timeout: DurationLike) -> list[bytes]:  # noqa: A002 (as the WIT names it)
    """Pops up to ``max`` (1 to 100, :class:`~tally.InvalidArgument` otherwise) of the
    oldest messages of one of ``queue``'s shards, in order, with one record of the log
    where ``max`` pops would log ``max``: waits up to ``timeout`` for the first as
    :func:`pop` does, then takes what that shard holds, up to ``max``. An empty list if
    the queue stayed empty.
    """
    queue = to_str(queue, "queue")
    count = to_count(max, "max")
    if count > 0xFFFF_FFFF:
        raise ValueError(f"max must be from 1 to 100, not {count}")
    timeout_ms = to_duration_ms(timeout, "timeout")
    try:
        messages = _bindings.queues.pop_many(queue, count, timeout_ms)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
    return [bytes(message) for message in messages]
