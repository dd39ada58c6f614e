use super::*;
use crate::types::{LogId, ShardId, Term};

fn s(p: u64) -> SeqNum {
    SeqNum::new(Term(1), LogId(0), p)
}

fn meta(book: u64, tags: &[u64], cond: Option<(u64, u64)>) -> RecordMeta {
    RecordMeta {
        book: BookId(book),
        tags: tags.iter().map(|&t| Tag(t)).collect(),
        cond: cond.map(|(tag, position)| Cond { tag: Tag(tag), position }),
        unchanged: vec![],
    }
}

fn loc(p: u64) -> Location {
    Location { shard: ShardId(0), local_id: p }
}

/// A test record: position, book, tags, condition (tag, offset).
type TestRecord<'a> = (u64, u64, &'a [u64], Option<(u64, u64)>);

/// Applies records and returns the placements.
fn build(records: &[TestRecord]) -> (Index, Vec<Placement>) {
    let mut index = Index::new();
    let placements = records.iter().map(|&(p, b, t, c)| index.apply_record(s(p), loc(p), &meta(b, t, c))).collect();
    (index, placements)
}

fn stream(index: &Index, book: u64, tag: u64) -> Vec<u64> {
    let mut out = vec![];
    let mut min = SeqNum::MIN;
    while let Some(f) = index.read_next(BookId(book), Tag(tag), min) {
        out.push(f.seqnum.position());
        min = SeqNum(f.seqnum.0 + 1);
    }
    out
}

#[test]
fn tag_selective_reads_and_books_are_separate() {
    let (index, _) =
        build(&[(0, 1, &[5], None), (1, 2, &[5], None), (2, 1, &[6], None), (3, 1, &[5, 6], None), (4, 1, &[], None)]);
    assert_eq!(stream(&index, 1, 5), vec![0, 3]);
    assert_eq!(stream(&index, 1, 6), vec![2, 3]);
    assert_eq!(stream(&index, 1, 0), vec![0, 2, 3, 4]);
    assert_eq!(stream(&index, 2, 0), vec![1]);
    assert_eq!(index.read_prev(BookId(1), Tag(5), s(2)).map(|f| f.seqnum), Some(s(0)));
    assert_eq!(index.read_prev(BookId(1), Tag(5), SeqNum::MAX).map(|f| f.seqnum), Some(s(3)));
    assert_eq!(index.read_next(BookId(3), Tag(0), SeqNum::MIN), None);
}

#[test]
fn conditional_appends_succeed_only_at_their_offset() {
    let (index, placed) = build(&[
        (0, 1, &[9], Some((9, 0))),
        (1, 1, &[9], Some((9, 0))), // a peer lost the race for offset 0
        (2, 1, &[9], Some((9, 1))),
        (3, 1, &[9], Some((9, 5))), // ahead of the stream: nothing holds offset 5
        (4, 2, &[9], Some((9, 0))), // another book's stream 9 is empty
    ]);
    assert_eq!(
        placed,
        vec![
            Placement::Placed,
            Placement::CondFailed { holder: Some(s(0)) },
            Placement::Placed,
            Placement::CondFailed { holder: None },
            Placement::Placed,
        ]
    );
    assert_eq!(stream(&index, 1, 9), vec![0, 2]);
    assert_eq!(stream(&index, 1, 0), vec![0, 2], "failed records are invisible in every row");
}

#[test]
fn a_record_with_conditions_on_unchanged_streams_is_placed_only_if_all_hold() {
    let (mut index, _) = build(&[(0, 1, &[7], None), (1, 1, &[8], None)]);
    let with = |cond: Option<(u64, u64)>, unchanged: &[(u64, u64)]| RecordMeta {
        unchanged: unchanged.iter().map(|&(tag, position)| Cond { tag: Tag(tag), position }).collect(),
        ..meta(1, &[9], cond)
    };
    // Stream 7 holds one record and 8 one: both unchanged, and offset 0 of 9 free.
    assert_eq!(index.apply_record(s(2), loc(2), &with(Some((9, 0)), &[(7, 1), (8, 1)])), Placement::Placed);
    // Not joined: streams 7 and 8 still hold one record each.
    assert_eq!(stream(&index, 1, 7), vec![0]);
    assert_eq!(stream(&index, 1, 8), vec![1]);
    // Stream 8 changed since the caller counted zero records: the holder of offset 0.
    let failed = index.apply_record(s(3), loc(3), &with(Some((9, 1)), &[(7, 1), (8, 0)]));
    assert_eq!(failed, Placement::CondFailed { holder: Some(s(1)) });
    // A condition on an empty stream (a table that never switched), without `cond`.
    assert_eq!(index.apply_record(s(4), loc(4), &with(None, &[(5, 0)])), Placement::Placed);
    // The offset condition is decided first: it names its holder.
    let failed = index.apply_record(s(5), loc(5), &with(Some((9, 0)), &[(5, 1)]));
    assert_eq!(failed, Placement::CondFailed { holder: Some(s(2)) });
    let failed = index.apply_record(s(6), loc(6), &with(Some((9, 2)), &[(5, 1)]));
    assert_eq!(failed, Placement::CondFailed { holder: None });
    assert_eq!(stream(&index, 1, 9), vec![2, 4], "failed records join no stream");
}

#[test]
fn trims_keep_offsets_and_hold_for_later_records() {
    let (mut index, _) = build(&[(0, 1, &[9], None), (1, 1, &[9], None), (2, 1, &[9], None)]);
    index.apply_trim(BookId(1), Tag(9), s(2));
    assert_eq!(stream(&index, 1, 9), vec![2]);
    // Offsets still count the trimmed records: offset 3 is next, offset 2 is held.
    assert_eq!(index.apply_record(s(3), loc(3), &meta(1, &[9], Some((9, 3)))), Placement::Placed);
    assert_eq!(index.apply_record(s(4), loc(4), &meta(1, &[9], Some((9, 2)))), Placement::CondFailed { holder: Some(s(2)) });
    // A trim point ahead of the tail trims records ordered later, on arrival.
    index.apply_trim(BookId(1), Tag(9), s(10));
    index.apply_record(s(5), loc(5), &meta(1, &[9], None));
    assert_eq!(stream(&index, 1, 9), Vec::<u64>::new());
    assert_eq!(stream(&index, 1, 0), Vec::<u64>::new());
}

#[test]
fn an_imported_book_continues_as_if_its_history_was_applied_here() {
    // Book 1's history, with a trim and a failed condition, then the same later
    // records applied to the original and to an index that imported the book.
    let history: &[TestRecord] =
        &[(0, 1, &[9], Some((9, 0))), (1, 2, &[9], None), (2, 1, &[9, 4], None), (3, 1, &[9], Some((9, 0))), (4, 1, &[], None)];
    let (mut old, _) = build(history);
    old.apply_trim(BookId(1), Tag(4), s(3));
    old.apply_trim(BookId(1), Tag(9), s(1));
    let (states, more) = old.export(|b| b == BookId(1), None, usize::MAX);
    assert!(!more);
    assert_eq!(states.len(), 1, "only the wanted book");
    let mut moved = Index::new();
    moved.import(states[0].clone());
    let later: &[TestRecord] = &[(10, 1, &[9], Some((9, 2))), (11, 1, &[9], Some((9, 2))), (12, 1, &[4], None)];
    for &(p, b, t, c) in later {
        let m = meta(b, t, c);
        assert_eq!(old.apply_record(s(p), loc(p), &m), moved.apply_record(s(p), loc(p), &m), "record {p}");
    }
    assert_eq!(old.apply_trim(BookId(1), Tag::ALL, s(11)), moved.apply_trim(BookId(1), Tag::ALL, s(11)));
    for tag in [0, 4, 9] {
        assert_eq!(stream(&old, 1, tag), stream(&moved, 1, tag), "tag {tag}");
    }
    assert_eq!(stream(&moved, 1, 0), vec![12], "11 lost its offset, the rest is below the trim");
    assert_eq!(moved.live_records(), 1);
}

#[test]
fn a_malformed_imported_state_never_panics_a_trim() {
    // Row 9 names seqnum 5, which has no record; record 6 claims no live tag row.
    let state = BookState {
        book: BookId(1),
        rows: vec![(Tag::ALL, 2, vec![s(6)]), (Tag(9), 2, vec![s(5), s(6)])],
        trim_points: vec![],
        records: vec![(s(6), loc(6), 0)],
    };
    let mut index = Index::new();
    index.import(state);
    let died: Vec<u64> = index.apply_trim(BookId(1), Tag(9), s(7)).iter().map(|d| d.0.position()).collect();
    assert_eq!(died, vec![6]);
    assert_eq!(stream(&index, 1, 0), Vec::<u64>::new());
}

#[test]
fn exports_come_in_book_order_in_bounded_pieces() {
    let records: Vec<TestRecord> = (0..10).map(|p| (p, p % 5, &[7u64][..], None)).collect();
    let (index, _) = build(&records);
    let mut got = Vec::new();
    let mut after = None;
    loop {
        let (states, more) = index.export(|b| b.0 != 3, after, 5);
        got.extend(states.iter().map(|s| s.book.0));
        after = states.last().map(|s| s.book);
        if !more {
            break;
        }
    }
    assert_eq!(got, vec![0, 1, 2, 4]);
}

#[test]
fn marks_count_records_for_conditions_and_keep_nothing_alive() {
    let m = Tag::MARK_BITS | 9;
    let (mut index, placed) = build(&[
        (0, 1, &[5, m], Some((m, 0))),
        (1, 1, &[m], Some((m, 1))), // marks only: live as an untagged record is
        (2, 1, &[5, m], Some((m, 1))),
        (3, 1, &[5], None),
    ]);
    assert_eq!(placed[2], Placement::CondFailed { holder: Some(s(1)) });
    assert_eq!(stream(&index, 1, 0), vec![0, 1, 3]);
    // Trimming tag 5 kills record 0 though it carries the mark; the mark row still
    // names it for a condition, and a trim of ALL leaves the mark row alone too.
    let died: Vec<u64> = index.apply_trim(BookId(1), Tag(5), s(1)).iter().map(|d| d.0.position()).collect();
    assert_eq!(died, vec![0]);
    index.apply_trim(BookId(1), Tag::ALL, s(2));
    assert_eq!(stream(&index, 1, 0), vec![3]);
    assert_eq!(index.apply_record(s(4), loc(4), &meta(1, &[m], Some((m, 0)))), Placement::CondFailed { holder: Some(s(0)) });
    assert_eq!(index.apply_record(s(5), loc(5), &meta(1, &[m], Some((m, 1)))), Placement::CondFailed { holder: Some(s(1)) });
    // Trimming the mark itself kills nothing and forgets its seqnums, not its
    // offsets; it leaves no trim point behind.
    assert!(index.apply_trim(BookId(1), Tag(m), s(1)).is_empty());
    assert_eq!(index.apply_record(s(6), loc(6), &meta(1, &[m], Some((m, 0)))), Placement::CondFailed { holder: None });
    assert!(index.apply_trim(BookId(1), Tag(m), SeqNum::MAX).is_empty());
    assert!(!index.books[&BookId(1)].trim_points.contains_key(&Tag(m)));
    assert_eq!(index.apply_record(s(7), loc(7), &meta(1, &[m], Some((m, 1)))), Placement::CondFailed { holder: None });
    assert_eq!(index.apply_record(s(8), loc(8), &meta(1, &[m], Some((m, 2)))), Placement::Placed);
    assert_eq!(stream(&index, 1, 0), vec![3, 8]);
}

/// The same records and trims applied to an index that spills every full chunk
/// at once and to one that holds all in memory: the same placements, deaths,
/// reads and exports, while the first keeps no full chunk in memory.
#[test]
fn an_index_that_spills_answers_as_one_in_memory() {
    let mut rng = crate::sim::Rng::new(7);
    let mut next = move || rng.next_u64();
    let mut mem = Index::new();
    let mut cold = Index::with_cold_store(Box::new(crate::chunks::MemColdStore::default()), 0);
    let tags = [Tag(1), Tag(2), Tag(3), Tag(Tag::MARK_BITS | 1)];
    let mut spilled_max = 0;
    for p in 0..30_000u64 {
        let r = next();
        let book = BookId(r % 3);
        if r % 61 == 0 {
            let tag = [Tag::ALL, tags[0], tags[1], tags[2], tags[3]][(r >> 8) as usize % 5];
            let point = s(p.saturating_sub((r >> 16) % 3000));
            // In the order of the book's tags, which a `HashMap` gives.
            let (mut a, mut b) = (mem.apply_trim(book, tag, point), cold.apply_trim(book, tag, point));
            a.sort_unstable_by_key(|d| d.0);
            b.sort_unstable_by_key(|d| d.0);
            assert_eq!(a, b, "trim at {p}");
            continue;
        }
        let record_tags: Vec<Tag> = tags.iter().copied().filter(|_| next() % 3 == 0).collect();
        let cond = (r % 7 == 0).then(|| {
            let tag = tags[(r >> 8) as usize % 4];
            let position = mem.next_offset(book, tag).saturating_sub((r >> 12) % 2);
            Cond { tag, position }
        });
        let meta = RecordMeta { book, tags: record_tags, cond, unchanged: vec![] };
        let location = Location { shard: ShardId(((r >> 20) % 3) as u32), local_id: p };
        assert_eq!(mem.apply_record(s(p), location, &meta), cold.apply_record(s(p), location, &meta), "record {p}");
        assert_eq!(cold.chunk_bytes().0, 0, "no full chunk stays in memory");
        spilled_max = spilled_max.max(cold.chunk_bytes().1);
        if p % 97 == 0 {
            for _ in 0..20 {
                let (book, at) = (BookId(next() % 3), s(next() % (p + 2)));
                let tag = [Tag::ALL, tags[0], tags[1], tags[2], tags[3]][next() as usize % 5];
                assert_eq!(mem.read_next(book, tag, at), cold.read_next(book, tag, at), "read-next at {p}");
                assert_eq!(mem.read_prev(book, tag, at), cold.read_prev(book, tag, at), "read-prev at {p}");
                let found = mem.read_prev(book, tag, at).map(|f| f.seqnum);
                assert_eq!(mem.read_prev_seqnum(book, tag, at), found, "read-prev-seqnum at {p}");
                assert_eq!(cold.read_prev_seqnum(book, tag, at), found, "read-prev-seqnum at {p}");
                assert_eq!(mem.is_live(book, at), cold.is_live(book, at), "is-live at {p}");
            }
        }
    }
    assert!(spilled_max > 0, "chunks were spilled");
    assert_eq!(mem.export(|_| true, None, usize::MAX), cold.export(|_| true, None, usize::MAX));
    assert_eq!(mem.live_records(), cold.live_records());
}

/// A cold store that fails its writes while `failing` is set.
struct Flaky {
    store: crate::chunks::MemColdStore,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

impl ColdStore for Flaky {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::other("no space left"));
        }
        self.store.write_at(offset, bytes)
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.store.read_at(offset, out)
    }
}

/// While the store fails, full chunks stay in memory and nothing is lost; once it
/// takes writes again, the index gets back within its bound.
#[test]
fn an_index_whose_cold_store_fails_keeps_its_chunks_in_memory() {
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let store = Flaky { store: Default::default(), failing: failing.clone() };
    let mut index = Index::with_cold_store(Box::new(store), 0);
    let mut p = 0;
    let mut append = |index: &mut Index, n: u64| {
        for _ in 0..n {
            index.apply_record(s(p), loc(p), &meta(1, &[7], None));
            p += 1;
        }
    };
    append(&mut index, 2000);
    assert_eq!(index.chunk_bytes().1, 0, "nothing spilled");
    assert!(index.chunk_bytes().0 > 0);
    assert_eq!(stream(&index, 1, 7), (0..2000).collect::<Vec<_>>());
    failing.store(false, std::sync::atomic::Ordering::Relaxed);
    // The next try waits for more chunks to fill: 1 MiB at least, 960 bytes per 64
    // records here (two rows of 64-entry test chunks).
    append(&mut index, 1 << 17);
    assert!(index.chunk_bytes().1 > 0, "spilled again");
    assert_eq!(index.chunk_bytes().0, 0, "back within the bound");
    assert_eq!(stream(&index, 1, 7), (0..2000 + (1 << 17)).collect::<Vec<_>>());
}

/// Chunks that filled up and then left their rows (trimmed) do not pile up in the
/// queue of chunks to spill while the index stays within its bound.
#[test]
fn the_queue_of_chunks_to_spill_forgets_trimmed_ones() {
    let mut index = Index::with_cold_store(Box::new(crate::chunks::MemColdStore::default()), usize::MAX);
    for p in 0..200_000 {
        index.apply_record(s(p), loc(p), &meta(1, &[7], None));
        if p % 1000 == 999 {
            index.apply_trim(BookId(1), Tag(7), s(p - 100));
        }
    }
    assert_eq!(index.chunk_bytes().1, 0, "nothing spilled");
    assert!(index.sealed.len() <= 2 * SEALED_PRUNE_MIN, "{} chunks queued", index.sealed.len());
}

#[test]
fn a_record_dies_when_trimmed_from_all_its_tag_rows() {
    let (mut index, _) = build(&[(0, 1, &[5, 6], None), (1, 1, &[5], None), (2, 1, &[], None)]);
    let died = index.apply_trim(BookId(1), Tag(5), s(2));
    assert_eq!(died.iter().map(|d| d.0.position()).collect::<Vec<_>>(), vec![1]);
    assert_eq!(stream(&index, 1, 0), vec![0, 2], "record 0 still lives in row 6");
    assert_eq!(stream(&index, 1, 6), vec![0]);
    let died = index.apply_trim(BookId(1), Tag(6), s(1));
    assert_eq!(died.iter().map(|d| d.0.position()).collect::<Vec<_>>(), vec![0]);
    assert_eq!(stream(&index, 1, 0), vec![2]);
    let died = index.apply_trim(BookId(1), Tag::ALL, s(3));
    assert_eq!(died.iter().map(|d| d.0.position()).collect::<Vec<_>>(), vec![2]);
    assert_eq!(index.live_records(), 0);
    assert!(index.apply_trim(BookId(1), Tag::ALL, s(1)).is_empty(), "trim points never move back");
}
