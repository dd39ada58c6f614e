//! What an execution reads from outside its step log, its clocks, its random bytes and
//! its book, made the same in every execution of one invocation: a re-execution that
//! branches on the time, on a random number or on what it read of the log takes the
//! branch the first execution took.
//!
//! Random bytes are derived, not logged: SHA-256 in counter mode over a seed keyed with
//! the cluster's secret, the book and the instance ID ([`crate::TagKey::random_seed`]), so every
//! execution of an invocation (re-executions, peers on other nodes) draws the same
//! stream, and no guest can predict another invocation's.
//!
//! The version of the function's settings an execution reads is a reading too, logged as
//! clocks are: a re-execution reads the values its first execution read, whatever was
//! set since.
//!
//! Clock readings are logged, in batches: the readings a guest takes between two steps
//! are kept here and logged as one `Clocks` step right before the next operation whose
//! effect or record could depend on them (a logged step, a log-free write, the result).
//!
//! ```text
//!   first execution:  read read read ─► Clocks{r1,r2,r3} at step k ─► put (step k+1) ...
//!   re-execution:     read read read ◄─ the Clocks record at step k, each clock in order
//! ```
//!
//! Rules (each has a test or a simulator check that fails without it):
//! - A reading given in live mode (no recorded step ahead) is logged before any later
//!   effect. If another execution logged other readings at that step first (a racing
//!   peer, or the history a lazy start found), this execution saw values the log does
//!   not hold: it stops before the effect and runs again, replaying them
//!   (`Abort::Superseded`). Live readings are always compared this way, whenever the
//!   record at their step appeared.
//! - In replay (recorded steps ahead), each clock gives the readings of the `Clocks`
//!   record at the current step, in order. A read past them gets that clock's last
//!   reading (time stands still), or the live value if the execution never read it;
//!   nothing read in replay is logged.
//! - Monotonic readings never go back, also when a re-execution on another node goes
//!   live after replaying: a live reading is at least the last one given. The host's
//!   monotonic clock counts from the Unix epoch, so that nodes roughly agree.
//! - At most [`READINGS_MAX`] readings are logged per step: past that, each new clock
//!   reading replaces the last one if that is a clock reading, so a loop that polls the
//!   clock still progresses, at the cost of the readings in between not being replayed
//!   exactly; further reads of the book are not logged (a re-execution reads them live).
//! - Reads of the guest's book are readings too (`Reading::Log`, the record a read
//!   returned, data included): a re-execution gets the same records in the same order
//!   without reading them again (they may have been trimmed since: a consumer that
//!   trims what it read, then crashes), so what a guest computes from the log (a
//!   position for a conditional append, say) is the same in every execution. Past the
//!   recorded ones, it reads live. At most [`READ_BYTES_MAX`] bytes of records are
//!   logged per step; reads past that are not logged either.
//!
//! A recorded `Clocks` step is this point's only if the execution read a clock there: a
//! log-free write may come before the readings logged at the same position (a simulator
//! finding). The host only supplies live values (`Attempt::wall_clock_ns`,
//! `monotonic_clock_ns`, `random_bytes`), so that the simulator drives this same code.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};

use crate::record::kind;
use crate::record::{ReadRecord, Reading, Step};

/// Readings logged in one `Clocks` step at most (a record of about 50 KiB).
pub const READINGS_MAX: usize = 4096;

/// Bytes of records read from the book logged in one step at most.
pub const READ_BYTES_MAX: usize = 512 << 10;

/// The largest random request a guest may make at once.
pub const RANDOM_BYTES_MAX: u64 = 1 << 20;

/// A guest's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestClock {
    Wall,
    Monotonic,
    /// Not a clock, but read as one: the version of the function's settings, read once
    /// per execution (the host keeps what it got).
    Settings,
}

/// The recorded readings of the step an execution is at, as far as it consumed them.
#[derive(Debug, Default)]
struct Segment {
    wall: VecDeque<u64>,
    monotonic: VecDeque<u64>,
    settings: VecDeque<u64>,
    log: VecDeque<Option<ReadRecord>>,
}

/// One execution's clocks and random bytes; the instance tells it where the execution
/// stands in its step log ([`Recorder::follow`]) and logs what it returns
/// ([`Recorder::take_fresh`]).
#[derive(Debug, Default)]
pub struct Recorder {
    /// The recorded readings of step `at`, if that step is a `Clocks` record.
    segment: Option<Segment>,
    /// The step the execution is at, and whether the step log holds it already.
    at: usize,
    replaying: bool,
    /// The guest read a clock since it got to step `at`.
    read_at: bool,
    /// Readings given in live mode and not logged yet.
    fresh: Vec<Reading>,
    /// Bytes of the records among them.
    fresh_bytes: usize,
    last_wall: Option<u64>,
    last_monotonic: Option<u64>,
    last_settings: Option<u64>,
    random: Option<Stream>,
}

impl Recorder {
    /// The execution is at step `at`; `recorded` is the step log's record there, if it
    /// has one (then the execution replays).
    pub fn follow(&mut self, at: usize, recorded: Option<&Step>) {
        self.replaying = recorded.is_some();
        if self.at != at {
            self.at = at;
            self.read_at = false;
            self.segment = None;
        }
        if self.segment.is_some() {
            // Partly consumed already.
            return;
        }
        self.segment = match recorded {
            Some(Step::Clocks(kind::Clocks { readings })) => {
                let mut s = Segment::default();
                for r in readings {
                    match r {
                        Reading::Wall(v) => s.wall.push_back(*v),
                        Reading::Monotonic(v) => s.monotonic.push_back(*v),
                        Reading::Settings(v) => s.settings.push_back(*v),
                        Reading::Log(v) => s.log.push_back(v.clone()),
                    }
                }
                Some(s)
            }
            _ => None,
        };
    }

    /// What the guest reads from `clock` when the clock itself says `live`.
    pub fn read(&mut self, clock: GuestClock, live: u64) -> u64 {
        self.read_at = true;
        let replayed = self.segment.as_mut().and_then(|s| match clock {
            GuestClock::Wall => s.wall.pop_front(),
            GuestClock::Monotonic => s.monotonic.pop_front(),
            GuestClock::Settings => s.settings.pop_front(),
        });
        let last = match clock {
            GuestClock::Wall => self.last_wall,
            GuestClock::Monotonic => self.last_monotonic,
            GuestClock::Settings => self.last_settings,
        };
        let value = match replayed {
            Some(v) => v,
            None if self.replaying => last.unwrap_or(live),
            None => {
                let v = match clock {
                    GuestClock::Wall | GuestClock::Settings => live,
                    GuestClock::Monotonic => last.map_or(live, |l| l.max(live)),
                };
                let reading = match clock {
                    GuestClock::Wall => Reading::Wall(v),
                    GuestClock::Monotonic => Reading::Monotonic(v),
                    GuestClock::Settings => Reading::Settings(v),
                };
                if self.fresh.len() < READINGS_MAX {
                    self.fresh.push(reading);
                } else if let Some(last @ (Reading::Wall(_) | Reading::Monotonic(_))) = self.fresh.last_mut() {
                    *last = reading;
                }
                v
            }
        };
        match clock {
            GuestClock::Wall => self.last_wall = Some(value),
            GuestClock::Monotonic => self.last_monotonic = Some(value),
            GuestClock::Settings => self.last_settings = Some(value),
        }
        value
    }

    /// A read of the guest's book: `Some(what it returned)` if the execution replays one
    /// recorded here, `None` if it reads live (and then tells [`Recorder::log_read`]
    /// what it got).
    pub fn replayed_log_read(&mut self) -> Option<Option<ReadRecord>> {
        self.read_at = true;
        self.segment.as_mut().and_then(|s| s.log.pop_front())
    }

    /// What a live read of the book returned, to log before the next effect (unless the
    /// execution replays, or the step's readings are full).
    pub fn log_read(&mut self, found: Option<ReadRecord>) {
        let bytes = found.as_ref().map_or(0, |r| r.data.len() + r.aux.as_ref().map_or(0, |a| a.len()) + 8 * r.tags.len());
        if self.replaying || self.fresh.len() >= READINGS_MAX || self.fresh_bytes + bytes > READ_BYTES_MAX {
            return;
        }
        self.fresh_bytes += bytes;
        self.fresh.push(Reading::Log(found));
    }

    /// Whether the guest read a clock (or its book) since it got to the step it is at. In replay, a
    /// `Clocks` record there is this point's only if it did: an operation that logs no
    /// step of its own (a log-free write) may come before the readings logged there.
    pub fn read_at_step(&self) -> bool {
        self.read_at
    }

    /// Whether there are live readings to log.
    pub fn has_fresh(&self) -> bool {
        !self.fresh.is_empty()
    }

    /// The live readings to log now.
    pub fn take_fresh(&mut self) -> Vec<Reading> {
        self.fresh_bytes = 0;
        std::mem::take(&mut self.fresh)
    }

    /// Forgets live readings that will not be logged (an execution that trapped).
    pub fn discard_fresh(&mut self) {
        self.fresh_bytes = 0;
        self.fresh.clear();
    }

    /// Fills `out` with the next bytes of the instance's random stream; `seed` gives the
    /// stream's seed the first time.
    pub fn random(&mut self, seed: impl FnOnce() -> [u8; 32], out: &mut [u8]) {
        self.random.get_or_insert_with(|| Stream::new(seed())).fill(out);
    }

    /// The instance's `wasi:random/insecure-seed`: fixed for the invocation, derived
    /// from the seed but apart from the stream.
    pub fn insecure_seed(seed: [u8; 32]) -> (u64, u64) {
        let d = Sha256::new().chain_update(b"insecure-seed").chain_update(seed).finalize();
        (u64::from_le_bytes(d[..8].try_into().expect("8 bytes")), u64::from_le_bytes(d[8..16].try_into().expect("8 bytes")))
    }
}

/// SHA-256 of (seed, block number), 32 bytes a block.
struct Stream {
    seed: [u8; 32],
    block: [u8; 32],
    next_block: u64,
    /// Bytes of `block` given out already.
    used: usize,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream {{ block {} }}", self.next_block)
    }
}

impl Stream {
    fn new(seed: [u8; 32]) -> Stream {
        Stream { seed, block: [0; 32], next_block: 0, used: 32 }
    }

    fn fill(&mut self, mut out: &mut [u8]) {
        while !out.is_empty() {
            if self.used == 32 {
                self.block = Sha256::new().chain_update(self.seed).chain_update(self.next_block.to_le_bytes()).finalize().into();
                self.next_block += 1;
                self.used = 0;
            }
            let n = out.len().min(32 - self.used);
            out[..n].copy_from_slice(&self.block[self.used..self.used + n]);
            self.used += n;
            out = &mut out[n..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GuestClock::{Monotonic, Wall};

    fn clocks(readings: &[Reading]) -> Step {
        Step::Clocks(kind::Clocks { readings: readings.to_vec() })
    }

    #[test]
    fn live_readings_are_kept_to_log_and_monotonic_ones_never_go_back() {
        let mut r = Recorder::default();
        r.follow(1, None);
        assert_eq!(r.read(Wall, 50), 50);
        assert_eq!(r.read(Monotonic, 100), 100);
        assert_eq!(r.read(Monotonic, 90), 100, "a monotonic clock never goes back");
        assert_eq!(r.read(Wall, 40), 40, "a wall clock may");
        assert_eq!(r.take_fresh(), [Reading::Wall(50), Reading::Monotonic(100), Reading::Monotonic(100), Reading::Wall(40)]);
        assert!(r.fresh.is_empty());
    }

    #[test]
    fn a_replay_gives_each_clock_its_recorded_readings_then_stands_still() {
        let mut r = Recorder::default();
        let recorded = clocks(&[Reading::Wall(7), Reading::Monotonic(70), Reading::Wall(8)]);
        r.follow(1, Some(&recorded));
        assert_eq!(r.read(Monotonic, 1), 70);
        assert_eq!(r.read(Wall, 1), 7);
        // Following the same step again keeps what was consumed.
        r.follow(1, Some(&recorded));
        assert_eq!(r.read(Wall, 1), 8);
        assert_eq!(r.read(Wall, 1), 8, "past the record, time stands still");
        assert_eq!(r.read(Monotonic, 1), 70);
        assert!(r.fresh.is_empty(), "nothing read in replay is logged");
        // A recorded step that is not a reading: a read there is an extra one.
        r.follow(2, Some(&clocks(&[])));
        r.follow(3, Some(&Step::Result(kind::Result { outcome: crate::Outcome::Ok(Default::default()) })));
        assert_eq!(r.read(Wall, 99), 8);
        assert!(r.fresh.is_empty());
        // Past the recorded history: live again, monotonic from the last reading on.
        r.follow(4, None);
        assert_eq!(r.read(Monotonic, 3), 70);
        assert_eq!(r.read(Monotonic, 90), 90);
        assert_eq!(r.take_fresh(), [Reading::Monotonic(70), Reading::Monotonic(90)]);
    }

    #[test]
    fn readings_past_the_limit_replace_the_last_one() {
        let mut r = Recorder::default();
        for i in 0..READINGS_MAX as u64 + 10 {
            r.read(Wall, i);
        }
        let fresh = r.take_fresh();
        assert_eq!(fresh.len(), READINGS_MAX);
        assert_eq!(fresh[READINGS_MAX - 2], Reading::Wall(READINGS_MAX as u64 - 2));
        assert_eq!(fresh[READINGS_MAX - 1], Reading::Wall(READINGS_MAX as u64 + 9));
    }

    #[test]
    fn the_settings_version_is_replayed_as_read_and_logged_like_a_clock() {
        use GuestClock::Settings;
        let mut r = Recorder::default();
        r.follow(1, None);
        assert_eq!(r.read(Settings, 7), 7);
        assert_eq!(r.take_fresh(), [Reading::Settings(7)]);
        // A re-execution reads version 7, whatever is current; past the record it keeps
        // to the last reading.
        let mut r = Recorder::default();
        r.follow(1, Some(&clocks(&[Reading::Wall(5), Reading::Settings(7)])));
        assert_eq!(r.read(Settings, 9), 7);
        assert_eq!(r.read(Settings, 9), 7);
        assert_eq!(r.read(Wall, 1), 5, "the clocks keep their own readings");
        assert!(r.fresh.is_empty());
    }

    fn rec(seqnum: u64, bytes: usize) -> Option<ReadRecord> {
        Some(ReadRecord { seqnum, tags: vec![], data: vec![7; bytes].into(), aux: None })
    }

    #[test]
    fn reads_of_the_book_are_replayed_in_order_then_live_and_never_replaced_by_clocks() {
        let mut r = Recorder::default();
        r.follow(1, Some(&clocks(&[Reading::Log(rec(5, 1)), Reading::Wall(7), Reading::Log(None)])));
        assert_eq!(r.replayed_log_read(), Some(rec(5, 1)));
        assert_eq!(r.read(Wall, 1), 7);
        assert_eq!(r.replayed_log_read(), Some(None));
        assert_eq!(r.replayed_log_read(), None, "past the record: live");
        r.log_read(rec(9, 1));
        assert!(r.fresh.is_empty(), "nothing read in replay is logged");
        r.follow(2, None);
        assert_eq!(r.replayed_log_read(), None);
        r.log_read(rec(9, 1));
        for i in 0..READINGS_MAX as u64 {
            r.read(Wall, i);
        }
        r.log_read(rec(10, 1));
        r.read(Wall, 1 << 40);
        let fresh = r.take_fresh();
        assert_eq!(fresh.len(), READINGS_MAX);
        assert_eq!(fresh[0], Reading::Log(rec(9, 1)));
        assert_eq!(fresh[READINGS_MAX - 1], Reading::Wall(1 << 40), "a clock reading replaces a clock reading");
        let mut full = Recorder::default();
        for _ in 0..READINGS_MAX {
            full.log_read(None);
        }
        full.read(Wall, 3);
        assert!(full.take_fresh().iter().all(|r| *r == Reading::Log(None)), "never a read of the book");
    }

    #[test]
    fn records_read_are_logged_up_to_a_byte_limit_per_step() {
        let mut r = Recorder::default();
        r.log_read(rec(1, READ_BYTES_MAX - 10));
        r.log_read(rec(2, 11));
        r.log_read(rec(3, 10));
        let fresh = r.take_fresh();
        assert_eq!(fresh, [Reading::Log(rec(1, READ_BYTES_MAX - 10)), Reading::Log(rec(3, 10))]);
        r.log_read(rec(4, READ_BYTES_MAX));
        assert_eq!(r.take_fresh().len(), 1, "the limit is per step");
    }

    #[test]
    fn the_random_stream_is_the_seeds_whatever_the_request_sizes() {
        let draw = |seed: u8, sizes: &[usize]| {
            let mut r = Recorder::default();
            let mut all = Vec::new();
            for &n in sizes {
                let mut buf = vec![0; n];
                r.random(|| [seed; 32], &mut buf);
                all.extend(buf);
            }
            all
        };
        let a = draw(1, &[1, 40, 0, 23]);
        assert_eq!(a, draw(1, &[64]));
        assert_ne!(a, draw(2, &[64]));
        assert_ne!(a[..32], a[32..], "blocks differ");
        assert_ne!(Recorder::insecure_seed([1; 32]), Recorder::insecure_seed([2; 32]));
    }
}
