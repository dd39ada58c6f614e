/**
 * The bank-transfer demo of exactly-once state: account balances in the state table
 * `accounts`, moved by transfers that read both balances and write both back.
 *
 * | input                           | output                                            |
 * |---------------------------------|---------------------------------------------------|
 * | `open <account> <amount>`       | sets the account's balance; `ok`                  |
 * | `balance <account>`             | the balance, 0 for an account never opened        |
 * | `transfer <from> <to> <amount>` | moves the amount; `ok <from balance> <to balance>` with the new balances |
 * | `total <account> ...`           | the sum of the accounts' balances                 |
 *
 * Amounts and balances are i64 in decimal. Balances may go negative, so a transfer
 * never fails for lack of funds; it fails only on bad input or a failed host call.
 *
 * A transfer is four state operations: get both balances, put both back. If the node
 * crashes between the two puts, the platform runs the invocation again. Without
 * exactly-once state the re-run would read the already debited balance and debit it
 * again, and money would vanish. With it, the re-run's gets return what they returned
 * the first time and each put takes effect once, so a transfer keeps the total of the
 * two balances however often it runs. The operations are not transactions, though: two
 * transfers on one account at the same time may lose an update.
 *
 * The same function in Rust is `examples/bank`; both keep balances the same way.
 */

import { parseI64, state } from '@tally/sdk';

/** The state table of balances, keyed by account name. */
const ACCOUNTS = 'accounts';

const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

export function handle(input: Uint8Array): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
  } catch {
    throw new Error('the input is not UTF-8');
  }
  // Splitting on whitespace also tolerates a trailing newline from `echo`.
  const [command, ...args] = text.split(/\s+/).filter((word) => word !== '');

  if (command === 'open' && args.length === 2) {
    const [account, amount] = args as [string, string];
    state.putI64(ACCOUNTS, account, parseAmount(amount));
    return 'ok';
  }
  if (command === 'balance' && args.length === 1) {
    return String(balance(args[0]!));
  }
  if (command === 'transfer' && args.length === 3) {
    const [from, to, amount] = args as [string, string, string];
    if (from === to) {
      throw new Error(`cannot transfer from account ${JSON.stringify(from)} to itself`);
    }
    const moved = parseAmount(amount);
    const fromBalance = checked(balance(from) - moved, `the balance of ${JSON.stringify(from)} would overflow`);
    const toBalance = checked(balance(to) + moved, `the balance of ${JSON.stringify(to)} would overflow`);
    state.putI64(ACCOUNTS, from, fromBalance);
    state.putI64(ACCOUNTS, to, toBalance);
    return `ok ${fromBalance} ${toBalance}`;
  }
  if (command === 'total') {
    let total = 0n;
    for (const account of args) {
      total = checked(total + balance(account), 'the total overflows an i64');
    }
    return String(total);
  }
  throw new Error(
    'expected `open <account> <amount>`, `balance <account>`, `transfer <from> <to> <amount>` or `total <account> ...`',
  );
}

/** The balance of `account`, 0 if it was never opened. */
function balance(account: string): bigint {
  return state.getI64(ACCOUNTS, account) ?? 0n;
}

function parseAmount(amount: string): bigint {
  try {
    return parseI64(amount);
  } catch (cause) {
    throw new Error(`the amount ${JSON.stringify(amount)} is not an i64`, { cause });
  }
}

/** `value` if it is an i64, else an error with `message` (bigints do not overflow). */
function checked(value: bigint, message: string): bigint {
  if (value < I64_MIN || value > I64_MAX) {
    throw new Error(message);
  }
  return value;
}
