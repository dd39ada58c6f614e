"""Calls to other functions.

>>> from tally import context, invoke
>>> # A function may call itself, under the name it was deployed as.
>>> output = invoke.call(context.function_name(), b"child")   # doctest: +SKIP
"""

from __future__ import annotations

from . import _bindings
from ._convert import BytesLike, to_bytes, to_str
from ._errors import from_wit

__all__ = ["call"]


def call(function: str, input: BytesLike) -> bytes:
    """Runs ``function`` on the same book with ``input``, waits for it, and returns its
    output.

    The child sees everything this invocation has read or written on the log. When the
    child's handler raises an error or the child traps, the call raises
    :class:`~tally.Failed`; an unknown function raises :class:`~tally.NotFound`.

    The call is exactly-once: the child's invocation ID is derived from this
    invocation's ID and the call's step, and its outcome is logged, so when the platform
    runs this invocation again after a crash, the call returns the logged outcome
    instead of running the child again.
    """
    function = to_str(function, "function")
    input = to_bytes(input, "input")
    try:
        return bytes(_bindings.invoke.call(function, input))
    except _bindings.Err as error:
        raise from_wit(error.value) from None
