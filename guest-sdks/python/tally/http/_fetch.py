"""Requests out, through ``wasi:http/outgoing-handler``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .. import _bindings
from .._convert import BytesLike, to_bytes
from ._message import Headers, HeadersLike, Response
from ._wasi import StreamFailed, error_code_name, from_fields, read_body, to_fields, to_method, write_body

__all__ = ["FetchError", "fetch"]


class FetchError(Exception):
    """A request out that got no response: refused by the platform (a destination not
    allowed at deploy is ``HTTP-request-denied``), a connection that failed, a response
    over the size limit, ...

    ``str()`` names the destination's origin (never its path or query, which may hold
    a secret) and the wasi:http error code, such as ``fetch from
    http://127.0.0.1:9000 failed: connection-refused``.
    """

    def __init__(self, origin: str, code: str) -> None:
        super().__init__(f"fetch from {origin} failed: {code}")
        #: The scheme, host and port the request went to.
        self.origin: str = origin
        #: The wasi:http ``error-code`` as the WIT names it, with its payload if any.
        self.code: str = code


def fetch(url: str, *, method: str = "GET", headers: HeadersLike = None, body: BytesLike = b"") -> Response:
    """Sends a request and returns the response, its body read whole.

    Only the destinations named at deploy (``--outbound``) are reachable. Inside an
    invocation each request is exactly-once as far as the other side allows: the
    platform logs its response, a re-execution gets the logged one, and the platform
    adds an ``Idempotency-Key`` header unless the request has one. The platform bounds
    the response body (``outgoing_response_bytes_max``, at most 768 KiB).

    A status of 4xx or 5xx is a response like any other; no response at all raises
    :class:`FetchError`. A URL that is not absolute ``http``/``https`` or headers
    wasi:http refuses raise ``ValueError``. Only world ``http-function`` can send.
    """
    scheme, authority, path = _split(url)
    origin = f"{scheme}://{authority}"
    request = _bindings.http_types.OutgoingRequest(to_fields(Headers(headers)))
    _set(request.set_method, to_method(method), "method")
    _set(request.set_scheme, _to_scheme(scheme), "scheme")
    _set(request.set_authority, authority, "authority")
    _set(request.set_path_with_query, path, "path")
    outgoing = request.body()
    try:
        future = _bindings.outgoing_handler.handle(request, None)
        write_body(outgoing, to_bytes(body, "body"))
        return _response(_wait(future))
    except _bindings.Err as error:
        raise FetchError(origin, error_code_name(error.value)) from None
    except StreamFailed as error:
        raise FetchError(origin, str(error)) from None


def _split(url: str) -> tuple[str, str, str]:
    """The scheme, authority and path with query of an absolute URL."""
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("url must be an absolute http:// or https:// URL")
    path = parts.path or "/"
    return parts.scheme, parts.netloc, f"{path}?{parts.query}" if parts.query else path


def _to_scheme(scheme: str) -> Any:
    return _bindings.http_types.Scheme_Https() if scheme == "https" else _bindings.http_types.Scheme_Http()


def _set(setter: Any, value: Any, what: str) -> None:
    """Calls a setter of ``outgoing-request``, which raises ``Err`` for a value it
    refuses (not shown in the error: a path may hold a secret)."""
    try:
        setter(value)
    except _bindings.Err:
        raise ValueError(f"wasi:http refused the request's {what}") from None


def _wait(future: Any) -> Any:
    """The ``incoming-response`` of a ``future-incoming-response``, blocking on its
    pollable until it is ready; raises ``Err`` with the ``error-code``."""
    with future:
        while (outcome := future.get()) is None:
            with future.subscribe() as ready:
                ready.block()
    # `get` answers `Err` only when asked again after it answered once.
    assert isinstance(outcome, _bindings.Ok), "future-incoming-response was read twice"
    if isinstance(outcome.value, _bindings.Err):
        raise outcome.value
    return outcome.value.value


def _response(incoming: Any) -> Response:
    """A ``Response`` of an ``incoming-response``, its body read whole."""
    with incoming:
        status = incoming.status()
        headers = from_fields(incoming.headers())
        body = read_body(incoming.consume())
    return Response(body, status, headers)
