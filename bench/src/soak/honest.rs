//! The honest clients: each increments the counter of a book of its own in a closed
//! loop, one logical increment at a time, each with an Idempotency-Key of its own that
//! every retry repeats, until the node acknowledges it (200). Alone on its book, a
//! client knows what every acknowledged increment must answer: the count of its
//! acknowledged increments so far, plus one. An answer that says otherwise is an
//! increment lost or applied twice, seen the moment it happens.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::time::{sleep, timeout, Instant};

use crate::http::Http;
use crate::log::Op;

/// How long one attempt may take before the client gives up on it and retries.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a logical increment may take, retries included, before the suite fails.
pub(crate) const INCREMENT_DEADLINE: Duration = Duration::from_secs(30);
/// The first wait before a retry; it doubles up to `RETRY_WAIT_MAX`.
const RETRY_WAIT: Duration = Duration::from_millis(10);
const RETRY_WAIT_MAX: Duration = Duration::from_millis(320);
/// Wrong answers kept to show.
const SHOWN_MAX: usize = 3;

/// What a client saw since it was last asked: attempts by status (`closed`, `timeout`
/// for no answer), and answers that contradict its own count.
#[derive(Default)]
pub(crate) struct Seen {
    pub attempts: BTreeMap<String, u64>,
    pub wrong_values: u64,
    pub shown: Vec<String>,
}

impl Seen {
    pub(crate) fn merge(&mut self, other: Seen) {
        for (label, n) in other.attempts {
            *self.attempts.entry(label).or_default() += n;
        }
        self.wrong_values += other.wrong_values;
        self.shown.extend(other.shown);
        self.shown.truncate(SHOWN_MAX);
    }
}

/// One honest client, on its own book.
pub(crate) struct Incrementer {
    pub book: u64,
    url: String,
    http: Http,
    /// The header line of its token.
    auth: String,
    /// Its keys are `<prefix>-<n>`.
    prefix: String,
    /// Logical increments begun.
    begun: u64,
    /// Logical increments the node acknowledged.
    pub acked: u64,
    pub seen: Seen,
}

impl Incrementer {
    /// A client of `book` through `url` (its invoke URL).
    pub(crate) fn new(book: u64, url: &str, token: &str, prefix: String) -> anyhow::Result<Incrementer> {
        Ok(Incrementer {
            book,
            url: url.to_string(),
            http: Http::new(url)?,
            auth: format!("Authorization: Bearer {token}\r\n"),
            prefix,
            begun: 0,
            acked: 0,
            seen: Seen::default(),
        })
    }
}

impl Op for Incrementer {
    async fn call(&mut self) -> anyhow::Result<()> {
        self.begun += 1;
        let headers = format!("{}Idempotency-Key: {}-{}\r\n", self.auth, self.prefix, self.begun);
        let deadline = Instant::now() + INCREMENT_DEADLINE;
        let mut wait = RETRY_WAIT;
        loop {
            let label = match timeout(ATTEMPT_TIMEOUT, self.http.send("POST", &headers, b"incr", false)).await {
                Ok(Ok((200, body))) => {
                    *self.seen.attempts.entry("200".into()).or_default() += 1;
                    let value: u64 = std::str::from_utf8(&body)
                        .ok()
                        .and_then(|text| text.trim().parse().ok())
                        .with_context(|| format!("counter answered {:?}", String::from_utf8_lossy(&body)))?;
                    self.acked += 1;
                    if value != self.acked {
                        self.seen.wrong_values += 1;
                        if self.seen.shown.len() < SHOWN_MAX {
                            let key = format!("{}-{}", self.prefix, self.begun);
                            self.seen
                                .shown
                                .push(format!("key {key}: counter said {value} at acknowledged increment {}", self.acked));
                        }
                    }
                    return Ok(());
                }
                Ok(Ok((status, body))) => super::hostile::label(status, &body),
                Ok(Err(_)) => "closed".to_string(),
                Err(_) => {
                    // The connection is mid-answer: never used again.
                    self.http = Http::new(&self.url)?;
                    "timeout".to_string()
                }
            };
            *self.seen.attempts.entry(label.clone()).or_default() += 1;
            let retried =
                matches!(label.as_str(), "closed" | "timeout") || label.starts_with('5') || label == "429" || label == "409";
            if !retried {
                bail!("an honest increment ({}-{}) was answered {label}", self.prefix, self.begun);
            }
            if Instant::now() + wait > deadline {
                bail!("an honest increment ({}-{}) was not acknowledged within {INCREMENT_DEADLINE:?}", self.prefix, self.begun);
            }
            sleep(wait).await;
            wait = (wait * 2).min(RETRY_WAIT_MAX);
        }
    }
}
