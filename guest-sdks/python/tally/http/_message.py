"""Requests and responses as plain values: what a handler gets and returns, and what
:func:`tally.http.fetch` sends and gets back. Nothing here touches wasi:http."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Mapping, Union

from .._convert import BytesLike, to_bytes

__all__ = ["Headers", "HeadersLike", "Request", "Response"]

#: What the SDK takes as headers: :class:`Headers`, a mapping of names to values, or
#: ``(name, value)`` pairs (a name may repeat); values are ``str`` or ``bytes``.
HeadersLike = Union["Headers", Mapping[str, Union[str, bytes]], Iterable[tuple[str, Union[str, bytes]]], None]


class Headers:
    """HTTP header fields, in order, with repeated names kept.

    Names compare without case (``headers["Content-Type"]`` finds ``content-type``).
    Values are ``str``: the bytes on the wire decoded as Latin-1, which keeps every
    byte as it came (HTTP gives non-ASCII bytes no encoding); ``bytes`` given are taken
    the same way, and a ``str`` beyond Latin-1 raises ``ValueError``.
    """

    def __init__(self, fields: HeadersLike = None) -> None:
        self._fields: list[tuple[str, str]] = []
        if fields is None:
            return
        pairs = fields.items() if isinstance(fields, (Headers, Mapping)) else fields
        for name, value in pairs:
            self.add(name, value)

    def add(self, name: str, value: str | bytes) -> None:
        """Adds a field, after any of the same name."""
        self._fields.append((_name(name), _value(value)))

    def set(self, name: str, value: str | bytes) -> None:
        """Replaces every field named ``name`` with one."""
        self.remove(name)
        self.add(name, value)

    def remove(self, name: str) -> None:
        """Removes every field named ``name``; nothing happens if there is none."""
        lower = _name(name).lower()
        self._fields = [(n, v) for n, v in self._fields if n.lower() != lower]

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of ``name``, or ``default``."""
        lower = name.lower()
        return next((v for n, v in self._fields if n.lower() == lower), default)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order."""
        lower = name.lower()
        return [v for n, v in self._fields if n.lower() == lower]

    def items(self) -> list[tuple[str, str]]:
        """Every field as ``(name, value)``, in order, repeated names included."""
        return list(self._fields)

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self._fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and self._fields == other._fields

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


def _name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a header name must be str, not {type(name).__name__}")
    return name


def _value(value: str | bytes) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("latin-1")
    if not isinstance(value, str):
        raise TypeError(f"a header value must be str or bytes, not {type(value).__name__}")
    value.encode("latin-1")  # raises UnicodeEncodeError, a ValueError
    return value


class _Body:
    """The body of a request or a response, and ways to read it."""

    body: bytes

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded (UTF-8 unless told)."""
        return self.body.decode(encoding)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class Request(_Body):
    """An HTTP request: what a handler gets.

    ``path`` is the path below the function's route with the query, as the client sent
    it (``/fn/shop/orders/17?expand=items`` arrives as ``/orders/17?expand=items``, and
    ``/fn/shop`` as ``/``).
    """

    def __init__(self, method: str, path: str, headers: HeadersLike = None, body: BytesLike = b"") -> None:
        #: The method, as sent (``GET``, ``POST``, ...).
        self.method: str = method
        #: The path with the query.
        self.path: str = path
        self.headers: Headers = Headers(headers)
        #: The whole body.
        self.body: bytes = to_bytes(body, "body")

    @property
    def query(self) -> str:
        """The query: what follows the first ``?`` of :attr:`path`, or ``""``
        (``urllib.parse.parse_qs`` parses it)."""
        return self.path.partition("?")[2]

    def __repr__(self) -> str:
        return f"Request({self.method!r}, {self.path!r}, {self.headers!r}, {len(self.body)} bytes)"


class Response(_Body):
    """An HTTP response: what a handler returns, and what :func:`tally.http.fetch` gets.

    A ``str`` body is sent as UTF-8, with ``content-type: text/plain; charset=utf-8``
    unless the headers name a content type.
    """

    def __init__(self, body: BytesLike = b"", status: int = 200, headers: HeadersLike = None) -> None:
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError(f"status must be int, not {type(status).__name__}")
        if not 100 <= status <= 999:
            raise ValueError(f"status must be from 100 to 999, not {status}")
        self.status: int = status
        self.headers: Headers = Headers(headers)
        if isinstance(body, str) and "content-type" not in self.headers:
            self.headers.add("content-type", "text/plain; charset=utf-8")
        self.body: bytes = to_bytes(body, "body")

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status <= 299

    def __repr__(self) -> str:
        return f"Response({len(self.body)} bytes, {self.status}, {self.headers!r})"
