"""The seam between the SDK and the bindings componentize-py generates for world
``tally:platform/function``.

Inside a component, componentize-py generates the package ``wit_world`` (one module per
imported interface under ``wit_world.imports``) and the module ``componentize_py_types``
(whose ``Err`` exception carries the ``err`` case of a WIT ``result``), and this module
imports them when the component is pre-initialized at build time, so no invocation pays
for it. On the host they do not exist: the SDK still imports, its pure parts work, and
the interfaces below are stand-ins that raise :class:`HostUnavailable` when used. Tests
replace ``tally._bindings.log`` (and ``state``, ``invoke``, ``context``, ``objects``,
``queues``, ``locks``) with fakes; the SDK looks them up here on every call so that
replacing them works.

Nothing here is public API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Err", "HostUnavailable", "context", "invoke", "locks", "log", "objects", "queues", "state"]

# The modules componentize-py generates; any other missing module is a real error.
_GENERATED = ("componentize_py_types", "wit_world")


class HostUnavailable(RuntimeError):
    """A call to the platform outside a Tally component (on the host, in a test)."""


class _Missing:
    """Stands in for a generated interface module on the host."""

    def __init__(self, interface: str) -> None:
        self._interface = interface

    def __getattr__(self, name: str) -> Any:
        raise HostUnavailable(
            f"tally:platform/{self._interface}.{name.replace('_', '-')} is only available "
            "inside a component built with componentize-py (see the SDK's README)"
        )


try:
    from componentize_py_types import Err
    from wit_world.imports import context, invoke, locks, log, objects, queues, state
except ModuleNotFoundError as error:
    if error.name is None or error.name.split(".")[0] not in _GENERATED:
        raise

    @dataclass(frozen=True)
    class Err(Exception):  # type: ignore[no-redef]
        """The host's stand-in for ``componentize_py_types.Err``: same shape."""

        value: Any

    context = _Missing("context")  # type: ignore[assignment]
    invoke = _Missing("invoke")  # type: ignore[assignment]
    locks = _Missing("locks")  # type: ignore[assignment]
    log = _Missing("log")  # type: ignore[assignment]
    objects = _Missing("objects")  # type: ignore[assignment]
    queues = _Missing("queues")  # type: ignore[assignment]
    state = _Missing("state")  # type: ignore[assignment]
