//! One conformance suite for every [`LogBook`]: the engine's client over an in-process
//! cluster (`tally-logsvc`), the exactly-once simulator's log (`tally-durable`), and the
//! log simulator's engines (`SimLog`, this crate's `tests/logbook.rs`), each run by its
//! crate's tests. It checks the contract the trait's documentation states:
//! order and seqnums, the context's monotonicity, conditional appends and their holders
//! (also past a trim, also ahead of the end), conditions on unchanged streams, trims,
//! and aux data. (Timeouts and failures are the implementations' own tests: how to make
//! one fail differs.)
//!
//! Each check uses streams of its own under the caller's `salt`, so one book may serve
//! every check and several runs.

use bytes::Bytes;

use super::LogBook;
use crate::{BookId, Cond, Context, Error, SeqNum, Tag};

/// Runs every check on `log`, in `book`, with tags derived from `salt`. Panics with the
/// name of the check that failed.
pub async fn run_all(log: &dyn LogBook, book: BookId, salt: &str) {
    appends_are_read_in_order(log, book, salt).await;
    the_context_only_moves_forward(log, book, salt).await;
    a_conditional_append_lands_at_its_offset_or_names_the_holder(log, book, salt).await;
    a_condition_on_an_unchanged_stream_holds_until_it_changes(log, book, salt).await;
    trims_remove_records_and_keep_offsets(log, book, salt).await;
    aux_data_goes_on_live_records_of_the_book_only(log, book, salt).await;
}

fn tag(salt: &str, name: &str) -> Tag {
    // Reserved (the platform's): the suite checks the log the platform uses.
    Tag(Tag::from_name(&format!("{salt}/{name}")).0 | (1 << 63))
}

fn data(text: &str) -> Bytes {
    Bytes::from(text.to_string())
}

async fn appends_are_read_in_order(log: &dyn LogBook, book: BookId, salt: &str) {
    let (a, b) = (tag(salt, "order-a"), tag(salt, "order-b"));
    let mut ctx = Context::new();
    let mut seqnums = Vec::new();
    for i in 0..3 {
        seqnums.push(log.append(&mut ctx, book, &[a], data(&format!("a{i}"))).await.expect("append"));
    }
    let both = log.append(&mut ctx, book, &[a, b], data("ab")).await.expect("append to two streams");
    assert!(seqnums.windows(2).all(|w| w[0] < w[1]) && seqnums[2] < both, "seqnums grow: {seqnums:?} then {both}");
    let first = log.read_next(&mut ctx, book, a, SeqNum(0)).await.expect("read").expect("a record");
    assert_eq!((first.seqnum, first.data.clone()), (seqnums[0], data("a0")), "read_next from 0 is the first");
    let second = log.read_next(&mut ctx, book, a, SeqNum(first.seqnum.0 + 1)).await.expect("read").expect("a record");
    assert_eq!(second.seqnum, seqnums[1], "read_next past the first is the second");
    let last = log.read_prev(&mut ctx, book, a, SeqNum::MAX).await.expect("read").expect("a record");
    assert_eq!(last.seqnum, both, "read_prev from the end is the last");
    let in_b = log.read_next(&mut ctx, book, b, SeqNum(0)).await.expect("read").expect("a record");
    assert_eq!(in_b.seqnum, both, "a record is in the stream of each of its tags");
    assert!(in_b.tags.contains(&a) && in_b.tags.contains(&b), "it carries its tags: {:?}", in_b.tags);
    let whole = log.read_prev(&mut ctx, book, Tag::ALL, SeqNum::MAX).await.expect("read").expect("a record");
    assert!(whole.seqnum >= both, "the book's stream has every record");
    let before = log.read_prev(&mut ctx, book, a, SeqNum(seqnums[0].0 - 1)).await.expect("read");
    assert!(before.is_none(), "nothing of the stream before its first record");
    for (t, max) in [(a, SeqNum::MAX), (a, seqnums[1]), (a, SeqNum(seqnums[0].0 - 1)), (b, SeqNum::MAX), (Tag::ALL, both)] {
        let seqnum = log.read_prev_seqnum(&mut ctx, book, t, max).await.expect("read");
        let record = log.read_prev(&mut ctx, book, t, max).await.expect("read");
        assert_eq!(seqnum, record.map(|r| r.seqnum), "read_prev_seqnum names read_prev's record ({t:?} at or below {max})");
    }
}

async fn the_context_only_moves_forward(log: &dyn LogBook, book: BookId, salt: &str) {
    let t = tag(salt, "context");
    let mut ctx = Context::new();
    let s = log.append(&mut ctx, book, &[t], data("x")).await.expect("append");
    let after_append = ctx.clone();
    assert!(after_append.covers(&Context::new()) && after_append != Context::new(), "an append moves the context");
    let mut reader = ctx.clone();
    let found = log.read_next(&mut reader, book, t, SeqNum(0)).await.expect("read").expect("the record");
    assert_eq!(found.seqnum, s, "a reader with the appender's context reads its write");
    assert!(reader.covers(&after_append), "a read does not move the context back");
    let mut other = ctx.clone();
    log.append(&mut other, book, &[t], data("y")).await.expect("append");
    assert!(other.covers(&after_append), "a later append's context covers the earlier one");
}

async fn a_conditional_append_lands_at_its_offset_or_names_the_holder(log: &dyn LogBook, book: BookId, salt: &str) {
    let t = tag(salt, "cond");
    let mut ctx = Context::new();
    let first = log.cond_append(&mut ctx, book, &[], data("0"), t, 0).await.expect("offset 0 of an empty stream");
    let before = ctx.clone();
    match log.cond_append(&mut ctx, book, &[], data("again"), t, 0).await {
        Err(Error::Conflict { holder }) => assert_eq!(holder, Some(first), "the conflict names the record at the offset"),
        other => panic!("a second append at offset 0 got {other:?}"),
    }
    assert!(ctx.covers(&before), "a conflict moves the context like a success");
    let second = log.cond_append(&mut ctx, book, &[], data("1"), t, 1).await.expect("offset 1");
    assert!(second > first);
    match log.cond_append(&mut ctx, book, &[], data("ahead"), t, 5).await {
        Err(Error::Conflict { holder: None }) => {}
        other => panic!("an append ahead of the stream's end got {other:?}"),
    }
    let read = log.read_next(&mut ctx, book, t, SeqNum(second.0 + 1)).await.expect("read");
    assert!(read.is_none(), "a record that failed its condition is in no stream: {read:?}");
}

async fn a_condition_on_an_unchanged_stream_holds_until_it_changes(log: &dyn LogBook, book: BookId, salt: &str) {
    let (t, watched) = (tag(salt, "if"), tag(salt, "if-watched"));
    let mut ctx = Context::new();
    let unchanged = [Cond { tag: watched, position: 0 }];
    log.cond_append_if(&mut ctx, book, &[], data("0"), Cond { tag: t, position: 0 }, &unchanged)
        .await
        .expect("the watched stream is empty");
    let moved = log.append(&mut ctx, book, &[watched], data("w")).await.expect("append");
    match log.cond_append_if(&mut ctx, book, &[], data("1"), Cond { tag: t, position: 1 }, &unchanged).await {
        Err(Error::Conflict { holder }) => assert_eq!(holder, Some(moved), "the conflict names what changed the stream"),
        other => panic!("a condition on a stream that changed got {other:?}"),
    }
    let counted = [Cond { tag: watched, position: 1 }];
    log.cond_append_if(&mut ctx, book, &[], data("1"), Cond { tag: t, position: 1 }, &counted)
        .await
        .expect("the watched stream holds one record");
}

async fn trims_remove_records_and_keep_offsets(log: &dyn LogBook, book: BookId, salt: &str) {
    let t = tag(salt, "trim");
    let mut ctx = Context::new();
    let mut seqnums = Vec::new();
    for i in 0..3 {
        seqnums.push(log.append(&mut ctx, book, &[t], data(&format!("{i}"))).await.expect("append"));
    }
    log.trim(&mut ctx, book, t, seqnums[2]).await.expect("trim");
    let first = log.read_next(&mut ctx, book, t, SeqNum(0)).await.expect("read").expect("a record");
    assert_eq!(first.seqnum, seqnums[2], "a trim removes the records below its seqnum");
    let prev = log.read_prev(&mut ctx, book, t, seqnums[1]).await.expect("read");
    assert!(prev.is_none(), "a trimmed record is never read again: {prev:?}");
    let prev = log.read_prev_seqnum(&mut ctx, book, t, seqnums[1]).await.expect("read");
    assert!(prev.is_none(), "nor named: {prev:?}");
    match log.cond_append(&mut ctx, book, &[], data("0"), t, 0).await {
        Err(Error::Conflict { holder: None }) => {}
        other => panic!("an append at a trimmed offset got {other:?}"),
    }
    log.cond_append(&mut ctx, book, &[], data("3"), t, 3).await.expect("offsets count trimmed records");
}

async fn aux_data_goes_on_live_records_of_the_book_only(log: &dyn LogBook, book: BookId, salt: &str) {
    let t = tag(salt, "aux");
    let mut ctx = Context::new();
    let s = log.append(&mut ctx, book, &[t], data("r")).await.expect("append");
    log.set_aux_data(&mut ctx, book, s, data("view")).await.expect("aux data on a live record");
    let read = log.read_next(&mut ctx, book, t, SeqNum(0)).await.expect("read").expect("the record");
    if let Some(aux) = read.aux {
        assert_eq!(aux, data("view"), "aux data, when kept, is what was set");
    }
    let nowhere = SeqNum(s.0 + 1);
    match log.set_aux_data(&mut ctx, book, nowhere, data("view")).await {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("aux data on a seqnum that holds no record of the book got {other:?}"),
    }
}
