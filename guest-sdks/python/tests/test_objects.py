"""Durable objects over fake bindings: arguments, conveniences, JSON values, error
mapping, and the transaction helper's runs, retries and aborts."""

import math

import pytest
from fakes import Answers, Error_InvalidArgument, Error_Unavailable

import tally
from tally import _bindings, objects

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def invalid(message: str) -> _bindings.Err:
    return _bindings.Err(Error_InvalidArgument(message))


def test_outside_a_component_calls_say_so():
    with pytest.raises(_bindings.HostUnavailable, match="objects.get"):
        objects.get("o", "")
    with pytest.raises(_bindings.HostUnavailable, match="objects.begin"):
        objects.transaction().run(lambda: None)


def test_calls_pass_their_arguments(fake):
    bindings = fake("objects", get='{"a":[1]}')
    assert objects.get("cart", "") == '{"a":[1]}'
    assert objects.set("cart", "/a", "[]") is None
    assert objects.increment("cart", "/n", -5) is None
    assert objects.push("cart", "/a", '"x"') is None
    assert objects.remove("cart", "/a/0") is None
    assert bindings.calls == [
        ("get", ("cart", "")),
        ("set", ("cart", "/a", "[]")),
        ("increment", ("cart", "/n", -5)),
        ("push", ("cart", "/a", '"x"')),
        ("remove", ("cart", "/a/0")),
    ]


def test_get_of_nothing_is_none(fake):
    fake("objects", get=None)
    assert objects.get("cart", "/missing") is None


def test_increment_by_one_unless_told(fake):
    bindings = fake("objects")
    objects.increment("o", "/n")
    objects.increment("o", "/n", by=I64_MIN)
    objects.increment("o", "/n", tally.SeqNum(7))
    assert bindings.calls == [("increment", ("o", "/n", 1)), ("increment", ("o", "/n", I64_MIN)), ("increment", ("o", "/n", 7))]
    assert all(type(args[2]) is int for _, args in bindings.calls)


@pytest.mark.parametrize(
    ("by", "kind", "text"),
    [
        (I64_MAX + 1, ValueError, "by must be from -2\\*\\*63 to 2\\*\\*63-1"),
        (I64_MIN - 1, ValueError, "by must be from -2\\*\\*63 to 2\\*\\*63-1"),
        (True, TypeError, "by must be int, not bool"),
        (1.5, TypeError, "by must be int, not float"),
        ("1", TypeError, "by must be int, not str"),
    ],
)
def test_increment_refuses_bad_amounts(fake, by, kind, text):
    bindings = fake("objects")
    with pytest.raises(kind, match=text):
        objects.increment("o", "/n", by)
    assert bindings.calls == []


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: objects.get(b"o", ""), "object must be str, not bytes"),
        (lambda: objects.get("o", None), "path must be str, not NoneType"),
        (lambda: objects.set("o", "", {"a": 1}), "json must be str, not dict"),
        (lambda: objects.push("o", "", 1), "json must be str, not int"),
        (lambda: objects.remove("o", ["a"]), "path must be str, not list"),
        (lambda: objects.make_object(1, ""), "object must be str, not int"),
    ],
)
def test_text_arguments_must_be_str(fake, call, text):
    bindings = fake("objects")
    with pytest.raises(TypeError, match=text):
        call()
    assert bindings.calls == []


def test_make_object_and_array_set_empty_ones(fake):
    bindings = fake("objects")
    objects.make_object("o", "")
    objects.make_array("o", "/items")
    assert bindings.calls == [("set", ("o", "", "{}")), ("set", ("o", "/items", "[]"))]


def test_get_json_decodes(fake):
    fake("objects", get=Answers('{"items":[{"n":3}],"x":1.5}', None, "null", None, '"é"'))
    assert objects.get_json("o", "") == {"items": [{"n": 3}], "x": 1.5}
    assert objects.get_json("o", "/missing") is None
    # A field that holds null is told from a missing one by the default.
    assert objects.get_json("o", "/null", default=0) is None
    assert objects.get_json("o", "/missing", 0) == 0
    assert objects.get_json("o", "/s") == "é"


def test_set_and_push_json_encode_compactly(fake):
    bindings = fake("objects")
    objects.set_json("o", "", {"items": [1, "two", None, True], "x": 1.5})
    objects.set_json("o", "/s", "é")
    objects.push_json("o", "/items", {"sku": "apple"})
    objects.push_json("o", "/items", 1 << 70)
    assert bindings.calls == [
        ("set", ("o", "", '{"items":[1,"two",null,true],"x":1.5}')),
        ("set", ("o", "/s", '"\\u00e9"')),
        ("push", ("o", "/items", '{"sku":"apple"}')),
        ("push", ("o", "/items", str(1 << 70))),
    ]


@pytest.mark.parametrize(("value", "kind"), [(math.nan, ValueError), ([math.inf], ValueError), ({1, 2}, TypeError), (b"x", TypeError)])
def test_json_helpers_refuse_what_is_not_json(fake, value, kind):
    bindings = fake("objects")
    with pytest.raises(kind):
        objects.set_json("o", "", value)
    with pytest.raises(kind):
        objects.push_json("o", "", value)
    assert bindings.calls == []


@pytest.mark.parametrize(
    ("tokens", "path"),
    [
        ((), ""),
        (("a",), "/a"),
        (("items", 0, "sku"), "/items/0/sku"),
        (("a/b", "m~n", "~1"), "/a~1b/m~0n/~01"),
        (("",), "/"),
        (("", ""), "//"),
        ((tally.SeqNum(3),), "/3"),
        (("é",), "/é"),
    ],
)
def test_pointer(tokens, path):
    assert objects.pointer(*tokens) == path


@pytest.mark.parametrize(
    ("token", "kind", "text"),
    [
        (-1, ValueError, "an array index must not be negative, not -1"),
        (True, TypeError, "not bool"),
        (1.0, TypeError, "not float"),
        (b"a", TypeError, "not bytes"),
        (None, TypeError, "not NoneType"),
    ],
)
def test_pointer_refuses_bad_tokens(token, kind, text):
    with pytest.raises(kind, match=text):
        objects.pointer("a", token)


def test_errors_map(fake):
    bindings = fake("objects", set=invalid("not JSON: expected value at line 1 column 1"))
    with pytest.raises(tally.InvalidArgument, match="^invalid argument: not JSON: expected value at line 1 column 1$") as raised:
        objects.set("o", "", "nope")
    assert raised.value.__context__ is None or raised.value.__suppress_context__
    assert bindings.calls == [("set", ("o", "", "nope"))]

    fake("objects", get=_bindings.Err(Error_Unavailable("no quorum")))
    with pytest.raises(tally.Unavailable, match="^unavailable: no quorum$"):
        objects.get_json("o", "")

    fake("objects", commit=invalid("no transaction is in progress"))
    with pytest.raises(tally.InvalidArgument, match="no transaction is in progress"):
        objects.commit()

    fake("objects", increment=invalid("the operation does not fit the object: a string"))
    with pytest.raises(tally.InvalidArgument, match="does not fit"):
        objects.increment("o", "/name", 1)


def test_begin_commit_abort(fake):
    bindings = fake("objects", commit=Answers(True, False))
    objects.begin()
    assert objects.commit() is True
    objects.begin(read_only=True)
    assert objects.commit() is False
    objects.begin(read_only=False)
    objects.abort()
    assert bindings.calls == [
        ("begin", (False,)),
        ("commit", ()),
        ("begin", (True,)),
        ("commit", ()),
        ("begin", (False,)),
        ("abort", ()),
    ]


def test_begin_takes_a_bool_by_keyword(fake):
    bindings = fake("objects")
    with pytest.raises(TypeError):
        objects.begin(True)
    with pytest.raises(TypeError, match="read_only must be bool, not int"):
        objects.begin(read_only=1)
    assert bindings.calls == []


# The transaction helper.


def test_a_transaction_that_commits_runs_once(fake):
    bindings = fake("objects", get="5", commit=True)

    def body(source, amount, *, note):
        balance = objects.get_json(source, "/balance")
        objects.increment(source, "/balance", -amount)
        return (balance, note)

    assert objects.transaction().run(body, "alice", 2, note="n") == (5, "n")
    assert bindings.calls == [
        ("begin", (False,)),
        ("get", ("alice", "/balance")),
        ("increment", ("alice", "/balance", -2)),
        ("commit", ()),
    ]


def test_a_conflicting_transaction_runs_again(fake):
    bindings = fake("objects", get=Answers("5", "7"), commit=Answers(False, True))
    runs = []

    def body():
        runs.append(objects.get_json("o", "/n"))
        return runs[-1]

    assert objects.transaction(retries=1).run(body) == 7
    assert runs == [5, 7]
    assert bindings.calls == [
        ("begin", (False,)),
        ("get", ("o", "/n")),
        ("commit", ()),
        ("begin", (False,)),
        ("get", ("o", "/n")),
        ("commit", ()),
    ]


@pytest.mark.parametrize(("retries", "attempts"), [(0, 1), (2, 3), (objects.RETRIES_DEFAULT, objects.RETRIES_DEFAULT + 1)])
def test_a_transaction_that_always_conflicts_gives_up(fake, retries, attempts):
    bindings = fake("objects", commit=False)
    runs = []
    helper = objects.transaction(retries=retries) if retries != objects.RETRIES_DEFAULT else objects.transaction()
    with pytest.raises(tally.TransactionConflict) as raised:
        helper.run(lambda: runs.append(1))
    assert raised.value.attempts == attempts
    assert isinstance(raised.value, tally.TallyError)
    assert len(runs) == attempts
    assert bindings.calls == [("begin", (False,)), ("commit", ())] * attempts


def test_an_error_in_the_body_aborts(fake):
    bindings = fake("objects", get="1", commit=True)

    def body():
        objects.get("o", "/n")
        raise ValueError("insufficient funds")

    with pytest.raises(ValueError, match="^insufficient funds$") as raised:
        objects.transaction().run(body)
    assert raised.value.__context__ is None
    assert bindings.calls == [("begin", (False,)), ("get", ("o", "/n")), ("abort", ())]


def test_a_platform_error_in_the_body_aborts(fake):
    bindings = fake("objects", increment=invalid("the transaction is read-only"))
    with pytest.raises(tally.InvalidArgument, match="read-only"):
        objects.transaction(read_only=True).run(objects.increment, "o", "/n")
    assert bindings.calls == [("begin", (True,)), ("increment", ("o", "/n", 1)), ("abort", ())]


def test_the_bodys_error_wins_over_the_aborts(fake):
    bindings = fake("objects", abort=Answers(None, invalid("no transaction is in progress")))

    def body():
        objects.abort()  # Ends the transaction, so that the helper's abort fails.
        raise KeyError("k")

    with pytest.raises(KeyError):
        objects.transaction().run(body)
    assert bindings.calls == [("begin", (False,)), ("abort", ()), ("abort", ())]


def test_an_error_of_begin_or_commit_propagates(fake):
    runs = []
    bindings = fake("objects", begin=invalid("a transaction is in progress already"))
    with pytest.raises(tally.InvalidArgument, match="in progress already"):
        objects.transaction().run(lambda: runs.append(1))
    assert runs == []
    assert bindings.calls == [("begin", (False,))]

    # The commit ends the transaction whatever its outcome: nothing to abort.
    bindings = fake("objects", commit=_bindings.Err(Error_Unavailable("no quorum")))
    with pytest.raises(tally.Unavailable):
        objects.transaction().run(lambda: runs.append(1))
    assert runs == [1]
    assert bindings.calls == [("begin", (False,)), ("commit", ())]


def test_as_a_decorator_each_call_is_a_transaction(fake):
    @objects.transaction(retries=3)
    def reserve(item: str, n: int = 1) -> bool:
        """Takes n of an item from the stock."""
        if objects.get_json("stock", objects.pointer(item), 0) < n:
            return False
        objects.increment("stock", objects.pointer(item), -n)
        return True

    assert reserve.__name__ == "reserve" and reserve.__doc__ == "Takes n of an item from the stock."
    # The first call conflicts once and runs again, and reads 0 the second time.
    bindings = fake("objects", get=Answers("3", "0"), commit=Answers(False, True))
    assert reserve("apple", n=2) is False
    assert bindings.calls == [
        ("begin", (False,)),
        ("get", ("stock", "/apple")),
        ("increment", ("stock", "/apple", -2)),
        ("commit", ()),
        ("begin", (False,)),
        ("get", ("stock", "/apple")),
        ("commit", ()),
    ]
    bindings = fake("objects", get="9", commit=True)
    assert reserve("pear") is True
    assert bindings.calls == [("begin", (False,)), ("get", ("stock", "/pear")), ("increment", ("stock", "/pear", -1)), ("commit", ())]


def test_a_read_only_transaction(fake):
    bindings = fake("objects", get=Answers("1", "2"), commit=True)

    @objects.transaction(read_only=True)
    def both():
        return objects.get_json("a", ""), objects.get_json("b", "")

    assert both() == (1, 2)
    assert bindings.calls == [("begin", (True,)), ("get", ("a", "")), ("get", ("b", "")), ("commit", ())]


@pytest.mark.parametrize(
    ("arguments", "kind", "text"),
    [
        ({"retries": -1}, ValueError, "retries must not be negative, not -1"),
        ({"retries": True}, TypeError, "retries must be int, not bool"),
        ({"retries": "3"}, TypeError, "retries must be int, not str"),
        ({"retries": 1.0}, TypeError, "retries must be int, not float"),
        ({"read_only": "yes"}, TypeError, "read_only must be bool, not str"),
    ],
)
def test_transaction_refuses_bad_arguments(arguments, kind, text):
    with pytest.raises(kind, match=text):
        objects.transaction(**arguments)


def test_transaction_takes_keywords_only():
    with pytest.raises(TypeError):
        objects.transaction(lambda: None)


def test_transaction_repr():
    assert repr(objects.transaction()) == f"Transaction(read_only=False, retries={objects.RETRIES_DEFAULT})"
    assert repr(objects.transaction(read_only=True, retries=0)) == "Transaction(read_only=True, retries=0)"

