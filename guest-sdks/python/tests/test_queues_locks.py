"""Queues, locks and the invocation's key over fake bindings: arguments, results, error
mapping, and the lock's ``with`` helper."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from fakes import Answers, Error_InvalidArgument, Error_TooLarge, Error_Unavailable

import tally
from tally import _bindings, context, locks, queues


def test_outside_a_component_calls_say_so():
    with pytest.raises(_bindings.HostUnavailable, match="queues.pop"):
        queues.pop("q", 0)
    with pytest.raises(_bindings.HostUnavailable, match="locks.acquire"):
        locks.acquire("l", 0)
    with pytest.raises(_bindings.HostUnavailable, match="context.key"):
        context.key()


def test_push_sends_bytes(fake):
    bindings = fake("queues")
    assert queues.push("jobs", b"a") is None
    queues.push("jobs", "é")
    queues.push("jobs", bytearray(b"b"))
    assert bindings.calls == [("push", ("jobs", b"a")), ("push", ("jobs", b"\xc3\xa9")), ("push", ("jobs", b"b"))]
    assert all(type(args[1]) is bytes for _, args in bindings.calls)


def test_pop_passes_its_timeout_in_milliseconds(fake):
    bindings = fake("queues", pop=Answers(bytearray(b"m"), None, b"", None))
    message = queues.pop("jobs", 1500)
    assert message == b"m" and type(message) is bytes
    assert queues.pop("jobs", 0) is None
    assert queues.pop("jobs", timedelta(seconds=2, microseconds=999)) == b""
    assert queues.pop(queue="jobs", timeout=tally.SeqNum(7)) is None
    assert bindings.calls == [("pop", ("jobs", 1500)), ("pop", ("jobs", 0)), ("pop", ("jobs", 2000)), ("pop", ("jobs", 7))]


def test_pop_many_gives_a_list_of_bytes(fake):
    bindings = fake("queues", pop_many=Answers([bytearray(b"a"), b"b"], []))
    messages = queues.pop_many("jobs", 8, timedelta(milliseconds=20))
    assert messages == [b"a", b"b"] and all(type(m) is bytes for m in messages)
    assert queues.pop_many(queue="jobs", max=100, timeout=0) == []
    assert bindings.calls == [("pop_many", ("jobs", 8, 20)), ("pop_many", ("jobs", 100, 0))]


@pytest.mark.parametrize(
    ("call", "kind", "text"),
    [
        (lambda: queues.pop_many("q", -1, 0), ValueError, "max must not be negative"),
        (lambda: queues.pop_many("q", 2**32, 0), ValueError, "max must be from 1 to 100"),
        (lambda: queues.pop_many("q", True, 0), TypeError, "max must be int, not bool"),
        (lambda: queues.push(b"q", b"m"), TypeError, "queue must be str, not bytes"),
        (lambda: queues.push("q", 1), TypeError, "message must be bytes or str, not int"),
        (lambda: queues.pop("q", -1), ValueError, "timeout in milliseconds must be from 0 to 2\\*\\*64-1, not -1"),
        (lambda: queues.pop("q", 1.5), TypeError, "timeout must be an int \\(milliseconds\\) or a datetime.timedelta, not float"),
        (lambda: queues.pop("q", True), TypeError, "not bool"),
        (lambda: queues.pop(None, 0), TypeError, "queue must be str, not NoneType"),
    ],
)
def test_queues_refuse_bad_arguments(fake, call, kind, text):
    bindings = fake("queues")
    with pytest.raises(kind, match=text):
        call()
    assert bindings.calls == []


def test_queue_errors_map(fake):
    fake("queues", push=_bindings.Err(Error_TooLarge("a message of 600000 bytes is over 524288")))
    with pytest.raises(tally.TooLarge, match="^too large: a message of 600000 bytes is over 524288$") as raised:
        queues.push("q", b"x")
    assert raised.value.__context__ is None or raised.value.__suppress_context__

    fake("queues", pop=_bindings.Err(Error_InvalidArgument("a queue name is 1 to 256 bytes, not 0")))
    with pytest.raises(tally.InvalidArgument, match="queue name"):
        queues.pop("", 0)


def test_acquire_and_release(fake):
    bindings = fake("locks", acquire=Answers(True, False, True))
    assert locks.acquire("inventory", 5000) is True
    assert locks.acquire("inventory", 0) is False
    assert locks.acquire("inventory", timedelta(minutes=1)) is True
    assert locks.release("inventory") is None
    assert bindings.calls == [
        ("acquire", ("inventory", 5000)),
        ("acquire", ("inventory", 0)),
        ("acquire", ("inventory", 60_000)),
        ("release", ("inventory",)),
    ]


@pytest.mark.parametrize(
    ("call", "kind", "text"),
    [
        (lambda: locks.acquire(1, 0), TypeError, "lock must be str, not int"),
        (lambda: locks.acquire("l", timedelta(seconds=-1)), ValueError, "timeout must not be negative"),
        (lambda: locks.acquire("l", "5"), TypeError, "not str"),
        (lambda: locks.release(b"l"), TypeError, "lock must be str, not bytes"),
        (lambda: locks.holding("l", -1).__enter__(), ValueError, "must be from 0 to 2\\*\\*64-1"),
    ],
)
def test_locks_refuse_bad_arguments(fake, call, kind, text):
    bindings = fake("locks")
    with pytest.raises(kind, match=text):
        call()
    assert bindings.calls == []


def test_lock_errors_map(fake):
    fake("locks", release=_bindings.Err(Error_InvalidArgument('this invocation does not hold lock "l"')))
    with pytest.raises(tally.InvalidArgument, match='^invalid argument: this invocation does not hold lock "l"$') as raised:
        locks.release("l")
    assert raised.value.__context__ is None or raised.value.__suppress_context__

    fake("locks", acquire=_bindings.Err(Error_Unavailable("no quorum")))
    with pytest.raises(tally.Unavailable):
        locks.acquire("l", 10)


def test_holding_releases_however_the_block_ends(fake):
    bindings = fake("locks", acquire=True)
    with locks.holding("inventory", timedelta(seconds=5)):
        bindings.calls.append(("body", ()))
    with pytest.raises(ValueError, match="out of stock"), locks.holding("inventory", 10):
        raise ValueError("out of stock")
    assert bindings.calls == [
        ("acquire", ("inventory", 5000)),
        ("body", ()),
        ("release", ("inventory",)),
        ("acquire", ("inventory", 10)),
        ("release", ("inventory",)),
    ]


def test_holding_raises_timeout_when_the_wait_times_out(fake):
    bindings = fake("locks", acquire=False)
    ran = []
    with pytest.raises(tally.Timeout, match="^timeout: lock 'inventory' was not acquired within 250 ms$"), locks.holding("inventory", 250):
        ran.append(1)
    assert ran == []
    assert bindings.calls == [("acquire", ("inventory", 250))]


@pytest.mark.parametrize("key", ["cart-42", "", None])
def test_key(monkeypatch, key):
    monkeypatch.setattr(_bindings, "context", SimpleNamespace(key=lambda: key))
    assert context.key() == key
