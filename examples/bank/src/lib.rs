//! The bank-transfer demo of exactly-once state: account balances in the state table
//! `accounts`, moved by transfers that read both balances and write both back.
//!
//! | input                           | output                                            |
//! |---------------------------------|---------------------------------------------------|
//! | `open <account> <amount>`       | sets the account's balance; `ok`                  |
//! | `balance <account>`             | the balance, 0 for an account never opened        |
//! | `transfer <from> <to> <amount>` | moves the amount; `ok <from balance> <to balance>` with the new balances |
//! | `total <account> ...`           | the sum of the accounts' balances                 |
//!
//! Amounts and balances are `i64` in decimal. Balances may go negative, so a transfer
//! never fails for lack of funds; it fails only on bad input or a failed host call.
//!
//! A transfer is four state operations: get both balances, put both back. If the node
//! crashes between the two puts, the platform runs the invocation again. Without
//! exactly-once state the re-run would read the already debited balance and debit it
//! again, and money would vanish. With it, the re-run's gets return what they returned
//! the first time and each put takes effect once, so a transfer keeps the total of the
//! two balances however often it runs. The operations are not transactions, though:
//! two transfers on one account at the same time may lose an update.

use anyhow::{bail, Context};
use tally_sdk::state;

/// The state table of balances, keyed by account name.
const ACCOUNTS: &str = "accounts";

/// What the input asks for.
enum Command<'a> {
    /// Set the balance of `account` to `amount`.
    Open { account: &'a str, amount: i64 },
    /// Read the balance of `account`.
    Balance { account: &'a str },
    /// Move `amount` from `from` to `to`, two different accounts.
    Transfer { from: &'a str, to: &'a str, amount: i64 },
    /// Add up the balances of `accounts`.
    Total { accounts: Vec<&'a str> },
}

impl Command<'_> {
    fn parse(input: &[u8]) -> anyhow::Result<Command<'_>> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?;
        // Splitting on whitespace also tolerates a trailing newline from `echo`.
        let words: Vec<&str> = input.split_whitespace().collect();
        match words[..] {
            ["open", account, amount] => Ok(Command::Open { account, amount: parse_amount(amount)? }),
            ["balance", account] => Ok(Command::Balance { account }),
            ["transfer", from, to, _] if from == to => {
                bail!("cannot transfer from account {from:?} to itself")
            }
            ["transfer", from, to, amount] => Ok(Command::Transfer { from, to, amount: parse_amount(amount)? }),
            ["total", ref accounts @ ..] => Ok(Command::Total { accounts: accounts.to_vec() }),
            _ => bail!(
                "expected `open <account> <amount>`, `balance <account>`, \
                 `transfer <from> <to> <amount>` or `total <account> ...`"
            ),
        }
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    match Command::parse(&input)? {
        Command::Open { account, amount } => {
            state::put_i64(ACCOUNTS, account, amount)?;
            Ok("ok".to_owned())
        }
        Command::Balance { account } => Ok(balance(account)?.to_string()),
        Command::Transfer { from, to, amount } => {
            let from_balance =
                balance(from)?.checked_sub(amount).with_context(|| format!("the balance of {from:?} would overflow"))?;
            let to_balance = balance(to)?.checked_add(amount).with_context(|| format!("the balance of {to:?} would overflow"))?;
            state::put_i64(ACCOUNTS, from, from_balance)?;
            state::put_i64(ACCOUNTS, to, to_balance)?;
            Ok(format!("ok {from_balance} {to_balance}"))
        }
        Command::Total { accounts } => {
            let mut total = 0i64;
            for account in accounts {
                total = total.checked_add(balance(account)?).context("the total overflows an i64")?;
            }
            Ok(total.to_string())
        }
    }
}

tally_sdk::handler!(handle);

/// The balance of `account`, 0 if it was never opened.
fn balance(account: &str) -> anyhow::Result<i64> {
    Ok(state::get_i64(ACCOUNTS, account)?.unwrap_or(0))
}

fn parse_amount(amount: &str) -> anyhow::Result<i64> {
    amount.parse().with_context(|| format!("the amount {amount:?} is not an i64"))
}
