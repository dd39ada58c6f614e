//! A producer/consumer pipeline on durable queues (BokiQueue, Boki §5.3 and §7.4): each
//! stage is an invocation that pops from one queue and pushes to the next, every
//! message popped exactly once whatever crashes and re-executions happen.
//!
//! | input                                     | output                                            |
//! |-------------------------------------------|---------------------------------------------------|
//! | `produce <queue> <count> [bytes]`         | pushes `count` messages of `bytes` (default 1024); `{"pushed": n}` |
//! | `relay <from> <to> <max> <timeout_ms>`    | pops up to `max` from `from`, pushes each to `to` transformed; `{"relayed": n}` |
//! | `consume <queue> <max> <timeout_ms>`      | pops up to `max`; `{"popped": n, "pushed_us": [..], "ids": [..], "hops": [..]}` |
//!
//! `relay` and `consume` pop many at a time (`queues::pop_many`: one record of the log
//! for up to 100 messages) and stop at the first pop that waited `timeout_ms` for
//! nothing.
//!
//! A message is text: `<push time> <id> <hops> <payload>`. The push time is the wall
//! clock as the guest reads it, in µs since the Unix epoch, just before the producer's
//! push; `consume` answers it for every message, and the caller's delivery latency is
//! its clock when it gets the answer minus that time (as a Redis client measures one
//! from its `XREADGROUP`'s reply). `consume` reads no clock itself: its answer follows
//! from its pops alone, so it is answered as soon as they are logged, before its
//! Result record. The
//! ID is `<producer's invocation ID>:<index>`, the same when the platform runs the
//! producer again, so that a consumer can tell every message apart. A relay keeps the
//! push time and the ID, adds one to the hops and upper-cases the payload, so a
//! consumer at the end of a three-stage pipeline sees every message with 1 hop and an
//! upper-case payload, once.

use std::time::Duration;

use anyhow::{bail, ensure, Context};
use tally_sdk::{context, queues};

/// The size of a message when `produce` names none.
const MESSAGE_BYTES_DEFAULT: usize = 1024;
/// The most messages one invocation handles, so that one stays within its time limit.
const BATCH_MAX: u64 = 10_000;

/// What the input asks for.
enum Command<'a> {
    Produce { queue: &'a str, count: u64, bytes: usize },
    Relay { from: &'a str, to: &'a str, max: u64, timeout: Duration },
    Consume { queue: &'a str, max: u64, timeout: Duration },
}

impl Command<'_> {
    fn parse(input: &[u8]) -> anyhow::Result<Command<'_>> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?;
        let words: Vec<&str> = input.split_whitespace().collect();
        let number = |word: &str| -> anyhow::Result<u64> {
            let n = word.parse().with_context(|| format!("{word:?} is not a number"))?;
            ensure!(n <= BATCH_MAX, "{n} is over the batch limit {BATCH_MAX}");
            Ok(n)
        };
        let millis = |word: &str| -> anyhow::Result<Duration> {
            Ok(Duration::from_millis(word.parse().with_context(|| format!("{word:?} is not a number of ms"))?))
        };
        Ok(match words[..] {
            ["produce", queue, count] => Command::Produce { queue, count: number(count)?, bytes: MESSAGE_BYTES_DEFAULT },
            ["produce", queue, count, bytes] => {
                let bytes = bytes.parse().with_context(|| format!("{bytes:?} is not a number of bytes"))?;
                Command::Produce { queue, count: number(count)?, bytes }
            }
            ["relay", from, to, max, timeout_ms] => Command::Relay { from, to, max: number(max)?, timeout: millis(timeout_ms)? },
            ["consume", queue, max, timeout_ms] => Command::Consume { queue, max: number(max)?, timeout: millis(timeout_ms)? },
            _ => bail!(
                "expected `produce <queue> <count> [bytes]`, `relay <from> <to> <max> <timeout_ms>` \
                 or `consume <queue> <max> <timeout_ms>`"
            ),
        })
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    match Command::parse(&input)? {
        Command::Produce { queue, count, bytes } => {
            let producer = context::invocation_id();
            for i in 0..count {
                let header = format!("{} {producer}:{i} 0 ", now_us());
                // The payload pads the message to `bytes`, or is empty past it.
                let payload = "x".repeat(bytes.saturating_sub(header.len()));
                queues::push(queue, format!("{header}{payload}"))?;
            }
            Ok(format!(r#"{{"pushed":{count}}}"#))
        }
        Command::Relay { from, to, max, timeout } => {
            let mut relayed = 0;
            while relayed < max {
                let popped = queues::pop_many(from, pop_max(max - relayed), timeout)?;
                if popped.is_empty() {
                    break;
                }
                for bytes in popped {
                    let message = Message::parse(&bytes)?;
                    let payload = message.payload.to_ascii_uppercase();
                    queues::push(to, format!("{} {} {} {payload}", message.pushed_us, message.id, message.hops + 1))?;
                    relayed += 1;
                }
            }
            Ok(format!(r#"{{"relayed":{relayed}}}"#))
        }
        Command::Consume { queue, max, timeout } => {
            let (mut pushed, mut ids, mut hops) = (Vec::new(), Vec::new(), Vec::new());
            while (ids.len() as u64) < max {
                let popped = queues::pop_many(queue, pop_max(max - ids.len() as u64), timeout)?;
                if popped.is_empty() {
                    break;
                }
                for bytes in popped {
                    let message = Message::parse(&bytes)?;
                    pushed.push(message.pushed_us.to_string());
                    ids.push(format!("\"{}\"", message.id));
                    hops.push(message.hops.to_string());
                }
            }
            Ok(format!(
                r#"{{"popped":{},"pushed_us":[{}],"ids":[{}],"hops":[{}]}}"#,
                ids.len(),
                pushed.join(","),
                ids.join(","),
                hops.join(",")
            ))
        }
    }
}

tally_sdk::handler!(handle);

/// How many of the `left` messages one pop asks for: all, up to a pop's most.
fn pop_max(left: u64) -> u32 {
    left.min(100) as u32
}

/// A message as `produce` and `relay` write it.
struct Message<'a> {
    pushed_us: u64,
    /// Hex digits, `/` and `:`: nothing JSON needs escaped.
    id: &'a str,
    hops: u64,
    payload: &'a str,
}

impl Message<'_> {
    fn parse(bytes: &[u8]) -> anyhow::Result<Message<'_>> {
        let text = std::str::from_utf8(bytes).context("a message is not UTF-8")?;
        let mut fields = text.splitn(4, ' ');
        let mut field = |name: &str| fields.next().with_context(|| format!("a message without its {name}: {text:.80}"));
        let pushed_us = field("push time")?.parse().context("a message's push time is not a number")?;
        let id = field("id")?;
        let hops = field("hops")?.parse().context("a message's hops are not a number")?;
        let payload = field("payload")?;
        Ok(Message { pushed_us, id, hops, payload })
    }
}

/// The wall clock in µs since the Unix epoch.
fn now_us() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX)
}
