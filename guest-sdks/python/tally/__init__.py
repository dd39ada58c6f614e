"""Write Tally functions in Python.

A Tally function is a WebAssembly component of world ``tally:platform/function``: it
gets the invocation's input as bytes and returns bytes or an error message. While it
runs it may use the shared log of the book it is bound to (:mod:`tally.log`), keep
exactly-once key-value state in the book's tables (:mod:`tally.state`) and durable JSON
objects with transactions across them (:mod:`tally.objects`), push to and pop from
durable queues (:mod:`tally.queues`), take locks (:mod:`tally.locks`), call other
functions (:mod:`tally.invoke`), ask what the invocation is, sleep durably and wait
for promises the outside world completes (:mod:`tally.context`), and read its settings
(:mod:`tally.config`). A function of world ``http-function`` serves HTTP and may send
requests out (:mod:`tally.http`).

A function is a directory with ``app.py``, which defines the entry point::

    from tally import Tag, log

    # Each order is a record in the `orders` stream of the book.
    ORDERS = Tag.named("orders")

    def handle(order: bytes) -> str:
        \"\"\"Records the order in the input and says which order came before it.\"\"\"
        seqnum = log.append([ORDERS], order)
        before = seqnum.prev()
        previous = log.read_prev(ORDERS, before) if before is not None else None
        if previous is None:
            return f"order {seqnum} is the first"
        return f"order {seqnum} follows order {previous.seqnum}"

``handle`` returns ``bytes`` or ``str`` (sent as UTF-8). An exception it raises reaches
the caller as its message; the README's "How a component is built" gives the command
that makes the ``.wasm`` file to deploy.

Calls to the platform raise a :class:`TallyError` subclass: an error the function can
handle (a lost conditional append, an unavailable log, a failed child, a malformed
value). The platform traps the invocation only for a broken guest or a host bug.
"""

from . import config, context, http, invoke, locks, log, objects, queues, state
from ._errors import (
    Conflict,
    Failed,
    InvalidArgument,
    NotFound,
    TallyError,
    Timeout,
    TooLarge,
    TransactionConflict,
    Unavailable,
)
from ._seqnum import SeqNum
from ._tag import Tag

__all__ = [
    "Conflict",
    "Failed",
    "InvalidArgument",
    "NotFound",
    "SeqNum",
    "Tag",
    "TallyError",
    "Timeout",
    "TooLarge",
    "TransactionConflict",
    "Unavailable",
    "config",
    "context",
    "http",
    "invoke",
    "locks",
    "log",
    "objects",
    "queues",
    "state",
]
