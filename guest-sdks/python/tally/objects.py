"""Durable JSON objects of the invocation's book, with transactions across them
(BokiStore, Boki §5.2).

An object is named by a string (1 to 256 bytes) and holds one JSON value, ``null`` until
it is first written. Paths are JSON pointers (RFC 6901): ``""`` is the whole object and
``"/a/0/b~1c"`` is field ``b/c`` of element 0 of field ``a``; :func:`pointer` builds one
from keys and indexes. Writes make missing parent objects. Every call is exactly-once
across re-executions of the invocation, as :mod:`tally.state`'s are: a read returns what
it returned the first time, a write takes effect once.

:func:`get`, :func:`set` and :func:`push` take and return JSON text; :func:`get_json`,
:func:`set_json` and :func:`push_json` take and return Python values (through
:mod:`json`).

Outside a transaction, a read sees the object as of the invocation's last logged step
(its own writes included), and each write is logged on its own. Between :func:`begin`
and :func:`commit`, reads see one snapshot of every object of the book, taken at
``begin``, with the transaction's own writes, and writes are buffered: ``commit`` logs
them in one record and says whether they took effect. Transactions are serializable:
one commits exactly when no object it read was written by someone else between its
``begin`` and its commit; otherwise ``commit`` returns ``False`` and nothing of it takes
effect. :func:`transaction` runs a function in a transaction and runs it again while it
conflicts. Objects written but not read never conflict: :func:`increment` and
:func:`push` apply to whatever the field holds when the record is applied. An operation
that does not fit the object as the caller sees it (incrementing a string) raises
:class:`~tally.InvalidArgument`; one that stops fitting because of a concurrent write
does nothing.

>>> from tally import objects
>>> objects.set_json("cart-42", "", {"items": [], "total": 0})         # doctest: +SKIP
>>> objects.push_json("cart-42", "/items", {"sku": "apple", "n": 3})   # doctest: +SKIP
>>> objects.increment("cart-42", "/total", 3)                         # doctest: +SKIP
>>> objects.get("cart-42", objects.pointer("items", 0, "sku"))         # doctest: +SKIP
'"apple"'
>>> objects.get_json("cart-42", "/items/0/sku")                       # doctest: +SKIP
'apple'

>>> @objects.transaction(retries=5)
... def transfer(source: str, target: str, amount: int) -> bool:
...     if objects.get_json(source, "/balance", 0) < amount:
...         return False
...     objects.increment(source, "/balance", -amount)
...     objects.increment(target, "/balance", amount)
...     return True
>>> transfer("alice", "bob", 5)                                       # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import functools
import json as _json
from typing import Any, Callable, ParamSpec, SupportsIndex, TypeVar

from . import _bindings
from ._convert import to_bool, to_count, to_i64, to_str
from ._errors import TallyError, TransactionConflict, from_wit

__all__ = [
    "RETRIES_DEFAULT",
    "Transaction",
    "abort",
    "begin",
    "commit",
    "get",
    "get_json",
    "increment",
    "make_array",
    "make_object",
    "pointer",
    "push",
    "push_json",
    "remove",
    "set",
    "set_json",
    "transaction",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: How many times :func:`transaction` runs a conflicting transaction again, unless told.
RETRIES_DEFAULT = 10


def get(object: str, path: str) -> str | None:
    """The JSON text at ``path`` of ``object``, or ``None`` if nothing is there: a
    missing field or element, or for the whole object (``""``) one that holds ``null``:
    never written, removed whole, or set to ``null``."""
    object = to_str(object, "object")
    path = to_str(path, "path")
    try:
        return _bindings.objects.get(object, path)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def get_json(object: str, path: str, default: Any = None) -> Any:
    """The value at ``path`` of ``object`` decoded with :func:`json.loads` (a ``dict``,
    ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``), or ``default`` if nothing
    is there.

    A field that holds ``null`` is ``None`` whatever ``default`` is, so ``default`` tells
    a missing field from one that holds ``null``; a whole object (``""``) that holds
    ``null`` is nothing there, as :func:`get` says, so ``default``.
    """
    text = get(object, path)
    return default if text is None else _json.loads(text)


def set(object: str, path: str, json: str) -> None:
    """Sets the value at ``path`` of ``object`` to ``json``, a JSON text (``"{}"`` and
    ``"[]"`` make an empty object or array); text that is not JSON raises
    :class:`~tally.InvalidArgument`."""
    object = to_str(object, "object")
    path = to_str(path, "path")
    json = to_str(json, "json")
    try:
        _bindings.objects.set(object, path, json)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def set_json(object: str, path: str, value: Any) -> None:
    """Sets the value at ``path`` of ``object`` to ``value`` encoded with
    :func:`json.dumps`; a value it cannot encode raises ``TypeError``, and a ``float``
    NaN or infinity, which JSON lacks, ``ValueError``."""
    set(object, path, _dumps(value))


def increment(object: str, path: str, by: SupportsIndex = 1) -> None:
    """Adds ``by`` (an ``int`` from -2^63 to 2^63-1, negative to subtract) to the number
    at ``path`` of ``object``, 0 when nothing is there; integers saturate at the ends of
    that range.

    Outside a transaction's read set this never conflicts: it adds to whatever the field
    holds when the write is applied.
    """
    object = to_str(object, "object")
    path = to_str(path, "path")
    by = to_i64(by, "by")
    try:
        _bindings.objects.increment(object, path, by)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def push(object: str, path: str, json: str) -> None:
    """Appends the JSON text ``json`` to the array at ``path`` of ``object`` (an empty
    array when nothing is there)."""
    object = to_str(object, "object")
    path = to_str(path, "path")
    json = to_str(json, "json")
    try:
        _bindings.objects.push(object, path, json)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def push_json(object: str, path: str, value: Any) -> None:
    """Appends ``value`` encoded with :func:`json.dumps` to the array at ``path`` of
    ``object``, as :func:`push` (and with :func:`set_json`'s errors)."""
    push(object, path, _dumps(value))


def remove(object: str, path: str) -> None:
    """Removes the field or array element at ``path`` of ``object`` (nothing happens if
    it is missing); ``""`` empties the object."""
    object = to_str(object, "object")
    path = to_str(path, "path")
    try:
        _bindings.objects.remove(object, path)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def make_object(object: str, path: str) -> None:
    """Sets the value at ``path`` of ``object`` to an empty JSON object, ``{}``."""
    set(object, path, "{}")


def make_array(object: str, path: str) -> None:
    """Sets the value at ``path`` of ``object`` to an empty JSON array, ``[]``."""
    set(object, path, "[]")


def pointer(*tokens: str | SupportsIndex) -> str:
    """The JSON pointer to field or element ``tokens[0]``, then ``tokens[1]`` of that,
    and so on: a ``str`` is a field name, escaped as RFC 6901 says (``~`` as ``~0``,
    ``/`` as ``~1``), and an ``int`` an array index. No tokens is ``""``, the whole
    object.

    >>> pointer("items", 0, "a/b~c")
    '/items/0/a~1b~0c'
    >>> pointer()
    ''
    """
    parts = []
    for token in tokens:
        if isinstance(token, str):
            parts.append("/" + token.replace("~", "~0").replace("/", "~1"))
        elif isinstance(token, bool) or not hasattr(type(token), "__index__"):
            raise TypeError(f"a path token must be str or int, not {type(token).__name__}")
        else:
            parts.append(f"/{to_count(token, 'an array index')}")
    return "".join(parts)


def begin(*, read_only: bool = False) -> None:
    """Begins a transaction: reads then see one snapshot of every object of the book,
    taken now, and writes are buffered until :func:`commit`.

    One transaction at a time: beginning one inside another raises
    :class:`~tally.InvalidArgument`. A ``read_only`` transaction refuses writes (with
    ``InvalidArgument``) and always commits. Prefer :func:`transaction`, which ends the
    transaction whatever happens and retries it when it conflicts.
    """
    read_only = to_bool(read_only, "read_only")
    try:
        _bindings.objects.begin(read_only)
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def commit() -> bool:
    """Ends the transaction: ``True`` if it committed, ``False`` if it conflicted (an
    object it read was written by someone else since :func:`begin`), and then none of
    its writes took effect: begin again to retry.

    Without a transaction in progress it raises :class:`~tally.InvalidArgument`.
    """
    try:
        return _bindings.objects.commit()
    except _bindings.Err as error:
        raise from_wit(error.value) from None


def abort() -> None:
    """Ends the transaction without committing it: none of its writes take effect.

    Without a transaction in progress it raises :class:`~tally.InvalidArgument`.
    """
    try:
        _bindings.objects.abort()
    except _bindings.Err as error:
        raise from_wit(error.value) from None


class Transaction:
    """Runs a function in a transaction, again while it conflicts: made by
    :func:`transaction`, used as a decorator or with :meth:`run`."""

    __slots__ = ("read_only", "retries")

    def __init__(self, *, read_only: bool = False, retries: SupportsIndex = RETRIES_DEFAULT) -> None:
        #: Whether the transaction is read-only (it refuses writes and always commits).
        self.read_only: bool = to_bool(read_only, "read_only")
        #: How many times a conflicting transaction runs again.
        self.retries: int = to_count(retries, "retries")

    def __call__(self, body: Callable[_P, _T]) -> Callable[_P, _T]:
        """``body`` made to run in the transaction, with :meth:`run`, whenever it is
        called."""

        @functools.wraps(body)
        def in_transaction(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            return self.run(body, *args, **kwargs)

        return in_transaction

    def run(self, body: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Calls ``body(*args, **kwargs)`` between :func:`begin` and :func:`commit` and
        returns what it returned once a commit succeeds.

        While the commit conflicts, it begins again and calls ``body`` again, up to
        :attr:`retries` more times, then raises :class:`~tally.TransactionConflict`. An
        exception from ``body`` aborts the transaction and propagates (an error of the
        abort itself is dropped: the body's says what went wrong); an error from
        ``begin`` or ``commit`` propagates (``commit`` ends the transaction even then).
        """
        attempts = self.retries + 1
        for _ in range(attempts):
            begin(read_only=self.read_only)
            try:
                result = body(*args, **kwargs)
            except BaseException:
                # Ends the transaction, so that the invocation may begin another. It can
                # only fail when the body ended the transaction itself.
                with contextlib.suppress(TallyError):
                    abort()
                raise
            if commit():
                return result
        raise TransactionConflict(attempts)

    def __repr__(self) -> str:
        return f"Transaction(read_only={self.read_only!r}, retries={self.retries!r})"


def transaction(*, read_only: bool = False, retries: SupportsIndex = RETRIES_DEFAULT) -> Transaction:
    """A :class:`Transaction`: runs a function between :func:`begin` and :func:`commit`,
    and again while the commit conflicts, up to ``retries`` more times before it raises
    :class:`~tally.TransactionConflict`. An exception from the function aborts the
    transaction and propagates.

    As a decorator, each call of the function runs it in its own transaction and
    returns its result once committed::

        @objects.transaction(retries=5)
        def reserve(item: str) -> bool:
            stock = objects.get_json("stock", objects.pointer(item), 0)
            if stock == 0:
                return False
            objects.increment("stock", objects.pointer(item), -1)
            return True

        reserve("apple")

    or, to run a function once now, ``objects.transaction().run(body, *args)``.

    The function may run several times, so it should only read and write objects and
    compute: anything else it does (a log append, a call, a ``state`` write) is a step of
    its own, taken once per run. A ``read_only`` transaction refuses writes and always
    commits: it reads a consistent snapshot of several objects.
    """
    return Transaction(read_only=read_only, retries=retries)


def _dumps(value: Any) -> str:
    """``value`` as compact JSON text, refusing NaN and infinities (not JSON)."""
    return _json.dumps(value, separators=(",", ":"), allow_nan=False)
