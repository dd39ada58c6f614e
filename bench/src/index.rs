//! The `index` suite (INDILOG, issue 54): what indexing costs in memory and time in
//! each index mode, and what a read costs on each path.
//!
//! ```text
//!   bytes   the index state machines driven with synthetic metalog entries (10 records
//!           each, 16 books), with a new tag per record (the thesis's upper bound) and
//!           with one tag (its lower bound): heap bytes of the complete index (`index.rs`,
//!           all resident: the Boki-like baseline), of one index node (S = 2: the whole
//!           stream table and half the postings), of the stream table alone, and of a
//!           function node's local index (default bounds), counted by this process's
//!           allocator on the building thread; and the longest single call of each
//!           machine (apply an entry), timed inside the call, of all calls and of those
//!           that took no page fault (beside: a first touch of a fresh 2 MiB)
//!   read    each read path: complete mode local and forwarded, partial mode's tag-cache
//!           and popularity hits and tier reads of types 2 and 3, at 1 and 16 clients,
//!           with the record cache on and off (`index_read.rs`)
//!   tier    the thesis's balanced and read-heavy workloads at a high and a low local
//!           hit ratio, complete mode against Boki-remote and partial mode: throughput,
//!           and latency at half complete mode's throughput (`index_tier.rs`)
//!   join    a function node joining a cluster after 0 to 5M records, in each mode
//!           (`join.rs`)
//!   rss     every process's RSS in a process cluster after 1M and 5M appends, in each
//!           mode (`index_rss.rs`)
//!   apps    the bank's exactly-once transfers, write- and read-optimized, in complete
//!           mode and in partial mode with the default and the small local index:
//!           throughput, latency at a fixed offered load, local hits (`index_apps.rs`)
//! ```
//!
//! Goals (the spec's Measures 1, 2 and 4): the local index within its bounds; the stream
//! table at most 48 B per stream; an index node's postings at most 1.25/S of the complete
//! index per record; the longest call at most 10 ms; a tag-cache hit at most 1.1x a
//! complete-mode local read; type 2 at most 1.0x a complete-mode forwarded read, type 3
//! at most 1.4x type 2; at high locality, reads, appends and conditional appends at most
//! 1.1x, 1.05x and 1.15x complete mode's p50 at a fixed offered load; the bank with the
//! default local index at least 90% local hits, its p50 and p99 at most 1.05x and 1.1x
//! complete mode's. A function node's RSS at 5M appends within 2% + 16 MiB of 1M in partial
//! mode. Every `--only` part (`bytes`, `read`, `tier`, `join`, `apps`, `rss`) runs alone
//! too.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tally_logsvc::tier::{IndexShard, LocalBounds, LocalIndex, StreamTable};
use tally_logsvc::{BookId, Index, Location, LogId, MetalogEntry, MetalogPosition, RecordMeta, SeqNum, ShardId, Tag, Term};

use crate::report::Report;
use crate::RunOptions;

/// The allocator of this process (`main.rs`): mimalloc, counting the heap bytes each
/// thread holds, so that one structure built on one thread is measured alone.
pub struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

/// Set only while this suite measures: every other suite's allocations cost one load.
static COUNTING: AtomicBool = AtomicBool::new(false);

fn count(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        let _ = HELD.try_with(|h| h.set(h.get() + delta));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Heap bytes the current thread holds (allocated here, not yet freed here).
fn held() -> isize {
    HELD.with(Cell::get)
}

const RECORDS_PER_ENTRY: u64 = 10;
const BOOKS: u64 = 16;
const SHARDS: usize = 2;

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let mut report = Report::new("index", "complete and partial index modes (INDILOG)");
    let sizes: &[u64] = if opts.quick { &[200_000] } else { &[1_000_000, 5_000_000] };
    if opts.runs("bytes") {
        COUNTING.store(true, Ordering::Relaxed);
        for &records in sizes {
            for new_tags in [true, false] {
                let m = tokio::task::spawn_blocking(move || structure_bytes(records, new_tags)).await?;
                m.record(&mut report, records, new_tags)?;
            }
        }
        COUNTING.store(false, Ordering::Relaxed);
        for (huge, metric) in [(false, "fresh_2mib_touch_us"), (true, "fresh_huge_page_touch_us")] {
            let fresh = tokio::task::spawn_blocking(move || fresh_touch(huge)).await?;
            report.record("bytes,platform", metric, fresh.as_secs_f64() * 1e6, "us")?;
        }
    }
    if opts.runs("read") {
        crate::index_read::run(&mut report, if opts.quick { 500 } else { 5_000 }).await?;
    }
    if opts.runs("tier") {
        crate::index_tier::run(&mut report, opts.quick).await?;
    }
    if opts.runs("join") {
        let joins: &[u64] = if opts.quick { &[0, 20_000] } else { &[0, 1_000_000, 5_000_000] };
        crate::join::run(&mut report, joins).await?;
    }
    if opts.runs("apps") {
        crate::index_apps::run(&mut report, opts.quick).await?;
    }
    let rss_sizes: &[u64] = if opts.quick { &[50_000, 150_000] } else { &[1_000_000, 5_000_000] };
    if opts.runs("rss") {
        crate::index_rss::run(&mut report, rss_sizes).await?;
    }
    eprint!("{}", report.table());
    sanity(&report, opts, sizes, rss_sizes);
    Ok(())
}

/// What [`structure_bytes`] measured.
struct Bytes3 {
    complete: isize,
    complete_longest: Longest,
    index_node: isize,
    index_node_longest: Longest,
    stream_table: isize,
    stream_table_computed: usize,
    streams: usize,
    local: (usize, usize, usize),
    local_longest: Longest,
}

/// The longest call of a machine, and the longest that took no page fault: on this
/// machine a first touch of fresh memory costs milliseconds per 2 MiB page (measured
/// beside, `fresh_2mib_touch_us` and `fresh_huge_page_touch_us`), which is the platform's, not the index's.
#[derive(Default)]
struct Longest {
    any: Duration,
    no_fault: Duration,
}

impl Longest {
    fn time(&mut self, f: &mut dyn FnMut()) {
        let (faults, t) = (page_faults(), Instant::now());
        f();
        let took = t.elapsed();
        self.any = self.any.max(took);
        if page_faults() == faults {
            self.no_fault = self.no_fault.max(took);
        }
    }

    /// Records both under `metrics`: (of all calls, of those with no fault).
    fn record(&self, report: &mut Report, case: &str, metrics: (&'static str, &'static str)) -> anyhow::Result<()> {
        report.record(case, metrics.0, self.any.as_secs_f64() * 1e6, "us")?;
        report.record(case, metrics.1, self.no_fault.as_secs_f64() * 1e6, "us")
    }
}

/// Page faults this thread took so far.
fn page_faults() -> i64 {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt + usage.ru_majflt
}

/// The longest first touch of a fresh 2 MiB of memory (of 32, mapped at once, written
/// 2 MiB at a time), in small pages and, where the allocator asks for them, in a
/// transparent huge page: what a call that grows the heap pays on this machine.
fn fresh_touch(huge: bool) -> Duration {
    const MIB2: usize = 2 << 20;
    let len = 33 * MIB2;
    // SAFETY: a private anonymous mapping, written only within its length, unmapped
    // before returning.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(map != libc::MAP_FAILED, "mmap of {len} bytes");
        // From the first 2 MiB boundary, so that each step is one huge page.
        let start = (map as usize).next_multiple_of(MIB2) as *mut u8;
        libc::madvise(start.cast(), 32 * MIB2, if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE });
        let mut longest = Duration::ZERO;
        for i in 0..32 {
            let t = Instant::now();
            std::ptr::write_bytes(start.add(i * MIB2), 1, MIB2);
            longest = longest.max(t.elapsed());
        }
        libc::munmap(map, len);
        longest
    }
}

impl Bytes3 {
    fn record(&self, report: &mut Report, records: u64, new_tags: bool) -> anyhow::Result<()> {
        let case = format!("bytes,records={records},tags={}", if new_tags { "new-per-record" } else { "one" });
        let per = |b: isize| b as f64 / records as f64;
        report.record(&case, "complete_bytes_per_record", per(self.complete), "B")?;
        report.record(&case, "index_node_bytes_per_record", per(self.index_node), "B")?;
        let postings = self.index_node - self.stream_table;
        report.record(&case, "postings_bytes_per_record", per(postings), "B")?;
        report.record(&case, "postings_to_complete_ratio", postings as f64 / self.complete.max(1) as f64, "x")?;
        report.record(&case, "streams", self.streams as f64, "streams")?;
        let per_stream = |b: f64| b / self.streams.max(1) as f64;
        report.record(&case, "stream_table_bytes_per_stream", per_stream(self.stream_table as f64), "B")?;
        report.record(&case, "stream_table_computed_per_stream", per_stream(self.stream_table_computed as f64), "B")?;
        let (suffix, tags, popularity) = self.local;
        report.record(&case, "local_suffix_bytes", suffix as f64, "B")?;
        report.record(&case, "local_tag_cache_bytes", tags as f64, "B")?;
        report.record(&case, "local_popularity_bytes", popularity as f64, "B")?;
        self.complete_longest.record(report, &case, ("complete_longest_apply_us", "complete_longest_apply_no_fault_us"))?;
        let index_node = ("index_node_longest_apply_us", "index_node_longest_apply_no_fault_us");
        self.index_node_longest.record(report, &case, index_node)?;
        self.local_longest.record(report, &case, ("local_longest_apply_us", "local_longest_apply_no_fault_us"))?;
        Ok(())
    }
}

/// Entry `k`: records `k*10..k*10+10`, one storage shard.
fn entry(k: u64) -> MetalogEntry {
    let first = k * RECORDS_PER_ENTRY;
    MetalogEntry {
        term: Term(1),
        log: LogId(0),
        index: k,
        start_position: first,
        prev_cut: vec![first],
        cut: vec![first + RECORDS_PER_ENTRY],
        trims: vec![],
        version: 0,
    }
}

fn meta(i: u64, new_tags: bool) -> RecordMeta {
    let tag = if new_tags { Tag(1_000 + i) } else { Tag(1) };
    RecordMeta::plain(BookId(i % BOOKS), vec![tag])
}

/// Builds each structure alone on this thread and counts what it holds.
fn structure_bytes(records: u64, new_tags: bool) -> Bytes3 {
    let entries = records / RECORDS_PER_ENTRY;
    let metas = |k: u64| -> Vec<Vec<RecordMeta>> {
        vec![(k * RECORDS_PER_ENTRY..(k + 1) * RECORDS_PER_ENTRY).map(|i| meta(i, new_tags)).collect()]
    };

    // The complete index, every chunk resident.
    let before = held();
    let mut index = Index::new();
    let mut complete_longest = Longest::default();
    for k in 0..entries {
        let e = entry(k);
        let ms = metas(k);
        complete_longest.time(&mut || {
            for (j, m) in ms[0].iter().enumerate() {
                let position = e.start_position + j as u64;
                let location = Location { shard: ShardId(0), local_id: position };
                index.apply_record(e.seqnum_at(position), location, m);
            }
        });
    }
    let complete = held() - before;
    drop(index);

    // The stream table alone.
    let before = held();
    let mut table = StreamTable::default();
    for i in 0..records {
        table.decide(SeqNum::new(Term(1), LogId(0), i), &meta(i, new_tags));
    }
    let stream_table = held() - before;
    let (stream_table_computed, streams) = (table.bytes(), table.streams());
    drop(table);

    // One index node (shard 0 of 2), and a function node's local index fed by the
    // decided updates (one index node builds them all).
    let before = held();
    let mut shard = IndexShard::new(0, SHARDS, 16_384);
    let mut local = LocalIndex::new(LocalBounds::default(), MetalogPosition::ZERO, SeqNum::new(Term(1), LogId(0), 0));
    let (mut index_node_longest, mut local_longest) = (Longest::default(), Longest::default());
    let mut local_held = 0;
    for k in 0..entries {
        let e = entry(k);
        let ms = metas(k);
        let mut update = None;
        index_node_longest.time(&mut || update = Some(shard.apply_entry(&e, &[ShardId(0)], &ms).1));
        let update = update.expect("applied");
        let mark = held();
        local_longest.time(&mut || local.apply(&update));
        local_held += held() - mark;
        drop(update);
    }
    let index_node = held() - before - local_held;
    Bytes3 {
        complete,
        complete_longest,
        index_node,
        index_node_longest,
        stream_table,
        stream_table_computed,
        streams,
        local: local.bytes(),
        local_longest,
    }
}

/// The log lengths the join case ran at.
fn joins_of(report: &Report) -> Vec<u64> {
    [0, 20_000, 1_000_000, 5_000_000]
        .into_iter()
        .filter(|r| report.value(&format!("join,mode=partial,records={r}"), "terms_added").is_some())
        .collect()
}

fn sanity(report: &Report, opts: &RunOptions, sizes: &[u64], rss_sizes: &[u64]) {
    let get = |case: &str, metric: &str| report.value(case, metric).unwrap_or(f64::NAN);
    let mut checks: Vec<(String, bool)> = Vec::new();
    let sizes = if opts.runs("bytes") { sizes } else { &[] };
    for &records in sizes {
        let case = format!("bytes,records={records},tags=new-per-record");
        let b = LocalBounds::default();
        checks.push((
            format!("{records} records: the local index within its bounds"),
            get(&case, "local_suffix_bytes") <= b.suffix_bytes as f64
                && get(&case, "local_tag_cache_bytes") <= b.tag_cache_bytes as f64
                && get(&case, "local_popularity_bytes") <= b.popularity_bytes as f64,
        ));
        checks.push((
            format!("{records} records: the stream table at most 48 B per stream (goal)"),
            get(&case, "stream_table_bytes_per_stream") <= 48.0,
        ));
        for tags in ["new-per-record", "one"] {
            let case = format!("bytes,records={records},tags={tags}");
            checks.push((
                format!("{records} records, tags {tags}: postings at most 1.25/S of the complete index per record (goal)"),
                get(&case, "postings_to_complete_ratio") <= 1.25 / SHARDS as f64,
            ));
        }
        for tags in ["new-per-record", "one"] {
            let case = format!("bytes,records={records},tags={tags}");
            checks.push((
                format!("{records} records, tags {tags}: the longest call with no page fault at most 10 ms (goal)"),
                get(&case, "index_node_longest_apply_no_fault_us") <= 10_000.0
                    && get(&case, "local_longest_apply_no_fault_us") <= 10_000.0,
            ));
        }
    }
    let clients: &[usize] = if opts.runs("read") { &crate::index_read::CLIENTS } else { &[] };
    for &clients in clients {
        let p50 = |path: &str, cache: &str| get(&format!("read,{path},cache={cache},clients={clients}"), "read_p50_us");
        checks.push((
            format!("{clients} clients: a tag-cache hit at most 1.1x a complete-mode local read (p50, record cache on, goal)"),
            p50("partial-tag-cache", "on") <= 1.1 * p50("complete-local", "on"),
        ));
        checks.push((
            format!("{clients} clients: type 2 at most 1.0x a complete-mode forwarded read (p50, record cache off, goal)"),
            p50("partial-tier-exact", "off") <= p50("complete-forwarded", "off"),
        ));
        let aggregated = p50("partial-tier-aggregator", "off") < p50("partial-tier-closest", "off");
        eprintln!(
            "index: {clients} clients: one aggregator {} than each engine aggregating its own (p50, record cache off)",
            if aggregated { "faster" } else { "slower" }
        );
        checks.push((
            format!("{clients} clients: type 3 at most 1.4x type 2 (p50, record cache off, goal)"),
            p50("partial-tier-closest", "off") <= 1.4 * p50("partial-tier-exact", "off"),
        ));
    }
    let joins = joins_of(report);
    if let (Some(&empty), Some(&longest)) = (joins.first(), joins.last()) {
        let first_read = |r: u64| get(&format!("join,mode=partial,records={r}"), "first_read_ms");
        checks.push((
            format!("a partial-mode join's first read within 1.2x from {empty} to {longest} records (goal)"),
            first_read(longest) <= 1.2 * first_read(empty),
        ));
    }
    for records in joins {
        let case = |mode: &str| format!("join,mode={mode},records={records}");
        checks
            .push((format!("{records} records: a partial-mode join adds no term"), get(&case("partial"), "terms_added") == 0.0));
        checks.push((
            format!("{records} records: a partial-mode join's first read within 1 s (goal)"),
            get(&case("partial"), "first_read_ms") <= 1_000.0,
        ));
    }
    if opts.runs("tier") {
        let case = |mode: &str| format!("tier,read-heavy,locality=low,mode={mode}");
        let (s2, s6) = (case("partial"), case("partial-s6"));
        eprintln!(
            "index: S = 6 against S = 2 (read-heavy, low locality): {:.1} against {:.1} index requests per tier read, \
             {:.0} against {:.0} ms of CPU per 1,000 operations",
            get(&s6, "index_requests_per_tier_read"),
            get(&s2, "index_requests_per_tier_read"),
            get(&s6, "cpu_ms_per_1k_ops"),
            get(&s2, "cpu_ms_per_1k_ops"),
        );
        for mix in ["balanced", "read-heavy"] {
            let case = |mode: &str| format!("tier,{mix},locality=high,mode={mode}");
            let ratio = |metric: &str| get(&case("partial"), metric) / get(&case("complete"), metric);
            checks.push((
                format!("{mix}: at least 85% local hits with high locality"),
                get(&case("partial"), "local_hit_ratio") >= 0.85,
            ));
            checks.push((format!("{mix}: read p50 at most 1.1x complete mode's (goal)"), ratio("read_p50_us") <= 1.1));
            checks.push((format!("{mix}: append p50 at most 1.05x complete mode's (goal)"), ratio("append_p50_us") <= 1.05));
            checks.push((
                format!("{mix}: conditional append p50 at most 1.15x complete mode's (goal)"),
                ratio("cond_append_p50_us") <= 1.15,
            ));
        }
    }
    if let (true, Some(last)) = (opts.runs("rss"), rss_sizes.last()) {
        let case = format!("rss,mode=partial,records={last}");
        checks.push((
            format!("partial mode: a function node's RSS at {last} records within 2% + 16 MiB of the first sample (goal)"),
            get(&case, "function_rss_growth_mib") <= get(&case, "function_rss_growth_allowed_mib"),
        ));
    }
    if opts.runs("apps") {
        for protocol in crate::index_apps::PROTOCOLS.map(|(p, _)| p.name()) {
            let case = |mode: &str| format!("apps,bank,{protocol},mode={mode}");
            checks.push((
                format!("bank, {protocol}: at least 90% local hits with the default local index (goal)"),
                get(&case("partial"), "local_hit_ratio") >= 0.9,
            ));
            checks.push((
                format!("bank, {protocol}: p50 at most 1.05x complete mode's (goal)"),
                get(&case("partial"), "p50_to_complete") <= 1.05,
            ));
            checks.push((
                format!("bank, {protocol}: p99 at most 1.1x complete mode's (goal)"),
                get(&case("partial"), "p99_to_complete") <= 1.1,
            ));
        }
    }
    for (what, ok) in checks {
        eprintln!("index: sanity {}: {what}", if ok { "ok" } else { "FAILED" });
    }
}
