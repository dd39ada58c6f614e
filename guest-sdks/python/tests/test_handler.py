"""How a handler's result and exceptions become the export's result."""

import pytest

from tally import NotFound, _bindings
from tally._handler import call_handler, error_message, find_handle


def returning(output):
    return lambda input: output


def raising(error):
    def handle(input):
        raise error

    return handle


@pytest.mark.parametrize(
    ("output", "expect"),
    [(b"out", b"out"), ("out", b"out"), ("é", b"\xc3\xa9"), (bytearray(b"out"), b"out"), (memoryview(b"out"), b"out"), (b"", b"")],
)
def test_output_is_bytes(output, expect):
    result = call_handler(returning(output), b"in")
    assert result == expect
    assert type(result) is bytes


def test_the_input_reaches_the_handler():
    assert call_handler(lambda input: input[::-1], b"abc") == b"cba"


def err_of(handle) -> str:
    with pytest.raises(_bindings.Err) as raised:
        call_handler(handle, b"in")
    return raised.value.value


def test_an_exception_is_the_error_message(capsys):
    assert err_of(raising(ValueError("bad amount"))) == "bad amount"
    assert "ValueError: bad amount" in capsys.readouterr().err


def test_a_platform_error_keeps_its_text():
    assert err_of(raising(NotFound("no function named f"))) == "not found: no function named f"


def test_an_explicit_empty_message_stays_empty():
    assert err_of(raising(ValueError(""))) == ""


def test_an_exception_without_arguments_shows_its_class():
    assert err_of(raising(KeyError)) == "KeyError"
    assert err_of(raising(RuntimeError())) == "RuntimeError"


def test_the_cause_chain_is_shown_like_anyhow():
    def handle(input):
        try:
            int("x")
        except ValueError as error:
            raise RuntimeError("reading the amount") from error

    assert err_of(handle) == "reading the amount: invalid literal for int() with base 10: 'x'"


def test_an_implicit_context_is_not_shown():
    def handle(input):
        try:
            int("x")
        except ValueError:
            raise RuntimeError("no amount")

    assert err_of(handle) == "no amount"


def test_a_bad_output_type_is_an_error():
    assert err_of(returning(None)) == "handle returned NoneType, not bytes or str"
    assert err_of(returning(42)) == "handle returned int, not bytes or str"


def test_a_broken_str_shows_the_class():
    class Broken(Exception):
        def __str__(self):
            raise RuntimeError("no")

    assert err_of(raising(Broken("x"))) == "Broken"


def test_base_exceptions_propagate():
    # componentize-py traps the invocation on these.
    with pytest.raises(SystemExit):
        call_handler(raising(SystemExit(3)), b"in")
    with pytest.raises(KeyboardInterrupt):
        call_handler(raising(KeyboardInterrupt()), b"in")


def test_error_message_stops_at_a_cycle():
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert error_message(first) == "a: b"


def test_find_handle():
    class App:
        __name__ = "app"

        @staticmethod
        def handle(input):
            return input

    assert find_handle(App)(b"x") == b"x"
    with pytest.raises(TypeError, match="must define"):
        find_handle(type("app", (), {"__name__": "app"}))
