"""Runs the user's ``handle`` for the component's export (see :mod:`tally.entry`)."""

from __future__ import annotations

import sys
import traceback
from types import ModuleType
from typing import Any, Callable

from . import _bindings

__all__ = ["call_handler", "error_message", "find_handle", "output_bytes", "print_traceback"]


def find_handle(app: ModuleType) -> Callable[[bytes], Any]:
    """The ``handle`` function of the user's module, checked when the component is built."""
    handle = getattr(app, "handle", None)
    if not callable(handle):
        raise TypeError(f"{app.__name__}.py must define `def handle(input: bytes) -> bytes | str`")
    return handle


def call_handler(handle: Callable[[bytes], Any], input: bytes) -> bytes:
    """Calls ``handle(input)`` and returns its output as bytes.

    An exception deriving from ``Exception`` becomes the export's ``err``: its
    traceback goes to stderr and :func:`error_message` is the message the caller gets.
    Anything else (``SystemExit``, ``KeyboardInterrupt``) propagates, and
    componentize-py traps the invocation.
    """
    try:
        return output_bytes(handle(input))
    except Exception as error:
        print_traceback(error)
        raise _bindings.Err(error_message(error)) from None


def output_bytes(output: Any) -> bytes:
    """A handler's output as bytes: ``bytes`` as is, ``str`` as UTF-8."""
    if type(output) is bytes:
        return output
    if isinstance(output, str):
        return output.encode("utf-8")
    if isinstance(output, (bytes, bytearray, memoryview)):
        return bytes(output)
    raise TypeError(f"handle returned {type(output).__name__}, not bytes or str")


def error_message(error: BaseException) -> str:
    """The message of an exception the handler raised: ``str(error)`` (the class name
    for an exception raised without arguments, such as ``raise KeyError``), followed by ``": "`` and the message of its ``__cause__``
    (``raise ... from cause``), and so on down the chain, like Rust's ``{:#}`` of an
    ``anyhow::Error``. An implicit ``__context__`` is not shown."""
    messages: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        messages.append(_message(current))
        current = current.__cause__
    return ": ".join(messages)


def _message(error: BaseException) -> str:
    """One exception's part of :func:`error_message`."""
    try:
        message = str(error)
    except Exception:
        return type(error).__name__
    # `raise ValueError("")` asks for an empty message; `raise ValueError` says nothing.
    return message if message or error.args else type(error).__name__


def print_traceback(error: BaseException) -> None:
    """Writes the traceback to the function's stderr, which the node logs."""
    try:
        traceback.print_exception(error, file=sys.stderr)
    except Exception:
        pass
