"""The SDK's calls over fake bindings: argument conversion, results, error mapping."""

from datetime import date, datetime, timedelta, timezone, tzinfo
from types import SimpleNamespace

import pytest
from fakes import Error_Conflict, Error_InvalidArgument, Error_NotFound, Error_Timeout, Error_Unavailable, LogRecord

import tally
from tally import SeqNum, Tag, _bindings, context, invoke, log, state


def test_outside_a_component_calls_say_so():
    with pytest.raises(_bindings.HostUnavailable, match="log.append"):
        log.append([], b"x")


def test_append_converts_arguments(fake):
    bindings = fake("log", append=281474976710692)
    seqnum = log.append([Tag.named("a"), 5], "é")
    assert seqnum == 281474976710692 and type(seqnum) is SeqNum
    assert bindings.calls == [("append", ([3414815163700866188, 5], b"\xc3\xa9"))]
    assert all(type(tag) is int for tag in bindings.calls[0][1][0])


def test_append_accepts_any_iterable_of_tags(fake):
    bindings = fake("log", append=1)
    log.append((Tag(t) for t in (1, 2)), bytearray(b"x"))
    assert bindings.calls == [("append", ([1, 2], b"x"))]


@pytest.mark.parametrize(("tags", "kind"), [(Tag(1), TypeError), ("ab", TypeError), ([-1], ValueError), ([1 << 64], ValueError), (["a"], TypeError)])
def test_append_refuses_bad_tags(fake, tags, kind):
    fake("log", append=1)
    with pytest.raises(kind):
        log.append(tags, b"x")


def test_append_refuses_bad_data(fake):
    fake("log", append=1)
    with pytest.raises(TypeError, match="data must be bytes or str"):
        log.append([], 42)


def test_cond_append_conflict(fake):
    bindings = fake("log", cond_append=_bindings.Err(Error_Conflict(7)))
    with pytest.raises(tally.Conflict) as raised:
        log.cond_append([Tag(1)], b"x", Tag(1), 0)
    assert raised.value.holder == 7
    assert raised.value.__context__ is None or raised.value.__suppress_context__
    assert bindings.calls == [("cond_append", ([1], b"x", 1, 0))]


def test_reads_convert_records(fake):
    record = LogRecord(seqnum=9, tags=[1, 2], data=b"d", aux_data=b"x")
    bindings = fake("log", read_next=record, read_prev=None, check_tail=LogRecord(3, [], b"", None))
    assert log.read_next(Tag(1), SeqNum.MIN) == log.Record(SeqNum(9), (Tag(1), Tag(2)), b"d", b"x")
    assert type(log.read_next(1, 0).tags[0]) is Tag
    assert log.read_prev(Tag(1), SeqNum.MAX) is None
    assert log.check_tail(Tag.ALL) == log.Record(SeqNum(3), (), b"", None)
    assert bindings.calls[-2] == ("read_prev", (1, (1 << 64) - 1))


def test_trim_and_aux(fake):
    bindings = fake("log")
    assert log.trim(Tag.ALL, SeqNum(4)) is None
    assert log.set_aux_data(SeqNum(4), b"snap") is None
    assert bindings.calls == [("trim", (0, 4)), ("set_aux_data", (4, b"snap"))]


def test_log_errors_map(fake):
    fake("log", trim=_bindings.Err(Error_InvalidArgument("tag 0")))
    with pytest.raises(tally.InvalidArgument, match="^invalid argument: tag 0$"):
        log.trim(Tag.ALL, 0)


def test_state(fake):
    bindings = fake("state", get=b"7")
    assert state.get("t", "k") == b"7"
    assert state.get_i64("t", b"k") == 7
    state.put("t", "k", "v")
    state.put_i64("t", "k", -3)
    state.delete("t", bytearray(b"k"))
    assert bindings.calls == [
        ("get", ("t", b"k")),
        ("get", ("t", b"k")),
        ("put", ("t", b"k", b"v")),
        ("put", ("t", b"k", b"-3")),
        ("delete", ("t", b"k")),
    ]


def test_state_absent(fake):
    fake("state", get=None)
    assert state.get("t", "k") is None
    assert state.get_i64("t", "k") is None


def test_get_i64_of_text(fake):
    fake("state", get=b"v")
    with pytest.raises(tally.InvalidArgument, match='is not a decimal i64: "v"$'):
        state.get_i64("t", "k")


def test_put_i64_checks_its_value(fake):
    fake("state")
    with pytest.raises(ValueError):
        state.put_i64("t", "k", 1 << 63)
    with pytest.raises(TypeError):
        state.put_i64("t", "k", "1")
    with pytest.raises(TypeError):
        state.put_i64("t", "k", True)


def test_state_table_must_be_text(fake):
    fake("state")
    with pytest.raises(TypeError):
        state.get(b"t", "k")


def test_invoke(fake):
    bindings = fake("invoke", call=b"out")
    assert invoke.call("f", "in") == b"out"
    assert bindings.calls == [("call", ("f", b"in"))]


def test_invoke_not_found(fake):
    fake("invoke", call=_bindings.Err(Error_NotFound("no function named f")))
    with pytest.raises(tally.NotFound):
        invoke.call("f", b"")


def test_context(monkeypatch):
    monkeypatch.setattr(
        _bindings,
        "context",
        SimpleNamespace(invocation_id=lambda: "id", book_id=lambda: 1, attempt=lambda: 2, function_name=lambda: "f"),
    )
    assert (context.invocation_id(), context.book_id(), context.attempt(), context.function_name()) == ("id", 1, 2, "f")


def test_sleeps_outside_a_component_say_so():
    with pytest.raises(_bindings.HostUnavailable, match="context.sleep"):
        context.sleep(1)
    with pytest.raises(_bindings.HostUnavailable, match="context.sleep-until"):
        context.sleep_until(1)


def test_sleep_takes_milliseconds(fake):
    bindings = fake("context")
    assert context.sleep(1500) is None
    context.sleep(0)
    context.sleep((1 << 64) - 1)
    context.sleep(SeqNum(7))
    assert bindings.calls == [("sleep", (1500,)), ("sleep", (0,)), ("sleep", ((1 << 64) - 1,)), ("sleep", (7,))]
    assert all(type(args[0]) is int for _, args in bindings.calls)


def test_sleep_takes_a_timedelta(fake):
    bindings = fake("context")
    context.sleep(timedelta(hours=1))
    context.sleep(timedelta(seconds=1, microseconds=2999))  # the fraction of a ms is dropped
    context.sleep(timedelta(microseconds=999))
    context.sleep(timedelta(days=365))
    assert bindings.calls == [
        ("sleep", (3_600_000,)),
        ("sleep", (1002,)),
        ("sleep", (0,)),
        ("sleep", (31_536_000_000,)),
    ]


@pytest.mark.parametrize(
    ("duration", "kind", "text"),
    [
        (-1, ValueError, "duration in milliseconds must be from 0 to 2\\*\\*64-1, not -1"),
        (1 << 64, ValueError, "must be from 0 to 2\\*\\*64-1"),
        (timedelta(microseconds=-1), ValueError, "duration must not be negative"),
        (timedelta(days=-1), ValueError, "duration must not be negative"),
        (1.5, TypeError, "duration must be an int \\(milliseconds\\) or a datetime.timedelta, not float"),
        ("5", TypeError, "not str"),
        (None, TypeError, "not NoneType"),
        (True, TypeError, "not bool"),
    ],
)
def test_sleep_refuses_bad_durations(fake, duration, kind, text):
    bindings = fake("context")
    with pytest.raises(kind, match=text):
        context.sleep(duration)
    assert bindings.calls == []


def test_sleep_until_takes_epoch_milliseconds(fake):
    bindings = fake("context")
    assert context.sleep_until(1_700_000_000_123) is None
    context.sleep_until(0)
    context.sleep_until((1 << 64) - 1)
    assert bindings.calls == [("sleep_until", (1_700_000_000_123,)), ("sleep_until", (0,)), ("sleep_until", ((1 << 64) - 1,))]


class NoOffset(tzinfo):
    """A time zone that does not know its offset: a datetime with it is naive."""

    def utcoffset(self, dt):
        return None


def test_sleep_until_takes_a_datetime(fake):
    bindings = fake("context")
    utc = datetime(2023, 11, 14, 22, 13, 20, 123999, tzinfo=timezone.utc)
    context.sleep_until(utc)  # the fraction of a ms is dropped
    context.sleep_until(utc.astimezone(timezone(timedelta(hours=-5))))  # the same time elsewhere
    context.sleep_until(datetime(2023, 11, 14, 22, 13, 20, 123999))  # naive: UTC
    context.sleep_until(datetime(2023, 11, 14, 22, 13, 20, 123999, tzinfo=NoOffset()))  # naive too
    context.sleep_until(datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone(timedelta(hours=1))))
    context.sleep_until(datetime(1970, 1, 1, tzinfo=timezone.utc))
    context.sleep_until(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc))  # before: 0
    context.sleep_until(datetime(1900, 1, 1))
    assert bindings.calls == [
        ("sleep_until", (1_700_000_000_123,)),
        ("sleep_until", (1_700_000_000_123,)),
        ("sleep_until", (1_700_000_000_123,)),
        ("sleep_until", (1_700_000_000_123,)),
        ("sleep_until", (1_699_996_400_000,)),
        ("sleep_until", (0,)),
        ("sleep_until", (0,)),
        ("sleep_until", (0,)),
    ]
    assert all(type(args[0]) is int for _, args in bindings.calls)


@pytest.mark.parametrize(
    ("time", "kind", "text"),
    [
        (-1, ValueError, "time in milliseconds must be from 0 to 2\\*\\*64-1, not -1"),
        (1 << 64, ValueError, "must be from 0 to 2\\*\\*64-1"),
        (1_700_000_000.5, TypeError, "time must be an int \\(milliseconds since the Unix epoch\\) or a datetime.datetime, not float"),
        (date(2030, 1, 1), TypeError, "not date"),
        (timedelta(seconds=1), TypeError, "not timedelta"),
        (False, TypeError, "not bool"),
    ],
)
def test_sleep_until_refuses_bad_times(fake, time, kind, text):
    bindings = fake("context")
    with pytest.raises(kind, match=text):
        context.sleep_until(time)
    assert bindings.calls == []


def test_sleep_errors_map(fake):
    bindings = fake("context", sleep=_bindings.Err(Error_InvalidArgument("a sleep until 1 ms is longer than the limit")))
    with pytest.raises(tally.InvalidArgument, match="^invalid argument: a sleep until 1 ms is longer than the limit$") as raised:
        context.sleep(timedelta(days=400))
    assert raised.value.__context__ is None or raised.value.__suppress_context__
    assert bindings.calls == [("sleep", (34_560_000_000,))]

    fake("context", sleep_until=_bindings.Err(Error_Unavailable("no quorum")))
    with pytest.raises(tally.Unavailable, match="^unavailable: no quorum$") as raised:
        context.sleep_until(datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert raised.value.__context__ is None or raised.value.__suppress_context__


PROMISE = "0123456789abcdef0123456789abcdef"


def test_promises_outside_a_component_say_so():
    with pytest.raises(_bindings.HostUnavailable, match="context.promise-create"):
        context.promise_create()
    with pytest.raises(_bindings.HostUnavailable, match="context.promise-await"):
        context.promise_await(PROMISE)


def test_promise_create_returns_the_id(fake):
    bindings = fake("context", promise_create=PROMISE)
    assert context.promise_create() == PROMISE
    assert bindings.calls == [("promise_create", ())]


def test_promise_await_passes_its_timeout_in_milliseconds(fake):
    bindings = fake("context", promise_await=b"granted")
    value = context.promise_await(PROMISE)
    assert value == b"granted" and type(value) is bytes
    context.promise_await(PROMISE, None)
    context.promise_await(PROMISE, 0)
    context.promise_await(PROMISE, 1500)
    context.promise_await(PROMISE, (1 << 64) - 1)
    context.promise_await(PROMISE, timedelta(days=7))
    context.promise_await(PROMISE, timedelta(seconds=1, microseconds=2999))  # the fraction of a ms is dropped
    context.promise_await(id=PROMISE, timeout=SeqNum(7))
    assert bindings.calls == [
        ("promise_await", (PROMISE, None)),
        ("promise_await", (PROMISE, None)),
        ("promise_await", (PROMISE, 0)),
        ("promise_await", (PROMISE, 1500)),
        ("promise_await", (PROMISE, (1 << 64) - 1)),
        ("promise_await", (PROMISE, 604_800_000)),
        ("promise_await", (PROMISE, 1002)),
        ("promise_await", (PROMISE, 7)),
    ]
    assert all(args[1] is None or type(args[1]) is int for _, args in bindings.calls)


def test_promise_await_returns_bytes_of_what_the_bindings_give(fake):
    fake("context", promise_await=bytearray(b""))
    value = context.promise_await(PROMISE, 10)
    assert value == b"" and type(value) is bytes


@pytest.mark.parametrize(
    ("id", "timeout", "kind", "text"),
    [
        (PROMISE.encode(), None, TypeError, "id must be str, not bytes"),
        (None, None, TypeError, "id must be str, not NoneType"),
        (PROMISE, -1, ValueError, "timeout in milliseconds must be from 0 to 2\\*\\*64-1, not -1"),
        (PROMISE, 1 << 64, ValueError, "must be from 0 to 2\\*\\*64-1"),
        (PROMISE, timedelta(seconds=-1), ValueError, "timeout must not be negative"),
        (PROMISE, 1.5, TypeError, "timeout must be an int \\(milliseconds\\) or a datetime.timedelta, not float"),
        (PROMISE, "200", TypeError, "not str"),
        (PROMISE, True, TypeError, "not bool"),
    ],
)
def test_promise_await_refuses_bad_arguments(fake, id, timeout, kind, text):
    bindings = fake("context")
    with pytest.raises(kind, match=text):
        context.promise_await(id, timeout)
    assert bindings.calls == []


def test_promise_errors_map(fake):
    fake("context", promise_create=_bindings.Err(Error_Unavailable("no quorum")))
    with pytest.raises(tally.Unavailable, match="^unavailable: no quorum$") as raised:
        context.promise_create()
    assert raised.value.__context__ is None or raised.value.__suppress_context__

    bindings = fake("context", promise_await=_bindings.Err(Error_Timeout("200 ms")))
    with pytest.raises(tally.Timeout, match="^timeout: 200 ms$") as raised:
        context.promise_await(PROMISE, 200)
    assert raised.value.__context__ is None or raised.value.__suppress_context__
    assert bindings.calls == [("promise_await", (PROMISE, 200))]

    fake("context", promise_await=_bindings.Err(Error_NotFound(f"no promise {PROMISE}")))
    with pytest.raises(tally.NotFound, match=f"^not found: no promise {PROMISE}$"):
        context.promise_await(PROMISE)

    fake("context", promise_await=_bindings.Err(Error_InvalidArgument('"nope" is not a promise ID')))
    with pytest.raises(tally.InvalidArgument, match='^invalid argument: "nope" is not a promise ID$'):
        context.promise_await("nope")
