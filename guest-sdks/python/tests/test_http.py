"""HTTP functions and requests out, over a fake of wasi:http (``fake_http``)."""

import fake_http
import pytest

from tally import _bindings, http, state
from tally._bindings import Err, Ok
from tally.http._serve import call_handler, find_handler, serve
from tally.http._wasi import error_code_name, from_method, to_method


@pytest.fixture
def wasi(monkeypatch):
    """Puts the fake wasi:http in place; returns a function that sets what requests out get."""
    monkeypatch.setattr(_bindings, "http_types", fake_http)

    def answer(outcome):
        handler = fake_http.OutgoingHandler(outcome)
        monkeypatch.setattr(_bindings, "outgoing_handler", handler)
        return handler

    return answer


# Headers


def test_headers_keep_order_and_repeats_and_ignore_case():
    headers = http.Headers([("Set-Cookie", "a=1"), ("content-type", "text/plain"), ("set-cookie", b"b=2")])
    assert headers.get_all("SET-COOKIE") == ["a=1", "b=2"]
    assert headers["Content-Type"] == "text/plain"
    assert "set-cookie" in headers and "x" not in headers
    assert headers.get("x") is None and headers.get("x", "d") == "d"
    headers.set("set-cookie", "c=3")
    assert headers.items() == [("content-type", "text/plain"), ("set-cookie", "c=3")]
    headers.remove("CONTENT-TYPE")
    assert list(headers) == [("set-cookie", "c=3")] and len(headers) == 1
    with pytest.raises(KeyError):
        headers["x"]


def test_header_values_are_latin_1():
    assert http.Headers({"x": b"\xe9\xff"})["x"] == "\xe9\xff"
    with pytest.raises(ValueError):
        http.Headers({"x": "\u20ac"})
    with pytest.raises(TypeError):
        http.Headers({"x": 1})


# Requests and responses


def test_a_request_has_its_query_and_body():
    request = http.Request("POST", "/orders/17?expand=items&x=1", {"a": "b"}, '{"n": 1}')
    assert request.query == "expand=items&x=1"
    assert http.Request("GET", "/").query == ""
    assert request.body == b'{"n": 1}' and request.json() == {"n": 1} and request.text() == '{"n": 1}'


def test_a_text_response_is_utf_8_text_plain_unless_told():
    assert http.Response("é").body == b"\xc3\xa9"
    assert http.Response("x").headers.items() == [("content-type", "text/plain; charset=utf-8")]
    assert http.Response("x", headers={"Content-Type": "text/html"}).headers.items() == [("Content-Type", "text/html")]
    assert http.Response(b"x").headers.items() == []


@pytest.mark.parametrize(("status", "error"), [(99, ValueError), (1000, ValueError), (True, TypeError), ("200", TypeError)])
def test_a_status_is_checked(status, error):
    with pytest.raises(error):
        http.Response(status=status)


def test_ok_is_2xx():
    assert http.Response(status=204).ok and not http.Response(status=301).ok


# Names between the SDK and wasi:http


def test_methods_round_trip(wasi):
    assert from_method(fake_http.Method_Post()) == "POST"
    assert from_method(fake_http.Method_Other("PURGE")) == "PURGE"
    assert to_method("GET") == fake_http.Method_Get()
    assert to_method("get") == fake_http.Method_Other("get")
    assert to_method("PURGE") == fake_http.Method_Other("PURGE")


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (fake_http.ErrorCode_HttpRequestDenied(), "HTTP-request-denied"),
        (fake_http.ErrorCode_InternalError("no route"), "internal-error: no route"),
        (fake_http.ErrorCode_InternalError(None), "internal-error"),
        (fake_http.ErrorCode_DnsError(fake_http.DnsErrorPayload("NXDOMAIN", None)), "DNS-error: rcode='NXDOMAIN'"),
        (fake_http.HeaderError_Forbidden(), "forbidden"),
    ],
)
def test_error_codes_are_named_as_in_the_wit(code, name):
    assert error_code_name(code) == name


# Serving


def served(handle, request):
    """Serves `request` with `handle`; returns the outparam's response."""
    out = fake_http.ResponseOutparam()
    serve(handle, request, out)
    assert isinstance(out.response, Ok)
    response = out.response.value
    assert response.outgoing.finished and response.outgoing.output.flushed
    return response


def test_a_request_reaches_the_handler_whole_and_its_response_goes_back(wasi):
    seen = []

    def handle(request):
        seen.append(request)
        return http.Response("created", 201, [("x-a", "1"), ("x-a", "2")])

    incoming = fake_http.IncomingRequest(fake_http.Method_Post(), "/a?b=c", [("x", b"1"), ("X", b"2")], b"hello body")
    response = served(handle, incoming)
    (request,) = seen
    assert (request.method, request.path, request.body) == ("POST", "/a?b=c", b"hello body")
    assert request.headers.get_all("x") == ["1", "2"]
    assert incoming.dropped and incoming._body.finished and incoming._fields.dropped
    assert response.status == 201
    assert response.headers.list == [("x-a", b"1"), ("x-a", b"2"), ("content-type", b"text/plain; charset=utf-8")]
    assert response.outgoing.output.written == b"created"


def test_text_from_the_handler_is_a_200(wasi):
    response = served(lambda request: "hi", fake_http.IncomingRequest(fake_http.Method_Get(), None, [], b""))
    assert (response.status, response.outgoing.output.written) == (200, b"hi")


def test_an_exception_is_a_500_that_says_nothing_of_it(capsys):
    def handle(request):
        raise RuntimeError("the secret is hunter2")

    response = call_handler(handle, http.Request("GET", "/"))
    assert (response.status, response.body) == (500, b"internal server error")
    assert "hunter2" in capsys.readouterr().err


def test_a_handler_returning_something_else_is_a_500(capsys):
    assert call_handler(lambda request: 42, http.Request("GET", "/")).status == 500
    assert "handle returned int" in capsys.readouterr().err


def test_refused_response_headers_are_a_500(wasi, capsys):
    response = served(lambda request: http.Response("x", headers={"connection": "close"}), fake_http.IncomingRequest(fake_http.Method_Get(), "/", [], b""))
    assert (response.status, response.outgoing.output.written) == (500, b"internal server error")
    assert "forbidden" in capsys.readouterr().err


def test_the_handler_must_exist():
    class App:
        __name__ = "app"

    with pytest.raises(TypeError, match="must define `def handle"):
        find_handler(App())


def test_state_works_inside_a_handler(wasi, fake):
    fake("state", get=b"41")

    def handle(request):
        count = (state.get_i64("hits", request.path) or 0) + 1
        state.put_i64("hits", request.path, count)
        return str(count)

    response = served(handle, fake_http.IncomingRequest(fake_http.Method_Get(), "/p", [], b""))
    assert response.outgoing.output.written == b"42"


# Requests out


def test_fetch_sends_the_request_and_reads_the_response(wasi):
    handler = wasi(fake_http.ok_response(202, [("x-r", b"1"), ("x-r", b"2")], b"accepted"))
    response = http.fetch(
        "https://api.example.com:8443/v1/hooks?a=1",
        method="POST",
        headers={"content-type": "application/octet-stream"},
        body=b"payload",
    )
    (sent,) = handler.sent
    assert sent.method == fake_http.Method_Post() and sent.scheme == fake_http.Scheme_Https()
    assert (sent.authority, sent.path) == ("api.example.com:8443", "/v1/hooks?a=1")
    assert sent.headers.list == [("content-type", b"application/octet-stream")]
    assert sent.outgoing.output.written == b"payload" and sent.outgoing.finished
    assert (response.status, response.body, response.headers.get_all("x-r")) == (202, b"accepted", ["1", "2"])


def test_a_url_without_a_path_asks_for_the_root(wasi):
    handler = wasi(fake_http.ok_response())
    http.fetch("http://127.0.0.1:9000")
    assert handler.sent[0].path == "/" and handler.sent[0].method == fake_http.Method_Get()


def test_a_refused_request_is_a_fetch_error_naming_the_origin_only(wasi):
    wasi(Err(fake_http.ErrorCode_HttpRequestDenied()))
    with pytest.raises(http.FetchError) as raised:
        http.fetch("http://127.0.0.1:9000/secret-path?token=s3cret")
    assert str(raised.value) == "fetch from http://127.0.0.1:9000 failed: HTTP-request-denied"
    assert (raised.value.origin, raised.value.code) == ("http://127.0.0.1:9000", "HTTP-request-denied")


def test_a_failed_response_is_a_fetch_error(wasi):
    wasi(Ok(Err(fake_http.ErrorCode_InternalError("connection reset"))))
    with pytest.raises(http.FetchError, match="failed: internal-error: connection reset$"):
        http.fetch("http://127.0.0.1:9000/")


def test_a_body_that_fails_is_a_fetch_error_with_its_code(wasi):
    response = fake_http.IncomingResponse(200, [], b"part")
    response._body = fake_http.IncomingBody(b"part", fake_http.StreamError_LastOperationFailed(fake_http.ErrorCode_InternalError("too big")))
    wasi(Ok(Ok(response)))
    with pytest.raises(http.FetchError, match="failed: internal-error: too big$"):
        http.fetch("http://127.0.0.1:9000/")


@pytest.mark.parametrize("url", ["ftp://example.com/", "/relative", "http:///no-host"])
def test_only_absolute_http_urls_are_fetched(wasi, url):
    with pytest.raises(ValueError, match="absolute"):
        http.fetch(url)


def test_outside_world_http_function_fetch_is_unavailable():
    with pytest.raises(_bindings.HostUnavailable, match='world = "http-function"'):
        http.fetch("http://127.0.0.1:9000/")
