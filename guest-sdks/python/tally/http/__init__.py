"""HTTP functions, and requests out.

A function built for world ``http-function`` (``world = "http-function"`` in its
``tally.toml``) is served at ``/fn/NAME/...``: its ``app.py`` defines
``handle(request)``, which gets a :class:`Request` and returns a :class:`Response` (or
``str``/``bytes``, the body of a 200). State, the log, calls and the rest of the SDK
work inside it as in any function.

>>> from tally import http, state
>>> def handle(request: http.Request) -> http.Response:
...     if request.method != "POST":
...         return http.Response("use POST", 405)
...     seen = (state.get_i64("hits", request.path) or 0) + 1
...     state.put_i64("hits", request.path, seen)
...     return http.Response(f"{seen} hits", headers={"content-type": "text/plain"})

The request's body is read whole before ``handle`` runs, and the response's body is
written whole after it returns: the platform bounds both (``request_bytes_max`` and
``response_bytes_max`` of the function). An exception from ``handle`` is a 500 whose
body says nothing of it; its traceback goes to the node's log.

:func:`fetch` sends a request out (world ``http-function`` only), to the destinations
allowed at deploy (``--outbound``):

>>> answer = http.fetch("http://127.0.0.1:9000/sink", method="POST", body=b"hi")   # doctest: +SKIP
>>> answer.status, answer.text()                                                  # doctest: +SKIP
(200, 'ok')

An ``app.py`` that defines a wasi:http ``IncomingHandler`` class instead (the one
componentize-py's proxy examples write) is built as it is.
"""

from ._fetch import FetchError, fetch
from ._message import Headers, HeadersLike, Request, Response

__all__ = ["FetchError", "Headers", "HeadersLike", "Request", "Response", "fetch"]
