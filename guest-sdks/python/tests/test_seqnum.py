import pytest

from tally import SeqNum


def test_bounds():
    assert SeqNum.MIN == 0
    assert SeqNum.MAX == (1 << 64) - 1
    assert type(SeqNum.MAX) is SeqNum


def test_next_and_prev():
    assert SeqNum(41).next() == 42
    assert type(SeqNum(41).next()) is SeqNum
    assert SeqNum(43).prev() == 42
    assert SeqNum.MAX.next() is None
    assert SeqNum.MIN.prev() is None


def test_prints_and_parses_as_a_number():
    seqnum = SeqNum(281474976710692)
    assert str(seqnum) == "281474976710692"
    assert f"{seqnum}" == "281474976710692"
    assert SeqNum(int(str(seqnum))) == seqnum
    assert repr(seqnum) == "SeqNum(281474976710692)"


def test_is_a_u64():
    with pytest.raises(ValueError):
        SeqNum(-1)
    with pytest.raises(ValueError):
        SeqNum(1 << 64)
