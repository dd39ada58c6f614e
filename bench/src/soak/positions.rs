//! Positions past the log's end (`Tally-Position`, which a client sends back for
//! session consistency): a term the cluster has not reached, or an index its term has
//! not. Such a request waits for the log, so the phase times it, and times beside it a
//! request with a position the log has reached, as a session client sends: is the
//! second held up by the first?

use std::time::Duration;

use anyhow::Context as _;
use tokio::time::Instant;

use super::hostile::{Expect, Ledger};
use super::wire::{request, Answer, Conn};

/// How long each request of the phase may take.
const DEADLINE: Duration = Duration::from_secs(30);
/// How long a session client's request beside them may take and still be unhindered.
pub(crate) const SESSION_WAIT_MAX: Duration = Duration::from_secs(1);
/// A head start for the requests past the end, so that they are being served when the
/// session client's request comes: a pause, not a synchronisation, since nothing tells
/// a client that the node has begun to wait.
const HEAD_START: Duration = Duration::from_millis(500);

/// How long each request of the phase took, and its answer.
pub(crate) struct Timed {
    pub name: &'static str,
    pub answer: String,
    pub took: Duration,
}

/// One request on a fresh connection, timed.
async fn timed(addr: &str, bytes: Vec<u8>) -> (Answer, Duration) {
    let started = Instant::now();
    let answer = match Conn::open(addr, DEADLINE).await {
        None => Answer::Refused,
        Some(mut conn) => {
            conn.write(&bytes, DEADLINE).await;
            conn.answer(DEADLINE).await
        }
    };
    (answer, started.elapsed())
}

/// A position the log has reached, from an increment of the counter of `book`.
async fn reached(addr: &str, book: u64, auth: &str) -> anyhow::Result<String> {
    let (answer, _) = timed(addr, request("POST", &format!("/v1/functions/counter/invoke?book={book}"), auth, b"incr")).await;
    let position = answer.header("tally-position").with_context(|| format!("an increment answered {}", answer.shown()))?;
    Ok(position.to_string())
}

/// `position` (`term.index` per log) with every index set to `index` and every term
/// raised by `terms`.
fn moved(position: &str, terms: u32, index: Option<u64>) -> anyhow::Result<String> {
    let parts = position.split(',').map(|part| {
        let (term, at) = part.trim().split_once('.').with_context(|| format!("a position {position:?}"))?;
        let term: u32 = term.parse().with_context(|| format!("a position {position:?}"))?;
        let at = match index {
            Some(i) => i.to_string(),
            None => at.to_string(),
        };
        anyhow::Ok(format!("{}.{at}", term + terms))
    });
    Ok(parts.collect::<anyhow::Result<Vec<_>>>()?.join(","))
}

/// The phase: a request with a position of the next term (`future-term`) and one with
/// an index past the end (`far-index`), both to echo on `book` with `auth` (a header
/// line), and beside them one with a reached position (`session-beside`). Each is noted
/// in `ledger` under `positions`.
pub(crate) async fn phase(addr: &str, book: u64, auth: &str, ledger: &Ledger) -> anyhow::Result<Vec<Timed>> {
    let echo = |position: &str| {
        request(
            "POST",
            &format!("/v1/functions/echo/invoke?book={book}"),
            &format!("{auth}Tally-Position: {position}\r\n"),
            b"hi",
        )
    };
    let now = reached(addr, book, auth).await?;
    // A term the cluster has not reached is refused (400); an index its term has not
    // reached is waited for, up to the log's timeout (504).
    let far: [(&'static str, String, Expect); 2] = [
        ("future-term", moved(&now, 1, None)?, Expect::status(&[400]).code("invalid_argument")),
        ("far-index", moved(&now, 0, Some(u64::MAX))?, Expect::status(&[400, 504])),
    ];
    let waiting: Vec<_> = far
        .into_iter()
        .map(|(name, position, expect)| {
            let (addr, bytes) = (addr.to_string(), echo(&position));
            (name, expect, tokio::spawn(async move { timed(&addr, bytes).await }))
        })
        .collect();
    tokio::time::sleep(HEAD_START).await;
    // A position newer than any the registry has synced to: the session client's
    // request must sync, as one after a deploy through another node would.
    let session = reached(addr, book, auth).await?;
    let (answer, took) = timed(addr, echo(&session)).await;
    let unhindered = Expect::status(&[200]).body_has("hi").accepts(&answer) && took <= SESSION_WAIT_MAX;
    let name = "session-beside";
    ledger.note("positions", &format!("{name} (took {} ms)", took.as_millis()), &answer, unhindered);
    let mut timed = vec![Timed { name, answer: answer.label(), took }];
    for (name, expect, task) in waiting {
        let (answer, took) = task.await.context("a request of the positions phase panicked")?;
        ledger.note("positions", &format!("{name} (took {} ms)", took.as_millis()), &answer, expect.accepts(&answer));
        timed.push(Timed { name, answer: answer.label(), took });
    }
    Ok(timed)
}
