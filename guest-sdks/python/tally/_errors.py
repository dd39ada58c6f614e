"""Why a call to the platform failed: the WIT ``error`` variant of
``tally:platform/types``, one exception class per case."""

from __future__ import annotations

from typing import Any, ClassVar

from ._seqnum import SeqNum

__all__ = [
    "Conflict",
    "Failed",
    "InvalidArgument",
    "NotFound",
    "TallyError",
    "TooLarge",
    "Timeout",
    "TransactionConflict",
    "Unavailable",
]


class TallyError(Exception):
    """Why a call to the platform failed: the base of one subclass per case of the WIT
    ``error`` variant, and of :class:`TransactionConflict`, which the SDK's transaction
    helper raises when every attempt of a transaction conflicted.

    These are errors a function can handle (``except tally.Conflict:``); a broken guest
    or a host bug traps the invocation instead. ``str(error)`` is the same text as the
    Rust SDK's ``Error`` displays, such as ``"not found: no function named f"``, and an
    uncaught one reaches the caller as that message.
    """

    #: What ``str()`` puts before the message.
    _prefix: ClassVar[str] = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: The platform's message, without the prefix ``str()`` adds.
        self.message: str = message

    def __str__(self) -> str:
        return f"{self._prefix}: {self.message}"


class InvalidArgument(TallyError):
    """The arguments were refused: a tag with the top bit set, tag 0 as the condition of
    :func:`tally.log.cond_append`, a malformed table name, ...

    Also a stored value that is not what the SDK reads it as, such as one that is not a
    decimal integer for :func:`tally.state.get_i64`.
    """

    _prefix = "invalid argument"


class NotFound(TallyError):
    """A named thing does not exist, such as an unknown function for
    :func:`tally.invoke.call`."""

    _prefix = "not found"


class Conflict(TallyError):
    """A conditional append lost: its position in the condition tag's stream is held by
    another record, :attr:`holder`."""

    _prefix = "conflict"

    def __init__(self, holder: int | None) -> None:
        #: The record that holds the position, or ``None`` if it has since been trimmed.
        self.holder: SeqNum | None = None if holder is None else SeqNum(holder)
        shown = "a trimmed record" if self.holder is None else f"record {self.holder}"
        super().__init__(f"the position is held by {shown}")
        self.args = (self.holder,)

    def __repr__(self) -> str:
        return f"Conflict(holder={self.holder!r})"


class Unavailable(TallyError):
    """The log or a node is unavailable right now; retrying later may succeed."""

    _prefix = "unavailable"


class TooLarge(TallyError):
    """A record, payload or result is larger than its limit."""

    _prefix = "too large"


class Timeout(TallyError):
    """The operation did not finish in time; it may still have taken effect."""

    _prefix = "timeout"


class Failed(TallyError):
    """A child invocation failed: its handler raised an error, or it trapped."""

    _prefix = "failed"


class TransactionConflict(TallyError):
    """A transaction run by :func:`tally.objects.transaction` conflicted on every
    attempt: each commit found an object it read written by someone else since its
    begin, so none of its writes took effect.

    Not a case of the WIT ``error`` variant (a conflicting commit is not an error
    there, it returns false): the SDK raises it when it runs out of retries.
    """

    _prefix = "conflict"

    def __init__(self, attempts: int) -> None:
        #: How many times the transaction ran and conflicted.
        self.attempts: int = attempts
        shown = "its only attempt" if attempts == 1 else f"all {attempts} attempts"
        super().__init__(f"the transaction conflicted on {shown}")
        self.args = (attempts,)

    def __repr__(self) -> str:
        return f"TransactionConflict(attempts={self.attempts!r})"


# The generated bindings name the cases `Error_<Case>`; going by name keeps this
# mapping pure, so it is tested on the host without the bindings.
_BY_CASE: dict[str, type[TallyError]] = {
    "Error_InvalidArgument": InvalidArgument,
    "Error_NotFound": NotFound,
    "Error_Conflict": Conflict,
    "Error_Unavailable": Unavailable,
    "Error_TooLarge": TooLarge,
    "Error_Timeout": Timeout,
    "Error_Failed": Failed,
}


def from_wit(error: Any) -> TallyError:
    """Converts a case of the generated ``Error`` union (a dataclass with ``value``)."""
    try:
        kind = _BY_CASE[type(error).__name__]
    except KeyError:
        raise TypeError(f"not a case of tally:platform/types.error: {error!r}") from None
    return kind(error.value)
