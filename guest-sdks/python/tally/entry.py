"""The component's entry point, for the build only: the module componentize-py wraps
(``componentize-py ... componentize tally.entry``). Functions never import it.

Importing it imports the user's module ``app`` (``app.py`` of the project), when the
component is pre-initialized at build time, so the module-level code of ``app`` and of
everything it imports runs once, at build time, and every invocation starts from that
snapshot. It exports ``app.handle`` as the world's ``handle``; see
:func:`tally._handler.call_handler` for how its result and its exceptions reach the
caller.
"""

from __future__ import annotations

import app

from ._handler import call_handler, find_handle

_handle = find_handle(app)


class WitWorld:
    """The export of world ``tally:platform/function``, by the name componentize-py
    0.25 looks for in this module."""

    def handle(self, input: bytes) -> bytes:
        """``handle: func(input: list<u8>) -> result<list<u8>, string>``."""
        return call_handler(_handle, input)
