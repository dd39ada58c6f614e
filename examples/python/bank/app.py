"""The bank-transfer demo of exactly-once state: account balances in the state table
``accounts``, moved by transfers that read both balances and write both back.

=================================  ========================================================
input                              output
=================================  ========================================================
``open <account> <amount>``        sets the account's balance; ``ok``
``balance <account>``              the balance, 0 for an account never opened
``transfer <from> <to> <amount>``  moves the amount; ``ok <from balance> <to balance>``
                                   with the new balances
``total <account> ...``            the sum of the accounts' balances
=================================  ========================================================

Amounts and balances are i64 in decimal. Balances may go negative, so a transfer never
fails for lack of funds; it fails only on bad input or a failed host call.

A transfer is four state operations: get both balances, put both back. If the node
crashes between the two puts, the platform runs the invocation again. Without
exactly-once state the re-run would read the already debited balance and debit it
again, and money would vanish. With it, the re-run's gets return what they returned the
first time and each put takes effect once, so a transfer keeps the total of the two
balances however often it runs. The operations are not transactions, though: two
transfers on one account at the same time may lose an update.
"""

from __future__ import annotations

import re

from tally import state

#: The state table of balances, keyed by account name.
ACCOUNTS = "accounts"

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def handle(input: bytes) -> str:
    try:
        text = input.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError("the input is not UTF-8") from error
    # Splitting on whitespace also tolerates a trailing newline from `echo`.
    match text.split():
        case ["open", account, amount]:
            state.put_i64(ACCOUNTS, account, parse_amount(amount))
            return "ok"
        case ["balance", account]:
            return str(balance(account))
        case ["transfer", source, target, _] if source == target:
            raise ValueError(f'cannot transfer from account "{source}" to itself')
        case ["transfer", source, target, amount]:
            amount = parse_amount(amount)
            source_balance = checked(balance(source) - amount, f'the balance of "{source}" would overflow')
            target_balance = checked(balance(target) + amount, f'the balance of "{target}" would overflow')
            state.put_i64(ACCOUNTS, source, source_balance)
            state.put_i64(ACCOUNTS, target, target_balance)
            return f"ok {source_balance} {target_balance}"
        case ["total", *accounts]:
            total = 0
            for account in accounts:
                total = checked(total + balance(account), "the total overflows an i64")
            return str(total)
        case _:
            raise ValueError(
                "expected `open <account> <amount>`, `balance <account>`, "
                "`transfer <from> <to> <amount>` or `total <account> ...`"
            )


def balance(account: str) -> int:
    """The balance of ``account``, 0 if it was never opened."""
    balance = state.get_i64(ACCOUNTS, account)
    return 0 if balance is None else balance


def checked(value: int, overflow: str) -> int:
    """``value``, which must fit an i64 (Python's integers do not overflow by themselves)."""
    if not I64_MIN <= value <= I64_MAX:
        raise ValueError(overflow)
    return value


def parse_amount(amount: str) -> int:
    """An amount in decimal, as Rust's ``i64::from_str`` reads it."""
    match = re.fullmatch(r"([+-]?)([0-9]+)", amount)
    if match:
        digits = match[2].lstrip("0") or "0"
        if len(digits) <= 19:
            value = -int(digits) if match[1] == "-" else int(digits)
            if I64_MIN <= value <= I64_MAX:
                return value
    raise ValueError(f'the amount "{amount}" is not an i64')
