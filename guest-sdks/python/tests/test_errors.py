"""The exceptions: their text (the Rust SDK's), and the mapping from the bindings."""

from dataclasses import dataclass
from typing import Any

import pytest

import tally
from tally._errors import from_wit


def test_display_is_the_rust_sdks():
    assert str(tally.InvalidArgument("tag 0")) == "invalid argument: tag 0"
    assert str(tally.NotFound("f")) == "not found: f"
    assert str(tally.Conflict(7)) == "conflict: the position is held by record 7"
    assert str(tally.Conflict(None)) == "conflict: the position is held by a trimmed record"
    assert str(tally.Unavailable("no quorum")) == "unavailable: no quorum"
    assert str(tally.TooLarge("record")) == "too large: record"
    assert str(tally.Timeout("append")) == "timeout: append"
    assert str(tally.Failed("child trapped")) == "failed: child trapped"


def test_transaction_conflict():
    error = tally.TransactionConflict(11)
    assert isinstance(error, tally.TallyError)
    assert not isinstance(error, tally.Conflict)
    assert error.attempts == 11
    assert str(error) == "conflict: the transaction conflicted on all 11 attempts"
    assert str(tally.TransactionConflict(1)) == "conflict: the transaction conflicted on its only attempt"
    assert repr(error) == "TransactionConflict(attempts=11)"


def test_every_case_is_a_tally_error_with_its_message():
    for kind in (tally.InvalidArgument, tally.NotFound, tally.Unavailable, tally.TooLarge, tally.Timeout, tally.Failed):
        error = kind("why")
        assert isinstance(error, tally.TallyError)
        assert error.message == "why"
        assert repr(error) == f"{kind.__name__}('why')"


def test_conflict_holder():
    assert tally.Conflict(7).holder == 7
    assert type(tally.Conflict(7).holder) is tally.SeqNum
    assert tally.Conflict(None).holder is None
    assert repr(tally.Conflict(7)) == "Conflict(holder=SeqNum(7))"


# Stand-ins for the dataclasses componentize-py generates in wit_world.imports.types.
def case(name: str):
    return dataclass(type(name, (), {"__annotations__": {"value": Any}}))


@pytest.mark.parametrize(
    ("case_name", "value", "kind", "text"),
    [
        ("Error_InvalidArgument", "tag 0", tally.InvalidArgument, "invalid argument: tag 0"),
        ("Error_NotFound", "f", tally.NotFound, "not found: f"),
        ("Error_Conflict", 7, tally.Conflict, "conflict: the position is held by record 7"),
        ("Error_Conflict", None, tally.Conflict, "conflict: the position is held by a trimmed record"),
        ("Error_Unavailable", "no quorum", tally.Unavailable, "unavailable: no quorum"),
        ("Error_TooLarge", "record", tally.TooLarge, "too large: record"),
        ("Error_Timeout", "append", tally.Timeout, "timeout: append"),
        ("Error_Failed", "child trapped", tally.Failed, "failed: child trapped"),
    ],
)
def test_from_wit(case_name, value, kind, text):
    error = from_wit(case(case_name)(value))
    assert type(error) is kind
    assert str(error) == text


def test_from_wit_refuses_anything_else():
    with pytest.raises(TypeError):
        from_wit(case("Error_Other")("x"))
