//! [`JournalMetalogStore`]: a sequencer's metalog replica in append-only journal files.
//!
//! ```text
//!   dir/JOURNAL.LOCK                 flock'ed while the store is open
//!   dir/metalog-0000000001.journal   HEADER | frame | frame | ... | zeros (preallocated)
//!   dir/metalog-0000000002.journal   the next segment, once a frame did not fit
//!
//!   frame = len (u32 LE) | crc32 (u32 LE) of the rest | seq (u64 LE) | payload: len bytes of bincode(Vec<MetalogWrite>)
//! ```
//!
//! A [`MetalogStore::persist`] is one frame, written where the last one ended and made
//! durable with one `fdatasync`. Segments are preallocated (`fallocate`) and never grow
//! while frames are written into them, so the sync writes the data and no file size:
//! on this project's disks it takes ~115 µs where an append that grows a file, as
//! RocksDB's write-ahead log does, takes ~180 µs and a synced RocksDB write ~280 µs. A
//! sequencer syncs once per metalog batch, on the critical path of every append.
//!
//! Opening scans every frame (the metalog is also held in memory by its sequencer) and
//! keeps where every 64th entry of each metalog is (`MARK_EVERY`): a read of entries
//! that left the sequencer's memory scans frames forward from there. A frame is whole
//! or not there: its length and checksum say so, and its sequence number must follow
//! its predecessor's, so bytes left by a frame a crash tore never pass for a later one.
//! Only the last frame of the last segment can be torn (a persist returns only once its
//! frame is durable, and no frame is written before the previous one returned); the
//! scan stops there, and the tail
//! from there to the segment's end is zeroed before anything is written. A tear leaves
//! zeros after the length its frame's header names; a bad frame with data after that,
//! a bad frame in an earlier segment, or a checksummed frame that does not decode is
//! corruption and fails the open, rather than being cut off with the writes after it.
//! A restart reads the journal twice: the open scans every frame to place the marks,
//! and `load` replays every frame. After a failed write or sync the store refuses
//! every later persist: what reached the disk is unknown (a failed `fsync` may have
//! dropped the dirty pages), and the sequencer stops.
//!
//! Unsynced writes ([`MetalogStore::write_unsynced`], a `replicated` metalog's entries)
//! are frames written without the `fdatasync`; `sync` makes them durable, and so does
//! the next persist (a segment is synced before the next one is started). Before the
//! first, the store writes (durably) the machine's boot id into `dir/UNSYNCED`: an open
//! that finds another boot's id there knows a power loss may have taken any suffix of
//! the frames since the last sync, or left later pages of them without earlier ones
//! (the last segment's damaged tail is then cut off, not refused), and says so
//! ([`JournalMetalogStore::lost_unsynced`]). The id stays until the sequencer has
//! persisted what it lost (`MetalogWrite::Amnesiac`), so a crash before that finds it
//! again.
//!
//! A directory that holds a RocksDB metalog (what earlier versions wrote) is imported
//! once: its writes become the journal's first frame, then its files are removed.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tally_log_core::{Error, LogId, MetalogEntry, Result, Term};

use super::codec::{decode, encode};
use super::{MetalogStore, MetalogWrite, RocksMetalogStore};

pub(super) const HEADER: &[u8; 16] = b"tally-metalog-j1";
pub(super) const FRAME_HEADER: u64 = 16;
/// A segment's preallocated size, unless one frame needs more.
const SEGMENT_BYTES: u64 = 16 << 20;
/// Upper bound on one frame's payload: a batch of writes of one sequencer's inputs.
const FRAME_BYTES_MAX: u64 = 256 << 20;
/// Marks a frame's payload written since configuration versions (a varint never
/// begins with it); a payload without it holds `MetalogWriteV1`s.
const FRAME_V2: u8 = 0xff;

/// Every `MARK_EVERY`-th entry of a metalog keeps the place of the frame that wrote it
/// in memory; a read of entries scans frames forward from the mark at or before the
/// first. What the store holds in memory grows by 16 bytes per 64 entries, where a
/// place per entry grew by ~40 bytes an entry: at one client every append is an entry.
pub(super) const MARK_EVERY: u64 = 64;
/// Bytes a scan reads at once: a read of the most entries a message carries (256)
/// from 63 entries after a mark, at ~100-200 bytes a frame, in one or two.
const SCAN_CHUNK: usize = 64 << 10;

/// Where a frame starts: segment, byte offset.
type Place = (u64, u64);

#[derive(Default)]
pub(super) struct Metalog {
    /// Entries `0..len` are held (a metalog's entries are written in order).
    pub(super) len: u64,
    /// `marks[k]`: the frame that wrote entry `k * MARK_EVERY`, the first since any
    /// truncation below it, so every later entry up to the next mark is in a frame at
    /// or after it.
    pub(super) marks: Vec<Place>,
    /// The frame of the last truncation that dropped entries: a scan trusts what it
    /// found only once it has read past it (entries written before it may be gone).
    truncated: Option<Place>,
    sealed: bool,
    led: bool,
}

struct Journal {
    /// The segment frames are written to, its number, where the next frame goes and
    /// its preallocated size.
    file: File,
    segment: u64,
    end: u64,
    capacity: u64,
    next_seq: u64,
    metalogs: BTreeMap<(Term, LogId), Metalog>,
    /// Set by a failed write or sync: every later persist fails with it.
    failed: Option<String>,
    /// Frames were written since the last sync.
    unsynced: bool,
    /// `UNSYNCED` holds this boot's id.
    marked: bool,
    /// An `Amnesiac` write was persisted since the store opened.
    amnesia_written: bool,
}

/// A [`MetalogStore`] in journal files. See the module documentation for the layout.
pub struct JournalMetalogStore {
    dir: PathBuf,
    segment_bytes: u64,
    journal: Mutex<Journal>,
    /// The machine's boot id (`UNSYNCED`).
    boot: String,
    /// Unsynced writes of an earlier boot may have been lost.
    lost: bool,
    /// Holds the directory's flock while the store is open.
    _lock: File,
}

/// This boot of the machine: `/proc/sys/kernel/random/boot_id` changes at every boot,
/// and so after a power loss, not after a crash of the process.
fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id").map_or_else(|_| "unknown".to_owned(), |b| b.trim().to_owned())
}

pub(super) fn io_error<'a>(doing: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| Error::Storage(format!("{doing} {}: {e}", path.display()))
}

fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("metalog-{segment:010}.journal"))
}

/// The numbers of the segments in `dir`, in order.
fn segments(dir: &Path) -> Result<Vec<u64>> {
    segment_numbers(dir, "metalog-")
}

/// The numbers of the files `<prefix><number>.journal` in `dir`, in order.
pub(super) fn segment_numbers(dir: &Path, prefix: &str) -> Result<Vec<u64>> {
    let mut found = Vec::new();
    for item in fs::read_dir(dir).map_err(io_error("listing", dir))? {
        let name = item.map_err(io_error("listing", dir))?.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix(prefix).and_then(|n| n.strip_suffix(".journal")) {
            found.push(n.parse::<u64>().map_err(|_| Error::Storage(format!("unexpected file {name} in {}", dir.display())))?);
        }
    }
    found.sort_unstable();
    Ok(found)
}

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("syncing", dir))
}

/// Reserves `len` bytes of `file` as allocated, zero-filled space, so that writing
/// into it later changes no file size.
pub(super) fn preallocate(file: &File, len: u64, path: &Path) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd as _;
        // SAFETY: fallocate reads no memory of ours; the descriptor is open and owned by `file`.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(io_error("preallocating", path)(e));
        }
    }
    // Without fallocate the file is sparse: correct, only slower to sync.
    file.set_len(len).map_err(io_error("sizing", path))
}

/// Creates segment `segment` of at least `bytes`, durable and empty.
fn create_segment(dir: &Path, segment: u64, bytes: u64) -> Result<File> {
    create_segment_file(dir, &segment_path(dir, segment), bytes, HEADER)
}

/// Creates the segment file `path` in `dir`: `bytes` preallocated, durable, holding
/// only `header`. Both journals' segments start so.
pub(super) fn create_segment_file(dir: &Path, path: &Path, bytes: u64, header: &[u8]) -> Result<File> {
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(io_error("creating", path))?;
    preallocate(&file, bytes, path)?;
    file.write_all_at(header, 0).map_err(io_error("writing", path))?;
    file.sync_all().map_err(io_error("syncing", path))?;
    sync_dir(dir)?;
    Ok(file)
}

fn frame_crc(rest: &[u8]) -> u32 {
    crc32fast::hash(rest)
}

/// Fills in the header of `frame` (`FRAME_HEADER` bytes, then the payload): the
/// payload's length, the checksum and sequence number `seq`.
pub(super) fn seal_frame(frame: &mut [u8], seq: u64) {
    let payload = (frame.len() as u64 - FRAME_HEADER) as u32;
    frame[0..4].copy_from_slice(&payload.to_le_bytes());
    frame[8..16].copy_from_slice(&seq.to_le_bytes());
    let crc = frame_crc(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The whole frame at `offset` of `bytes` with sequence number `seq` and a payload of
/// at most `max` bytes: its payload and its length. `None` when none is there (zeros,
/// a frame a crash tore, bytes of an older frame).
pub(super) fn whole_frame(bytes: &[u8], offset: u64, seq: u64, max: u64) -> Option<(&[u8], u64)> {
    let (len, crc, found_seq) = frame_header(bytes, offset)?;
    if len == 0 || len > max || found_seq != seq {
        return None;
    }
    let at = offset as usize;
    let body = bytes.get(at + 8..at + FRAME_HEADER as usize + len as usize)?;
    (frame_crc(body) == crc).then(|| (&body[8..], FRAME_HEADER + len))
}

/// The frame at `offset` of `bytes` if a whole one with sequence number `seq` is there:
/// its writes and its length. `Ok(None)` when none is: zeros, or a frame a crash tore.
/// A whole frame (its checksum holds) that does not decode is corruption, not a tear.
fn parse_frame(bytes: &[u8], offset: u64, seq: u64) -> Result<Option<(Vec<MetalogWrite>, u64)>> {
    let Some((payload, len)) = whole_frame(bytes, offset, seq, FRAME_BYTES_MAX) else { return Ok(None) };
    let writes = match payload.split_first() {
        Some((&FRAME_V2, rest)) => decode("metalog frame", rest, FRAME_BYTES_MAX)?,
        // Before configuration versions: no mark (a bincode length never starts so).
        _ => decode::<Vec<tally_log_core::MetalogWriteV1>>("metalog frame", payload, FRAME_BYTES_MAX)?
            .into_iter()
            .map(MetalogWrite::from)
            .collect(),
    };
    Ok(Some((writes, len)))
}

/// The length, checksum and sequence number in the frame header at `offset`.
pub(super) fn frame_header(bytes: &[u8], offset: u64) -> Option<(u64, u32, u64)> {
    let at = usize::try_from(offset).ok()?;
    let head = bytes.get(at..at.checked_add(FRAME_HEADER as usize)?)?;
    let len = u64::from(u32::from_le_bytes(head[0..4].try_into().ok()?));
    let crc = u32::from_le_bytes(head[4..8].try_into().ok()?);
    Some((len, crc, u64::from_le_bytes(head[8..16].try_into().ok()?)))
}

/// Whether the bytes from `end` on (the last segment, after its last whole frame) are
/// what a crash leaves: nothing, or one frame torn while written, with zeros after the
/// length its header names. Anything else (a frame damaged with frames after it) is
/// corruption, which must not be cut off as a torn tail.
fn torn_tail(bytes: &[u8], end: u64) -> bool {
    let rest = &bytes[end as usize..];
    match frame_header(bytes, end) {
        // The header's sector was never written: the frame's later sectors may have been.
        Some((0, _, _)) | None => true,
        Some((len, _, _)) if len <= FRAME_BYTES_MAX => {
            rest.get((FRAME_HEADER + len) as usize..).is_none_or(|after| after.iter().all(|b| *b == 0))
        }
        Some(_) => rest.iter().all(|b| *b == 0),
    }
}

/// Checks that `writes` continue each metalog's entries in order (an entry's index is
/// at most the number held before it: the next one, or one held again).
fn check_order(metalogs: &BTreeMap<(Term, LogId), Metalog>, writes: &[MetalogWrite]) -> std::result::Result<(), String> {
    let mut lens: BTreeMap<(Term, LogId), u64> = BTreeMap::new();
    for write in writes {
        let (key, len) = match write {
            MetalogWrite::Entry(e) => ((e.term, e.log), None),
            MetalogWrite::Truncate { term, log, len } => ((*term, *log), Some(*len)),
            _ => continue,
        };
        let held = lens.entry(key).or_insert_with(|| metalogs.get(&key).map_or(0, |m| m.len));
        match (write, len) {
            (MetalogWrite::Entry(e), _) if e.index > *held => {
                return Err(format!("entry {} of {:?} {:?} after {held} entries", e.index, key.0, key.1));
            }
            (MetalogWrite::Entry(e), _) => *held = (*held).max(e.index + 1),
            (_, Some(len)) => *held = (*held).min(len),
            _ => {}
        }
    }
    Ok(())
}

/// Applies `writes`, the frame at `place` (checked by [`check_order`]), to the index.
fn apply(metalogs: &mut BTreeMap<(Term, LogId), Metalog>, place: Place, writes: &[MetalogWrite]) {
    for write in writes {
        match write {
            MetalogWrite::Entry(entry) => {
                let metalog = metalogs.entry((entry.term, entry.log)).or_default();
                // An entry held again keeps its first place: the entries after it may
                // be in frames between the two.
                if entry.index == metalog.len {
                    if entry.index % MARK_EVERY == 0 {
                        metalog.marks.push(place);
                    }
                    metalog.len += 1;
                }
            }
            MetalogWrite::Truncate { term, log, len } => {
                if let Some(metalog) = metalogs.get_mut(&(*term, *log)).filter(|m| *len < m.len) {
                    metalog.len = *len;
                    metalog.marks.truncate(len.div_ceil(MARK_EVERY) as usize);
                    metalog.truncated = Some(place);
                }
            }
            MetalogWrite::Seal { term, log } => metalogs.entry((*term, *log)).or_default().sealed = true,
            MetalogWrite::Lead { term, log } => metalogs.entry((*term, *log)).or_default().led = true,
            MetalogWrite::Amnesiac { .. } => {}
        }
    }
}

/// Reads the frames of segment `segment` (its header checked), the first numbered
/// `next_seq`, into `metalogs`, and checks that what follows them is zeros, or in the
/// last segment a torn frame; returns where the frames end, with `next_seq` the next
/// frame's. `Err` says where the journal is corrupt.
pub(super) fn scan_segment(
    bytes: &[u8],
    segment: u64,
    is_last: bool,
    lost: bool,
    next_seq: &mut u64,
    metalogs: &mut BTreeMap<(Term, LogId), Metalog>,
) -> std::result::Result<u64, String> {
    let mut offset = HEADER.len() as u64;
    while let Some((writes, len)) =
        parse_frame(bytes, offset, *next_seq).map_err(|e| format!("corrupt frame at byte {offset}: {e}"))?
    {
        check_order(metalogs, &writes).map_err(|e| format!("corrupt frame at byte {offset}: {e}"))?;
        apply(metalogs, (segment, offset), &writes);
        offset += len;
        *next_seq += 1;
    }
    let damaged = match is_last {
        // Pages of unsynced frames were lost, and later ones may have been written back.
        true => !lost && !torn_tail(bytes, offset),
        false => bytes[offset as usize..].iter().any(|b| *b != 0),
    };
    if damaged {
        return Err(format!("corrupt frame at byte {offset}"));
    }
    Ok(offset)
}

/// Reads the frames of a journal in order, from a place up to the end the journal had
/// when the scan began (frames before it are whole: a persist writes under the lock).
struct Scan<'a> {
    dir: &'a Path,
    place: Place,
    end: Place,
    file: Option<(u64, File)>,
    /// Bytes of segment `buf_at.0` from offset `buf_at.1` on.
    buf: Vec<u8>,
    buf_at: Place,
}

impl<'a> Scan<'a> {
    fn new(dir: &'a Path, from: Place, end: Place) -> Scan<'a> {
        Scan { dir, place: from, end, file: None, buf: Vec::new(), buf_at: (0, 0) }
    }

    /// The next frame: its place and writes.
    fn next(&mut self) -> Result<Option<(Place, Vec<MetalogWrite>)>> {
        while self.place < self.end {
            if let Some((writes, len)) = self.frame()? {
                let at = self.place;
                self.place.1 += len;
                return Ok(Some((at, writes)));
            }
            // Zeros: this segment's frames ended, the next segment's follow.
            let path = segment_path(self.dir, self.place.0);
            if self.place.0 >= self.end.0 {
                return Err(Error::Storage(format!("no frame at byte {} of {}", self.place.1, path.display())));
            }
            self.place = (self.place.0 + 1, HEADER.len() as u64);
        }
        Ok(None)
    }

    /// The frame at `place`, if one is there, and its length.
    fn frame(&mut self) -> Result<Option<(Vec<MetalogWrite>, u64)>> {
        let Some(head) = self.bytes(FRAME_HEADER)? else { return Ok(None) };
        let (len, _, seq) = frame_header(head, 0).expect("a whole header");
        if len == 0 {
            return Ok(None);
        }
        let path = segment_path(self.dir, self.place.0);
        let offset = self.place.1;
        let corrupt = |e: String| Error::Storage(format!("corrupt frame at byte {offset} of {}: {e}", path.display()));
        let bytes = self.bytes(FRAME_HEADER + len)?.ok_or_else(|| corrupt("cut short".into()))?;
        match parse_frame(bytes, 0, seq).map_err(|e| corrupt(e.to_string()))? {
            Some(frame) => Ok(Some(frame)),
            None => Err(corrupt("checksum".into())),
        }
    }

    /// `len` bytes from `place`, or `None` past the segment's end.
    fn bytes(&mut self, len: u64) -> Result<Option<&[u8]>> {
        let (segment, offset) = self.place;
        let covered =
            self.buf_at.0 == segment && offset >= self.buf_at.1 && offset + len <= self.buf_at.1 + self.buf.len() as u64;
        if !covered {
            let path = segment_path(self.dir, segment);
            let file = match &mut self.file {
                Some((s, file)) if *s == segment => file,
                slot => &slot.insert((segment, File::open(&path).map_err(io_error("opening", &path))?)).1,
            };
            self.buf.resize(SCAN_CHUNK.max(len as usize), 0);
            let mut filled = 0;
            while filled < self.buf.len() {
                match file.read_at(&mut self.buf[filled..], offset + filled as u64) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io_error("reading", &path)(e)),
                }
            }
            self.buf.truncate(filled);
            self.buf_at = (segment, offset);
        }
        let at = (offset - self.buf_at.1) as usize;
        Ok(self.buf.get(at..at + len as usize))
    }
}

impl JournalMetalogStore {
    /// Opens (creating if needed) the store in `dir`, importing a RocksDB metalog found
    /// there.
    pub fn open(dir: &Path) -> Result<JournalMetalogStore> {
        Self::open_with(dir, SEGMENT_BYTES)
    }

    /// [`Self::open`] with segments of `segment_bytes` (tests use small ones).
    pub fn open_with(dir: &Path, segment_bytes: u64) -> Result<JournalMetalogStore> {
        fs::create_dir_all(dir).map_err(io_error("creating", dir))?;
        let lock_path = dir.join("JOURNAL.LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error("opening", &lock_path))?;
        {
            use std::os::fd::AsRawFd as _;
            // SAFETY: flock reads no memory of ours; the descriptor is open and owned by `lock`.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(io_error("locking", &lock_path)(io::Error::last_os_error()));
            }
        }
        let boot = boot_id();
        let marker = dir.join("UNSYNCED");
        let lost = fs::read_to_string(&marker).is_ok_and(|m| m.trim() != boot);
        if lost {
            tracing::warn!(path = %dir.display(), "metalog journal: written unsynced before a power loss");
        }
        let numbers = segments(dir)?;
        let mut metalogs = BTreeMap::new();
        let mut next_seq = 1;
        let mut last = None;
        for (i, &segment) in numbers.iter().enumerate() {
            let path = segment_path(dir, segment);
            let bytes = fs::read(&path).map_err(io_error("reading", &path))?;
            let is_last = i + 1 == numbers.len();
            if bytes.get(..HEADER.len()) != Some(HEADER.as_slice()) {
                // A crash while the last segment was created leaves it without its header.
                if is_last && bytes.iter().all(|b| *b == 0) {
                    fs::remove_file(&path).map_err(io_error("removing", &path))?;
                    sync_dir(dir)?;
                    break;
                }
                return Err(Error::Storage(format!("{} is not a tally metalog journal", path.display())));
            }
            let offset = scan_segment(&bytes, segment, is_last, lost, &mut next_seq, &mut metalogs)
                .map_err(|e| Error::Storage(format!("{}: {e}", path.display())))?;
            if is_last {
                last = Some((segment, offset, bytes.len() as u64, bytes[offset as usize..].iter().any(|b| *b != 0)));
            }
        }
        let (file, segment, end, capacity) = match last {
            Some((segment, end, capacity, torn)) => {
                let path = segment_path(dir, segment);
                let file = OpenOptions::new().read(true).write(true).open(&path).map_err(io_error("opening", &path))?;
                if torn {
                    tracing::warn!(path = %path.display(), offset = end, "metalog journal: dropped a torn last frame");
                    file.write_all_at(&vec![0; (capacity - end) as usize], end).map_err(io_error("zeroing", &path))?;
                    file.sync_data().map_err(io_error("syncing", &path))?;
                }
                (file, segment, end, capacity)
            }
            None => (create_segment(dir, 1, segment_bytes)?, 1, HEADER.len() as u64, segment_bytes),
        };
        let journal = Journal {
            file,
            segment,
            end,
            capacity,
            next_seq,
            metalogs,
            failed: None,
            unsynced: false,
            marked: false,
            amnesia_written: false,
        };
        let store =
            JournalMetalogStore { dir: dir.to_owned(), segment_bytes, journal: Mutex::new(journal), boot, lost, _lock: lock };
        if dir.join("CURRENT").exists() {
            store.import_rocks()?;
        }
        tracing::info!(path = %dir.display(), "opened metalog journal");
        Ok(store)
    }

    /// Moves a RocksDB metalog in the directory into the journal (one frame), then
    /// removes its files. A crash in between imports it again over the same writes,
    /// which replay to the same state.
    fn import_rocks(&self) -> Result<()> {
        let writes = RocksMetalogStore::open(&self.dir)?.load()?;
        let count = writes.len();
        if !writes.is_empty() {
            self.persist(&writes)?;
        }
        rocksdb::DB::destroy(&rocksdb::Options::default(), &self.dir)
            .map_err(|e| Error::Storage(format!("removing the imported RocksDB metalog: {e}")))?;
        tracing::info!(path = %self.dir.display(), writes = count, "imported a RocksDB metalog into the journal");
        Ok(())
    }

    /// The segment frames go to and where the next one starts.
    #[cfg(test)]
    pub(super) fn position(&self) -> (PathBuf, u64) {
        let journal = self.lock();
        (segment_path(&self.dir, journal.segment), journal.end)
    }

    /// The places the store holds in memory, over all its metalogs.
    #[cfg(test)]
    pub(super) fn marks_held(&self) -> usize {
        self.lock().metalogs.values().map(|m| m.marks.len()).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl JournalMetalogStore {
    /// Whether writes made without a sync before this open may have been lost (the
    /// machine booted since): the sequencer must be told
    /// (`Sequencer::lost_unsynced_writes`).
    pub fn lost_unsynced(&self) -> bool {
        self.lost
    }

    /// Writes `writes` as one frame, synced or not.
    fn write_frame(&self, writes: &[MetalogWrite], sync: bool) -> Result<()> {
        let mut journal = self.lock();
        if let Some(failed) = &journal.failed {
            return Err(Error::Storage(format!("the metalog journal failed earlier: {failed}")));
        }
        check_order(&journal.metalogs, writes)
            .map_err(|e| Error::Storage(format!("refused a metalog write out of order: {e}")))?;
        let payload = encode("metalog frame", &writes, FRAME_BYTES_MAX, &[FRAME_V2])?;
        let mut frame = Vec::with_capacity(FRAME_HEADER as usize + payload.len());
        frame.resize(FRAME_HEADER as usize, 0);
        frame.extend_from_slice(&payload);
        seal_frame(&mut frame, journal.next_seq);
        let len = frame.len() as u64;
        let result = (|| {
            if !sync && !journal.marked && (!self.lost || journal.amnesia_written) {
                let marker = self.dir.join("UNSYNCED");
                fs::write(&marker, &self.boot).map_err(io_error("writing", &marker))?;
                File::open(&marker).and_then(|f| f.sync_all()).map_err(io_error("syncing", &marker))?;
                sync_dir(&self.dir)?;
                journal.marked = true;
            }
            if journal.end + len > journal.capacity {
                if journal.unsynced {
                    // Frames are lost only from the last segment.
                    let path = segment_path(&self.dir, journal.segment);
                    journal.file.sync_data().map_err(io_error("syncing", &path))?;
                    journal.unsynced = false;
                }
                let segment = journal.segment + 1;
                let capacity = self.segment_bytes.max(HEADER.len() as u64 + len);
                journal.file = create_segment(&self.dir, segment, capacity)?;
                (journal.segment, journal.end, journal.capacity) = (segment, HEADER.len() as u64, capacity);
            }
            let path = segment_path(&self.dir, journal.segment);
            journal.file.write_all_at(&frame, journal.end).map_err(io_error("writing", &path))?;
            match sync {
                true => journal.file.sync_data().map_err(io_error("syncing", &path)),
                false => Ok(()),
            }
        })();
        if let Err(e) = result {
            journal.failed = Some(e.to_string());
            return Err(e);
        }
        let (segment, offset) = (journal.segment, journal.end);
        journal.end += len;
        journal.next_seq += 1;
        journal.unsynced = !sync;
        journal.amnesia_written |= writes.iter().any(|w| matches!(w, MetalogWrite::Amnesiac { .. }));
        apply(&mut journal.metalogs, (segment, offset), writes);
        Ok(())
    }
}

impl MetalogStore for JournalMetalogStore {
    fn persist(&self, writes: &[MetalogWrite]) -> Result<()> {
        self.write_frame(writes, true)
    }

    fn write_unsynced(&self, writes: &[MetalogWrite]) -> Result<()> {
        self.write_frame(writes, false)
    }

    fn sync(&self) -> Result<()> {
        // Outside the lock, so that writes go on meanwhile: on a second handle of the
        // segment, which a later write or segment leaves unsynced again.
        let (file, path, seq) = {
            let journal = self.lock();
            if !journal.unsynced || journal.failed.is_some() {
                return Ok(());
            }
            let path = segment_path(&self.dir, journal.segment);
            (journal.file.try_clone().map_err(io_error("opening", &path))?, path, journal.next_seq)
        };
        let synced = file.sync_data().map_err(io_error("syncing", &path));
        let mut journal = self.lock();
        match synced {
            Err(e) => {
                journal.failed = Some(e.to_string());
                Err(e)
            }
            Ok(()) => {
                journal.unsynced &= journal.next_seq != seq;
                Ok(())
            }
        }
    }

    fn load(&self) -> Result<Vec<MetalogWrite>> {
        // Every frame, in order, replayed: what a restart needs is every entry.
        let (first, end, marks) = {
            let journal = self.lock();
            let marks: Vec<((Term, LogId), bool, bool)> =
                journal.metalogs.iter().map(|(key, m)| (*key, m.sealed, m.led)).collect();
            (segments(&self.dir)?.first().copied().unwrap_or(journal.segment), (journal.segment, journal.end), marks)
        };
        let mut entries: BTreeMap<(Term, LogId), Vec<MetalogEntry>> = BTreeMap::new();
        let mut scan = Scan::new(&self.dir, (first, HEADER.len() as u64), end);
        let mut amnesiac = None;
        while let Some((_, writes)) = scan.next()? {
            for write in writes {
                match write {
                    MetalogWrite::Entry(e) => {
                        let held = entries.entry((e.term, e.log)).or_default();
                        match held.get_mut(e.index as usize) {
                            Some(slot) => *slot = e,
                            None => held.push(e), // the next one: frames were checked in order
                        }
                    }
                    MetalogWrite::Truncate { term, log, len } => {
                        if let Some(held) = entries.get_mut(&(term, log)) {
                            held.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                        }
                    }
                    MetalogWrite::Seal { .. } | MetalogWrite::Lead { .. } => {}
                    MetalogWrite::Amnesiac { through } => amnesiac = amnesiac.max(Some(through)),
                }
            }
        }
        let mut writes = Vec::with_capacity(entries.values().map(Vec::len).sum::<usize>() + marks.len());
        for (key, sealed, led) in marks {
            writes.extend(entries.remove(&key).unwrap_or_default().into_iter().map(MetalogWrite::Entry));
            if sealed {
                writes.push(MetalogWrite::Seal { term: key.0, log: key.1 });
            }
            if led {
                writes.push(MetalogWrite::Lead { term: key.0, log: key.1 });
            }
        }
        writes.extend(amnesiac.map(|through| MetalogWrite::Amnesiac { through }));
        Ok(writes)
    }

    fn read_entries(&self, term: Term, log: LogId, from: u64, to: u64) -> Result<Vec<MetalogEntry>> {
        let (start, truncated, to, end) = {
            let journal = self.lock();
            let Some(metalog) = journal.metalogs.get(&(term, log)) else { return Ok(Vec::new()) };
            let to = to.min(metalog.len);
            if from >= to {
                return Ok(Vec::new());
            }
            (metalog.marks[(from / MARK_EVERY) as usize], metalog.truncated, to, (journal.segment, journal.end))
        };
        let mut found: Vec<Option<MetalogEntry>> = vec![None; (to - from) as usize];
        let mut missing = found.len();
        let mut scan = Scan::new(&self.dir, start, end);
        while let Some((place, writes)) = scan.next()? {
            if missing == 0 && truncated.is_none_or(|t| place > t) {
                break;
            }
            for write in writes {
                match write {
                    MetalogWrite::Entry(e) if (e.term, e.log) == (term, log) && (from..to).contains(&e.index) => {
                        let slot = &mut found[(e.index - from) as usize];
                        missing -= usize::from(slot.is_none());
                        *slot = Some(e);
                    }
                    MetalogWrite::Truncate { term: t, log: l, len } if (t, l) == (term, log) => {
                        for slot in found.iter_mut().skip(len.saturating_sub(from) as usize) {
                            missing += usize::from(slot.take().is_some());
                        }
                    }
                    _ => {}
                }
            }
        }
        if missing > 0 {
            let first = found.iter().position(Option::is_none).map_or(to, |i| from + i as u64);
            return Err(Error::Storage(format!("the metalog journal lost entry {first} of {term:?} {log:?}")));
        }
        Ok(found.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use tally_log_core::{MetalogEntryV1, MetalogWriteV1};

    use super::*;

    fn frame(payload: Vec<u8>, seq: u64) -> Vec<u8> {
        let mut frame = vec![0; FRAME_HEADER as usize];
        frame.extend_from_slice(&payload);
        seal_frame(&mut frame, seq);
        frame
    }

    #[test]
    fn frames_from_before_configuration_versions_read_as_they_were() -> Result<()> {
        let entry = MetalogEntry {
            term: Term(2),
            log: LogId(1),
            index: 3,
            start_position: 7,
            prev_cut: vec![1, 0],
            cut: vec![4, 2],
            trims: vec![],
            version: 0,
        };
        let seal = (Term(2), LogId(1));
        let old = vec![MetalogWriteV1::Entry(MetalogEntryV1::from(&entry)), MetalogWriteV1::Seal { term: seal.0, log: seal.1 }];
        let bytes = frame(encode("frame", &old, FRAME_BYTES_MAX, &[])?, 5);
        let (writes, len) = parse_frame(&bytes, 0, 5)?.expect("a whole frame");
        assert_eq!(len, bytes.len() as u64);
        let expect = vec![MetalogWrite::Entry(entry.clone()), MetalogWrite::Seal { term: seal.0, log: seal.1 }];
        assert_eq!(writes, expect);
        // Today's frames carry versions.
        let new = vec![MetalogWrite::Entry(MetalogEntry { version: 9, ..entry })];
        let bytes = frame(encode("frame", &new, FRAME_BYTES_MAX, &[FRAME_V2])?, 6);
        assert_eq!(parse_frame(&bytes, 0, 6)?.expect("a whole frame").0, new);
        Ok(())
    }
}
