"""A fake of the wasi:http bindings (``wit_world.imports.wasi_http_types``, ``streams``
and ``outgoing_handler``): enough resources to run the SDK's serve and fetch over, with
streams that take and give a few bytes at a time."""

from dataclasses import dataclass, field
from typing import Any, Optional

from tally._bindings import Err, Ok


class Resource:
    """A resource: usable as a context manager, which drops it."""

    dropped = False

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.dropped = True


@dataclass
class Method_Get:
    pass


@dataclass
class Method_Post:
    pass


@dataclass
class Method_Other:
    value: str


@dataclass
class Scheme_Http:
    pass


@dataclass
class Scheme_Https:
    pass


@dataclass
class ErrorCode_HttpRequestDenied:
    pass


@dataclass
class ErrorCode_InternalError:
    value: Optional[str]


@dataclass
class DnsErrorPayload:
    rcode: Optional[str]
    info_code: Optional[int]


@dataclass
class ErrorCode_DnsError:
    value: DnsErrorPayload


@dataclass
class HeaderError_Forbidden:
    pass


@dataclass
class StreamError_Closed:
    pass


@dataclass
class StreamError_LastOperationFailed:
    value: Any


class Fields(Resource):
    def __init__(self, entries=()):
        self.list = list(entries)

    @classmethod
    def from_list(cls, entries):
        if any(name.lower() == "connection" for name, _ in entries):
            raise Err(HeaderError_Forbidden())
        return cls(entries)

    def entries(self):
        return list(self.list)


class Pollable(Resource):
    def block(self):
        pass


class InputStream(Resource):
    """Gives its data 2 bytes at a time, then `closed`, or `failure` if set."""

    def __init__(self, data: bytes, failure: Any = None):
        self.data = data
        self.failure = failure

    def blocking_read(self, n):
        if not self.data:
            raise Err(self.failure or StreamError_Closed())
        chunk, self.data = self.data[: min(n, 2)], self.data[min(n, 2) :]
        return chunk


class IncomingBody(Resource):
    def __init__(self, data: bytes, failure: Any = None):
        self.input = InputStream(data, failure)
        self.finished = False

    def stream(self):
        return self.input

    @staticmethod
    def finish(body):
        body.finished = True
        return Resource()


class OutputStream(Resource):
    """Takes 3 bytes at a time, and none every other time it is asked."""

    def __init__(self):
        self.written = b""
        self.flushed = False
        self.turn = 0

    def check_write(self):
        self.turn += 1
        return 3 if self.turn % 2 else 0

    def subscribe(self):
        return Pollable()

    def write(self, chunk):
        assert len(chunk) <= 3
        self.written += chunk

    def blocking_flush(self):
        self.flushed = True


class OutgoingBody(Resource):
    def __init__(self):
        self.output = OutputStream()
        self.finished = False

    def write(self):
        return self.output

    @staticmethod
    def finish(body, trailers):
        assert body.output.dropped, "the stream is a child of the body"
        body.finished = True


class OutgoingRequest(Resource):
    def __init__(self, headers):
        self.headers = headers
        self.outgoing = OutgoingBody()
        self.method = self.scheme = self.authority = self.path = None

    def set_method(self, method):
        self.method = method

    def set_scheme(self, scheme):
        self.scheme = scheme

    def set_authority(self, authority):
        self.authority = authority

    def set_path_with_query(self, path):
        self.path = path

    def body(self):
        return self.outgoing


class IncomingResponse(Resource):
    def __init__(self, status, entries, data):
        self._status, self._fields, self._body = status, Fields(entries), IncomingBody(data)

    def status(self):
        return self._status

    def headers(self):
        return self._fields

    def consume(self):
        return self._body


class FutureIncomingResponse(Resource):
    """Not ready the first time it is asked."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.asked = 0

    def get(self):
        self.asked += 1
        return None if self.asked == 1 else self.outcome

    def subscribe(self):
        return Pollable()


class IncomingRequest(Resource):
    def __init__(self, method, path, entries, data):
        self._method, self._path, self._fields, self._body = method, path, Fields(entries), IncomingBody(data)

    def method(self):
        return self._method

    def path_with_query(self):
        return self._path

    def headers(self):
        return self._fields

    def consume(self):
        return self._body


class OutgoingResponse(Resource):
    def __init__(self, headers):
        self.headers = headers
        self.status = 200
        self.outgoing = OutgoingBody()

    def set_status_code(self, status):
        self.status = status

    def body(self):
        return self.outgoing


@dataclass
class ResponseOutparam:
    response: Any = None

    @staticmethod
    def set(param, response):
        param.response = response


def http_error_code(error):
    return error


@dataclass
class OutgoingHandler:
    """`outgoing_handler`: answers every request with `outcome` (raised if an `Err`)."""

    outcome: Any
    sent: list = field(default_factory=list)

    def handle(self, request, options):
        self.sent.append(request)
        if isinstance(self.outcome, Err):
            raise self.outcome
        return FutureIncomingResponse(self.outcome)


def ok_response(status=200, entries=(), data=b""):
    return Ok(Ok(IncomingResponse(status, list(entries), data)))
