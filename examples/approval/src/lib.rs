//! An approval workflow on a promise. `request WHAT` creates a promise, appends
//! `WHAT <promise-id>` to the book under the tag `approvals` (where an approver finds
//! it: `tally book B --tag approvals`), and waits durably for the decision, at most a
//! day: the invocation suspends (its caller gets 202 with its ID) until someone posts
//! the decision with `POST /v1/promises/{promise-id}?book=B`, then answers
//! `WHAT: <decision>`, or `WHAT: expired` after a day. The request is logged once,
//! however often the invocation runs again.

use std::time::Duration;

use tally_sdk::{context, log, Error, Tag};

const DECISION_WITHIN: Duration = Duration::from_secs(24 * 3600);

fn handle(input: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let text = String::from_utf8_lossy(&input);
    let what = text.strip_prefix("request ").ok_or_else(|| anyhow::anyhow!("expected `request WHAT`, found {text:?}"))?;
    let promise = context::promise_create()?;
    log::append(&[Tag::named("approvals")], format!("{what} {promise}"))?;
    let decision = match context::promise_await(&promise, Some(DECISION_WITHIN)) {
        Ok(value) => String::from_utf8_lossy(&value).into_owned(),
        Err(Error::Timeout(_)) => "expired".into(),
        Err(e) => return Err(e.into()),
    };
    Ok(format!("{what}: {decision}").into_bytes())
}

tally_sdk::handler!(handle);
