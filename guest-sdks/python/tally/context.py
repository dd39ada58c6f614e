"""What the current invocation is, durable sleeps, and promises the outside world completes.

>>> from tally import context
>>> f"{context.function_name()} on book {context.book_id()}"   # doctest: +SKIP
'orders on book 1'
>>> context.key()                                             # doctest: +SKIP
'cart-42'

>>> from datetime import datetime, timedelta, timezone
>>> context.sleep(500)                                        # doctest: +SKIP
>>> context.sleep(timedelta(hours=1))                         # doctest: +SKIP
>>> context.sleep_until(datetime(2030, 1, 1, tzinfo=timezone.utc))   # doctest: +SKIP

>>> promise = context.promise_create()                        # doctest: +SKIP
>>> decision = context.promise_await(promise, timedelta(days=7))     # doctest: +SKIP
"""

from __future__ import annotations

from . import _bindings
from ._convert import DurationLike, TimeLike, to_duration_ms, to_str, to_unix_ms
from ._errors import from_wit

__all__ = [
    "attempt",
    "book_id",
    "function_name",
    "invocation_id",
    "key",
    "promise_await",
    "promise_create",
    "sleep",
    "sleep_until",
]


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


def key() -> str | None:
    """The key the invocation was addressed to (``?key=`` of the request), or ``None``
    if it has none.

    An exclusive keyed invocation runs alone among the function's invocations with that
    key: the key names what the invocation works on (a cart, an account), for example
    the :mod:`tally.objects` object it reads and writes.
    """
    return _bindings.context.key()


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


def promise_create() -> str:
    """Creates a promise that the outside world completes once, with
    ``POST /v1/promises/{id}?book=B`` and the value as the body, and returns its ID (the
    same when the platform runs the invocation again): hand it out (store it, append it
    to the log, pass it to a call), then :func:`promise_await` it.
    """
    try:
        return _bindings.context.promise_create()
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def promise_await(id: str, timeout: DurationLike | None = None) -> bytes:
    """The value of promise ``id`` of this book, waiting durably for it as :func:`sleep`
    does: the promise may be completed before, during or after the wait, and a long wait
    suspends the invocation until the completion (or the timeout) runs it again, which
    replays everything before this call. What the await got is logged, so a re-execution
    of the invocation gets the same.

    ``timeout``, if given, is an ``int`` of **milliseconds** or a
    :class:`datetime.timedelta` (its fraction of a millisecond dropped); once that long
    has passed without a completion the call raises :class:`~tally.Timeout` (a later
    completion is accepted and changes nothing). ``None`` waits for as long as it takes.

    A promise this book never created raises :class:`~tally.NotFound`, and an ``id`` that
    is no promise ID :class:`~tally.InvalidArgument`. An ``id`` that is not a ``str``
    raises ``TypeError``, and a bad ``timeout`` the errors of :func:`sleep`'s duration.
    """
    id = to_str(id, "id")
    timeout_ms = None if timeout is None else to_duration_ms(timeout, "timeout")
    try:
        return bytes(_bindings.context.promise_await(id, timeout_ms))
    except _bindings.Err as error:
        raise from_wit(error.value) from None
