"""The component's entry point in world ``http-function``, for the build only: the
module componentize-py wraps (``componentize-py -w http-function ... componentize
tally.http_entry``). Functions never import it.

Like :mod:`tally.entry`, importing it imports the user's module ``app`` at build time.
It exports ``wasi:http/incoming-handler`` by the class name componentize-py 0.25 looks
for, ``IncomingHandler``: the app's own, if it defines one (a plain wasi:http
component), else one that serves ``app.handle`` (see :func:`tally.http._serve.serve`).
"""

from __future__ import annotations

from typing import Any

import app
from wit_world import exports

from .http._serve import find_handler, serve

if hasattr(app, "IncomingHandler"):
    IncomingHandler = app.IncomingHandler
else:
    _handle = find_handler(app)

    class IncomingHandler(exports.IncomingHandler):  # type: ignore[no-redef]
        """``wasi:http/incoming-handler`` serving ``app.handle``."""

        def handle(self, request: Any, response_out: Any) -> None:
            serve(_handle, request, response_out)
