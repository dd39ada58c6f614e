"""A counter kept as a replicated state machine on the book's log (Boki §5.4).

Input ``incr`` or ``incr N`` adds 1 or N and returns the value as of that increment;
``get`` returns the current value. The output is the value in decimal.

The log is the ground truth: each increment is a record in the ``counter`` stream, and
the value as of a record is the sum of the increments up to and including it (wrapping
at 2^64, so replay never fails on a large sum). Replaying the whole stream on every call
would get slower as the log grows, and a function keeps no memory between invocations,
so the value is cached in the log instead: after a replay, the reader attaches the value
to the last record it replayed as aux data. The next reader walks back from where it
wants the value to the newest record carrying such a snapshot, and replays forward only
from there::

      counter stream:   +1    +5    +2    +1    +3
      aux data:               6           9
                                          ^ walk back to here, replay +3, value 12,
                                            leave aux data 12 on the last record

Record data and aux data are both a u64 in 8 little-endian bytes.
"""

from __future__ import annotations

import re

from tally import SeqNum, Tag, TallyError, log

#: The stream of increments.
COUNTER = Tag.named("counter")

U64_MAX = (1 << 64) - 1


def handle(input: bytes) -> str:
    try:
        text = input.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError("the input is not UTF-8") from error
    # Splitting on whitespace also tolerates a trailing newline from `echo`.
    match text.split():
        case ["incr"]:
            seqnum = log.append([COUNTER], (1).to_bytes(8, "little"))
            value = value_at(seqnum)
        case ["incr", amount]:
            seqnum = log.append([COUNTER], parse_u64(amount).to_bytes(8, "little"))
            value = value_at(seqnum)
        case ["get"]:
            value = value_at(SeqNum.MAX)
        case _:
            raise ValueError("expected `incr`, `incr N` or `get`")
    return str(value)


def value_at(upto: SeqNum) -> int:
    """The counter's value as of ``upto``: the sum of the increments at or before it."""
    snapshot = newest_snapshot(upto)
    if snapshot is None:
        value, next = 0, SeqNum.MIN
    else:
        seqnum, value = snapshot
        next = seqnum.next()
    last_replayed = None
    while next is not None:
        record = log.read_next(COUNTER, next)
        if record is None or record.seqnum > upto:
            break
        value = (value + decode(record.data, f"reading increment {record.seqnum}")) & U64_MAX
        last_replayed = record.seqnum
        # Stopping at `upto` itself saves `incr` a read past its own record.
        next = record.seqnum.next() if record.seqnum < upto else None
    if last_replayed is not None:
        # The snapshot is only a cache, so failing to leave one is not an error: the
        # value is right either way, and failing an `incr` whose increment is already
        # in the log would invite a retry that counts it twice.
        try:
            log.set_aux_data(last_replayed, value.to_bytes(8, "little"))
        except TallyError:
            pass
    return value


def newest_snapshot(upto: SeqNum) -> tuple[SeqNum, int] | None:
    """Walks back from ``upto`` to the newest increment carrying a snapshot of the value,
    and returns its seqnum and the value; ``None`` when no increment at or before
    ``upto`` has one."""
    max_seqnum: SeqNum | None = upto
    while max_seqnum is not None:
        record = log.read_prev(COUNTER, max_seqnum)
        if record is None:
            break
        if record.aux is not None:
            return record.seqnum, decode(record.aux, f"reading the snapshot in {record.seqnum}")
        max_seqnum = record.seqnum.prev()
    return None


def decode(data: bytes, doing: str) -> int:
    """Reads a u64 stored as 8 little-endian bytes; ``doing`` says what for in the error."""
    if len(data) != 8:
        raise ValueError(f"{doing}: expected 8 bytes, found {len(data)}")
    return int.from_bytes(data, "little")


def parse_u64(amount: str) -> int:
    """An amount in decimal, as Rust's ``u64::from_str`` reads it."""
    if re.fullmatch(r"\+?[0-9]+", amount):
        digits = amount.lstrip("+").lstrip("0") or "0"
        if len(digits) <= 20 and int(digits) <= U64_MAX:
            return int(digits)
    raise ValueError(f'the amount "{amount}" is not a u64')
