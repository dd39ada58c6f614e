"""What the current invocation is, and durable sleeps.

>>> from tally import context
>>> f"{context.function_name()} on book {context.book_id()}"   # doctest: +SKIP
'orders on book 1'

>>> from datetime import datetime, timedelta, timezone
>>> context.sleep(500)                                        # doctest: +SKIP
>>> context.sleep(timedelta(hours=1))                         # doctest: +SKIP
>>> context.sleep_until(datetime(2030, 1, 1, tzinfo=timezone.utc))   # doctest: +SKIP
"""

from __future__ import annotations

from . import _bindings
from ._convert import DurationLike, TimeLike, to_duration_ms, to_unix_ms
from ._errors import from_wit

__all__ = ["attempt", "book_id", "function_name", "invocation_id", "sleep", "sleep_until"]


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


def sleep(duration: DurationLike) -> None:
    """Sleeps durably for ``duration``: an ``int`` of **milliseconds** (not seconds, as
    :func:`time.sleep` takes) or a :class:`datetime.timedelta`, whose fraction of a
    millisecond is dropped.

    The wake time is logged, so when the platform runs the invocation again it wakes at
    the same time, and a sleep may outlast the function's time limit and restarts of the
    node. A short sleep waits in place. A long one suspends the invocation: this
    execution ends there (the call does not return, and nothing is held while it
    sleeps; a synchronous caller is answered HTTP 202 with the invocation's
    :func:`invocation_id`), and at the wake time the platform runs the invocation again,
    which replays everything before this call, and the call then returns. As for every
    durable call, the invocation should reach it by the same calls in the same order
    when it runs again.

    A sleep of more than a year raises :class:`~tally.InvalidArgument`; a negative
    duration, or an ``int`` above 2^64-1, raises ``ValueError``, and anything but an
    ``int`` or a ``timedelta`` (such as a ``float`` of seconds) ``TypeError``.
    """
    ms = to_duration_ms(duration, "duration")
    try:
        _bindings.context.sleep(ms)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def sleep_until(time: TimeLike) -> None:
    """Sleeps durably until ``time``, as :func:`sleep`: a :class:`datetime.datetime`, or an
    ``int`` of milliseconds since the Unix epoch. A time in the past returns at once.

    An aware ``datetime`` is converted from its time zone; a naive one is taken as
    **UTC**, so prefer ``datetime.now(timezone.utc) + ...`` to ``datetime.now() + ...``.
    A ``datetime`` before the epoch is the epoch, and any fraction of a millisecond is
    dropped.

    A time more than a year ahead raises :class:`~tally.InvalidArgument`; a negative
    ``int``, or one above 2^64-1, raises ``ValueError``, and anything but an ``int`` or
    a ``datetime`` (a ``float`` timestamp of seconds, a ``date``) ``TypeError``.
    """
    unix_ms = to_unix_ms(time, "time")
    try:
        _bindings.context.sleep_until(unix_ms)
    except _bindings.Err as error:
        raise from_wit(error.value) from None
