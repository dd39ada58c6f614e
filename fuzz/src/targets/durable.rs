//! The exactly-once core's records as its readers take them from the log (step logs,
//! write logs, listings, views in aux data, schedules), cron expressions, and the state
//! store's entries as the RocksDB backend reads them back.

use bytes::Bytes;
use tally_durable::fuzzing as durable;
use tally_state::fuzzing as state;
use tally_state_api::Version;

use super::{fields, join, pick, picked, take_u64, text};
use crate::Target;

pub const STEP_RECORDS: Target = Target {
    name: "step_records",
    what: "records of step logs, library streams and INSTANCES: a format byte and bincode of a Step, or a Group \
           of them (durable record/mod.rs decode, decode_steps, decode_last)",
    seeds: records_seeds,
    // A group of one step, and a cancellation: groups nest when the first repeats.
    dictionary: &[&[1], &[0x19, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0], &[0x0f, 0, 0, 0], &[0, 0, 0, 0, 0, 0, 0, 0]],
    run: step_records,
};

fn records_seeds() -> Vec<Vec<u8>> {
    durable::sample_records()
}

fn step_records(data: &[u8]) -> bool {
    let one = durable::decode_step(data);
    if let Ok(again) = &one {
        assert_eq!(durable::decode_step(again).as_ref(), Ok(again), "a step encoded again reads the same");
    }
    let record = durable::decode_step_record(data);
    if let Ok(again) = &record {
        assert_eq!(durable::decode_step_record(again).as_ref(), Ok(again), "a step record encoded again reads the same");
        assert!(one.is_ok(), "a step record that is not a step");
    }
    one.is_ok()
}

/// The objects a write-log record is read for, as the seeds name them.
const OBJECTS: [(&str, &[u8]); 3] = [("t", b"k"), ("t", b"ab"), ("", b"")];

pub const WRITE_LOG: Target = Target {
    name: "write_log",
    what: "write-log records read in place for one object (durable record/mod.rs write_in), checked against the \
           whole record decoded",
    seeds: write_log_seeds,
    dictionary: &[&[1], &[0x01, 0, 0, 0], &[0x19, 0, 0, 0], &[0x1a, 0, 0, 0], &[0x07, 0, 0, 0], b"t", b"k"],
    run: write_log,
};

fn write_log_seeds() -> Vec<Vec<u8>> {
    let records = durable::sample_records();
    (0..OBJECTS.len() as u8).flat_map(|o| records.iter().map(move |r| picked(o, r))).collect()
}

fn write_log(data: &[u8]) -> bool {
    let Some((object, record)) = pick(data, OBJECTS.len() as u8) else { return false };
    let (table, key) = OBJECTS[usize::from(object)];
    let fast = durable::write_in(record, table, key);
    // A record whose steps decode, as a group that `decode_steps` accepts, is read in
    // place as it reads whole.
    if let Ok(slow) = durable::write_in_decoded(record, table, key) {
        assert_eq!(fast.as_ref().ok(), Some(&slow), "write_in disagrees with the decoded record ({fast:?})");
    }
    fast.is_ok_and(|w| w.is_some())
}

pub const CORE_RECORDS: Target = Target {
    name: "core_records",
    what: "the core's other records: transitions, table and book listings, and the views of objects, queues \
           and locks cached in aux data (durable table/, switch.rs, objects.rs, queues.rs, locks.rs)",
    seeds: core_records_seeds,
    dictionary: &[&[1], &[0, 0, 0, 0], &[1, 0, 0, 0], &[0xff; 8]],
    run: core_records,
};

/// A decoder of records that encodes what it read again.
type Decoder = fn(&[u8]) -> tally_durable::Result<Vec<u8>>;

const CORE_DECODERS: [Decoder; 6] = [
    durable::decode_transition,
    durable::decode_table_ref,
    durable::decode_book_listing,
    durable::decode_aux_view,
    durable::decode_queue_view,
    durable::decode_lock_view,
];

fn core_records_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for record in durable::sample_records() {
        for (i, decode) in CORE_DECODERS.iter().enumerate() {
            if decode(&record).is_ok() {
                seeds.push(picked(i as u8, &record));
            }
        }
    }
    seeds
}

fn core_records(data: &[u8]) -> bool {
    let Some((which, record)) = pick(data, CORE_DECODERS.len() as u8) else { return false };
    let decode = CORE_DECODERS[usize::from(which)];
    decode(record).is_ok_and(|again| {
        assert_eq!(decode(&again).as_ref().ok(), Some(&again), "a record encoded again reads the same");
        true
    })
}

pub const SCHEDULE_STATE: Target = Target {
    name: "schedule_state",
    what: "a schedule's stream record (its whole state and definition) as its driver reads it and plans the next \
           tick from it at a time (durable schedule/mod.rs)",
    seeds: schedule_state_seeds,
    dictionary: &[b"nightly", b"* * * * *", b"*/", b"-", b",", &[0xff; 8], &[0; 8]],
    run: schedule_state,
};

/// Times a plan is made at: the epoch, a minute, the sample states' day, the year
/// 10,000.
const NOWS: [u64; 4] = [0, 60_000, 1_795_683_600_000, NOW_MAX];

/// The latest time a plan is made at here: 10,000 years after the epoch. A plan passes
/// over up to `PASS_MAX` (100,000) ticks of a cron expression, each found by a search
/// of up to 8 years of days, so at the end of time a sparse expression (`0 0 29 2 *`)
/// takes seconds per plan in a debug build; no clock gets near, and the cron target
/// covers the end of time for one tick.
const NOW_MAX: u64 = 10_000 * 366 * 86_400_000;

fn schedule_state_seeds() -> Vec<Vec<u8>> {
    let states: Vec<Vec<u8>> = durable::sample_records()
        .into_iter()
        .filter(|r| durable::decode_schedule_state(durable::SAMPLE_SCHEDULE, r, 0).is_ok())
        .collect();
    assert!(!states.is_empty(), "the samples hold schedule states");
    NOWS.iter().flat_map(|now| states.iter().map(move |s| [&now.to_le_bytes()[..], s].concat())).collect()
}

fn schedule_state(data: &[u8]) -> bool {
    let (now, record) = take_u64(data);
    let now = now.min(NOW_MAX);
    durable::decode_schedule_state(durable::SAMPLE_SCHEDULE, record, now).is_ok_and(|again| {
        let back = durable::decode_schedule_state(durable::SAMPLE_SCHEDULE, &again, now);
        assert_eq!(back.as_ref().ok(), Some(&again), "a state encoded again reads the same");
        true
    })
}

pub const CRON: Target = Target {
    name: "cron",
    what: "cron expressions of schedule definitions, and the next time each names after any time, year ends, \
           leap days and the end of time included (durable cron.rs)",
    seeds: cron_seeds,
    dictionary: &[
        b"*",
        b"*/",
        b"/",
        b"-",
        b",",
        b" ",
        b"@yearly",
        b"@monthly",
        b"@weekly",
        b"@daily",
        b"@hourly",
        b"jan",
        b"feb",
        b"dec",
        b"sun",
        b"mon",
        b"sat",
        b"59",
        b"23",
        b"31",
        b"12",
        b"7",
        b"0",
    ],
    run: cron,
};

const MINUTE_MS: u64 = 60_000;

fn cron_seeds() -> Vec<Vec<u8>> {
    let exprs = [
        "* * * * *",
        "*/15 9-17 * * mon-fri",
        "5-10/2 0 1,15 * *",
        "50/5 * * * *",
        "0 0 29 2 *",
        "0 0 1 * mon",
        "0 12 * feb,MAR *",
        "@yearly",
        "@hourly",
        "0 0 30 2 *",
        "59 23 31 12 7",
    ];
    let at = 1_795_683_600_000u64;
    exprs.iter().map(|e| [&at.to_le_bytes()[..], e.as_bytes()].concat()).collect()
}

/// The end of 2026 and of 2099 (a century that is not a leap year follows), the day
/// before a leap day, and the last minutes of time.
const CRON_TIMES: [u64; 5] = [1_798_761_599_999, 4_102_444_740_000, 1_835_395_200_000 - 1, u64::MAX - MINUTE_MS, u64::MAX];

fn cron(data: &[u8]) -> bool {
    let (after, expr) = take_u64(data);
    let expr = text(expr);
    let Ok(first) = durable::cron_next(&expr, after) else { return false };
    for t in std::iter::once(after).chain(CRON_TIMES) {
        let next = durable::cron_next(&expr, t).expect("parsed once, parses again");
        let Some(next) = next else { continue };
        assert!(next > t && next.is_multiple_of(MINUTE_MS), "{expr:?} after {t}: {next}");
        // The time found is the first: from just before it, it is found again.
        assert_eq!(durable::cron_next(&expr, next - 1).expect("parses"), Some(next), "{expr:?} after {t}");
    }
    let _ = first;
    true
}

pub const STATE_ENTRIES: Target = Target {
    name: "state_entries",
    what: "the RocksDB state store's entries as reads take them back: version keys and values, latest entries \
           with their version, keys listed under a table (state rocks.rs)",
    seeds: state_entries_seeds,
    dictionary: &[&[0], &[1], &[0, 0, 0, 1], &[0xff, 0xff, 0xff, 0xff], b"t", b"k"],
    run: state_entries,
};

fn state_entries_seeds() -> Vec<Vec<u8>> {
    let values = [Some(Bytes::from_static(b"value")), Some(Bytes::new()), None];
    let mut seeds = Vec::new();
    for value in &values {
        let (key, entry) = state::version_entry("t", b"k", 7, value);
        seeds.push(picked(0, &join(&[&key, &entry])));
        let version = Version { cursor: u64::MAX, counter: 3 };
        let (key, entry) = state::latest("t", b"k", version, value);
        seeds.push(picked(1, &join(&[&key, &entry])));
    }
    let (key, _) = state::version_entry("t", b"", u64::MAX, &None);
    seeds.push(picked(2, &key));
    seeds
}

fn state_entries(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 3) else { return false };
    let [raw_key, raw] = fields(bytes);
    match which {
        0 => state::decode_version_entry("t", b"k", raw_key, raw).is_ok_and(|(version, value)| {
            if let Some(version) = version {
                assert_eq!(state::version_entry("t", b"k", version, &value), (raw_key.to_vec(), raw.to_vec()));
            }
            true
        }),
        1 => state::decode_latest_entry(raw).is_ok_and(|(version, value)| {
            assert_eq!(state::latest("t", b"k", version, &value).1, raw, "a latest entry written from what it read");
            true
        }),
        _ => match state::decode_listed_key("t", bytes) {
            Some(Ok(key)) => {
                // The key is what the entry's object key holds, whatever follows it.
                let (object, _) = state::version_entry("t", &key, 0, &None);
                assert!(bytes.starts_with(&object[..object.len() - 8]), "listed {key:?} from {bytes:?}");
                true
            }
            Some(Err(_)) | None => false,
        },
    }
}
