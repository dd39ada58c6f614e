"""The function's settings: the values given at deploy (``--config K=V``, ``--secret
K=V``) or with ``tally config set``, read through ``wasi:config/store``.

Secrets read like any other setting: keep them out of logs, errors and responses. A
re-execution of the invocation reads what the first execution read. Both worlds
(``function`` and ``http-function``) have them.

>>> from tally import config
>>> config.get("upstream")                 # doctest: +SKIP
'http://127.0.0.1:9000/sink'
>>> config.get("missing") is None          # doctest: +SKIP
True
>>> sorted(config.get_all())               # doctest: +SKIP
['upstream', 'webhook_secret']
"""

from __future__ import annotations

from . import _bindings
from ._convert import to_str
from ._errors import Unavailable

__all__ = ["get", "get_all"]


def get(key: str) -> str | None:
    """The setting ``key``, or ``None`` if the function has no such setting."""
    key = to_str(key, "key")
    try:
        return _bindings.config.get(key)
    except _bindings.Err as error:
        raise _from_wit(error.value) from None


def get_all() -> dict[str, str]:
    """Every setting of the function, by key."""
    try:
        return dict(_bindings.config.get_all())
    except _bindings.Err as error:
        raise _from_wit(error.value) from None


def _from_wit(error: object) -> Unavailable:
    """A ``wasi:config/store`` error (``upstream`` or ``io``, each with a message) as
    :class:`~tally.Unavailable`: both say the settings could not be read right now."""
    kind = type(error).__name__.removeprefix("Error_").lower()
    return Unavailable(f"the settings could not be read ({kind}): {getattr(error, 'value', error)}")
