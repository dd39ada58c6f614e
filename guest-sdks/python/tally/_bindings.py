"""The seam between the SDK and the bindings componentize-py generates for world
``tally:platform/function`` or ``tally:platform/http-function``.

Inside a component, componentize-py generates the package ``wit_world`` (one module per
imported interface under ``wit_world.imports``) and the module ``componentize_py_types``
(whose ``Err`` exception carries the ``err`` case of a WIT ``result``), and this module
imports them when the component is pre-initialized at build time, so no invocation pays
for it. On the host they do not exist: the SDK still imports, its pure parts work, and
the interfaces below are stand-ins that raise :class:`HostUnavailable` when used. Tests
replace ``tally._bindings.log`` (and ``state``, ``invoke``, ``context``, ``objects``,
``queues``, ``locks``, ``config``) with fakes; the SDK looks them up here on every call
so that replacing them works.

The wasi:http interfaces (``http_types``, ``outgoing_handler``, ``streams``) exist only
in world ``http-function``; in world ``function`` they are stand-ins too.

Nothing here is public API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Err",
    "HostUnavailable",
    "Ok",
    "config",
    "context",
    "http_types",
    "invoke",
    "locks",
    "log",
    "objects",
    "outgoing_handler",
    "queues",
    "state",
    "streams",
]

# The modules componentize-py generates; any other missing module is a real error.
_GENERATED = ("componentize_py_types", "wit_world")


class HostUnavailable(RuntimeError):
    """A call to the platform outside a Tally component (on the host, in a test)."""


class _Missing:
    """Stands in for a generated interface module on the host."""

    def __init__(self, interface: str, where: str = "inside a component built with componentize-py") -> None:
        self._interface = interface
        self._where = where

    def __getattr__(self, name: str) -> Any:
        raise HostUnavailable(
            f"{self._interface}.{name.replace('_', '-')} is only available {self._where} (see the SDK's README)"
        )


def _generated(error: ImportError) -> bool:
    """Whether the missing module is one componentize-py generates. A module of
    ``wit_world.imports`` that the world lacks is an ``ImportError`` ("cannot import
    name") naming the package, not a ``ModuleNotFoundError``."""
    return error.name is not None and error.name.split(".")[0] in _GENERATED


try:
    from componentize_py_types import Err, Ok
    from wit_world.imports import context, invoke, locks, log, objects, queues, state
    from wit_world.imports import store as config
except ImportError as error:
    if not _generated(error):
        raise

    @dataclass(frozen=True)
    class Err(Exception):  # type: ignore[no-redef]
        """The host's stand-in for ``componentize_py_types.Err``: same shape."""

        value: Any

    @dataclass(frozen=True)
    class Ok:  # type: ignore[no-redef]
        """The host's stand-in for ``componentize_py_types.Ok``: same shape."""

        value: Any

    context = _Missing("tally:platform/context")  # type: ignore[assignment]
    invoke = _Missing("tally:platform/invoke")  # type: ignore[assignment]
    locks = _Missing("tally:platform/locks")  # type: ignore[assignment]
    log = _Missing("tally:platform/log")  # type: ignore[assignment]
    objects = _Missing("tally:platform/objects")  # type: ignore[assignment]
    queues = _Missing("tally:platform/queues")  # type: ignore[assignment]
    state = _Missing("tally:platform/state")  # type: ignore[assignment]
    config = _Missing("wasi:config/store")  # type: ignore[assignment]

# componentize-py names wasi:http/types `wasi_http_types` because tally:platform/types
# takes `types`.
try:
    from wit_world.imports import outgoing_handler, streams
    from wit_world.imports import wasi_http_types as http_types
except ImportError as error:
    if not _generated(error):
        raise
    _HTTP_WORLD = 'in a component of world http-function (world = "http-function" in tally.toml)'
    http_types = _Missing("wasi:http/types", _HTTP_WORLD)  # type: ignore[assignment]
    outgoing_handler = _Missing("wasi:http/outgoing-handler", _HTTP_WORLD)  # type: ignore[assignment]
    streams = _Missing("wasi:io/streams", _HTTP_WORLD)  # type: ignore[assignment]
