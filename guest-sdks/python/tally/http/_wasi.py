"""Between the SDK's values and wasi:http's resources: methods, header fields, error
codes and whole bodies. The resources come from the bindings (:mod:`tally._bindings`);
the conversions of names are pure and tested on the host."""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from typing import Any

from .. import _bindings
from ._message import Headers

__all__ = ["StreamFailed", "error_code_name", "from_fields", "from_method", "read_body", "to_fields", "to_method", "write_body"]

# What one `blocking-read` asks for; the stream may return less.
_READ_BYTES_MAX = 64 * 1024

_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


def from_method(method: Any) -> str:
    """The name of a ``wasi:http/types.method`` case (``Method_Post`` is ``POST``)."""
    case = type(method).__name__.removeprefix("Method_")
    return method.value if case == "Other" else case.upper()


def to_method(method: str) -> Any:
    """``method`` as a ``wasi:http/types.method`` case; a name it has no case for (any
    other token, or a standard one not in upper case) is ``other``."""
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    if method in _METHODS:
        return getattr(_bindings.http_types, "Method_" + method.capitalize())()
    return _bindings.http_types.Method_Other(method)


def to_fields(headers: Headers) -> Any:
    """New ``fields`` holding ``headers``. A name or value wasi:http refuses raises
    ``ValueError`` naming the reason (``invalid-syntax``, ``forbidden``)."""
    entries = [(name, value.encode("latin-1")) for name, value in headers.items()]
    try:
        return _bindings.http_types.Fields.from_list(entries)
    except _bindings.Err as error:
        raise ValueError(f"the headers were refused: {error_code_name(error.value)}") from None


def from_fields(fields_: Any) -> Headers:
    """The entries of ``fields`` (dropped here: they are a child of their request or
    response, which outlives them)."""
    with fields_:
        return Headers(fields_.entries())


# The cases' names in the WIT: words in lower case, joined by '-', except acronyms.
_ACRONYMS = {"dns": "DNS", "ip": "IP", "tls": "TLS", "http": "HTTP", "uri": "URI"}
_WORD = re.compile(r"[A-Z][a-z0-9]*")


def error_code_name(code: Any) -> str:
    """A case of ``wasi:http/types.error-code`` (or ``header-error``) as the WIT names
    it, with its payload when it has one: ``HTTP-request-denied``,
    ``internal-error: no route``."""
    case = type(code).__name__.partition("_")[2] or type(code).__name__
    name = "-".join(_ACRONYMS.get(word.lower(), word.lower()) for word in _WORD.findall(case))
    detail = _payload(getattr(code, "value", None))
    return f"{name}: {detail}" if detail else name


def _payload(value: Any) -> str:
    """A case's payload, shortly: its set fields, ``None`` left out."""
    if value is None:
        return ""
    if is_dataclass(value):
        parts = [f"{f.name}={getattr(value, f.name)!r}" for f in fields(value) if getattr(value, f.name) is not None]
        return ", ".join(parts)
    return str(value)


def read_body(body: Any) -> bytes:
    """The whole of an ``incoming-body``, which it consumes. A stream that fails raises
    :class:`StreamFailed`."""
    chunks = []
    with body.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(_READ_BYTES_MAX))
            except _bindings.Err as error:
                if type(error.value).__name__ == "StreamError_Closed":
                    break
                raise _stream_failed(error.value) from None
    with _bindings.http_types.IncomingBody.finish(body):
        pass
    return b"".join(chunks)


def write_body(body: Any, data: bytes) -> None:
    """Writes ``data`` to an ``outgoing-body`` and finishes it, in chunks as large as
    the stream takes, waiting when it takes none."""
    view = memoryview(data)
    with body.write() as stream:
        try:
            while view:
                permitted = stream.check_write()
                if permitted == 0:
                    with stream.subscribe() as ready:
                        ready.block()
                    continue
                stream.write(bytes(view[:permitted]))
                view = view[permitted:]
            stream.blocking_flush()
        except _bindings.Err as error:
            raise _stream_failed(error.value) from None
    _bindings.http_types.OutgoingBody.finish(body, None)


class StreamFailed(Exception):
    """A body's stream failed: ``str()`` is the wasi:http error code (as
    :func:`error_code_name` names it), or ``stream-closed`` or ``stream-failed`` when the
    host gave none."""


def _stream_failed(error: Any) -> StreamFailed:
    """A ``stream-error``: ``last-operation-failed`` carries an ``error`` resource that
    may hold an HTTP error code."""
    if type(error).__name__ == "StreamError_Closed":
        return StreamFailed("stream-closed")
    code = _bindings.http_types.http_error_code(error.value)
    return StreamFailed("stream-failed" if code is None else error_code_name(code))
