"""Serves a request with the user's handler: reads the ``incoming-request`` whole, calls
the handler, writes its response (see :mod:`tally.http_entry`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

from .. import _bindings
from .._handler import print_traceback
from ._message import Request, Response
from ._wasi import from_fields, from_method, read_body, to_fields, write_body

__all__ = ["Handler", "call_handler", "find_handler", "serve"]

#: A handler: a request in, a response (or a body for a 200) out.
Handler = Callable[[Request], Any]

_INTERNAL_ERROR = "internal server error"


def find_handler(app: ModuleType) -> Handler:
    """The ``handle`` function of the user's module, checked when the component is built."""
    handle = getattr(app, "handle", None)
    if not callable(handle):
        raise TypeError(
            f"{app.__name__}.py must define `def handle(request: tally.http.Request) -> tally.http.Response` "
            "(or a wasi:http `IncomingHandler` class)"
        )
    return handle


def call_handler(handle: Handler, request: Request) -> Response:
    """Calls ``handle(request)``. A :class:`Response` is the response; ``str`` or
    ``bytes`` is the body of a 200. An exception deriving from ``Exception`` is a 500
    whose body says nothing of it (its message may hold what the client must not see);
    its traceback goes to stderr, which the node logs."""
    try:
        return _to_response(handle(request))
    except Exception as error:
        print_traceback(error)
        return Response(_INTERNAL_ERROR, 500)


def _to_response(output: Any) -> Response:
    if isinstance(output, Response):
        return output
    if isinstance(output, (str, bytes, bytearray, memoryview)):
        return Response(output)
    raise TypeError(f"handle returned {type(output).__name__}, not tally.http.Response, str or bytes")


def serve(handle: Handler, incoming: Any, response_out: Any) -> None:
    """The export ``wasi:http/incoming-handler.handle``, with ``handle`` as the handler."""
    response = call_handler(handle, read_request(incoming))
    try:
        fields = to_fields(response.headers)
    except ValueError as error:
        print_traceback(error)
        response = Response(_INTERNAL_ERROR, 500)
        fields = to_fields(response.headers)
    outgoing = _bindings.http_types.OutgoingResponse(fields)
    outgoing.set_status_code(response.status)
    body = outgoing.body()
    _bindings.http_types.ResponseOutparam.set(response_out, _bindings.Ok(outgoing))
    write_body(body, response.body)


def read_request(incoming: Any) -> Request:
    """A :class:`Request` of an ``incoming-request``, its body read whole."""
    with incoming:
        method = from_method(incoming.method())
        path = incoming.path_with_query() or "/"
        headers = from_fields(incoming.headers())
        body = read_body(incoming.consume())
    return Request(method, path, headers, body)
