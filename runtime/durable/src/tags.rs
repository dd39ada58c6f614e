//! Every platform book and platform tag comes from here, so that no two platform streams
//! share a tag and no user input can name one.
//!
//! Derived tags name step logs, write logs, transition logs, migration claims, the
//! libraries' streams and their checkpoints, a promise's stream and its waiters, a root's
//! cancel stream, an instance's retry stream and a schedule's stream. A node remembers the
//! object tags it derived lately (`memo.rs`), since a SHA-256 costs as much as a whole
//! read-optimized read on a CPU without SHA extensions. An instance derives its two marks
//! from its step tag at its first append; a user client strips marks from every record it
//! returns.
//!
//! ```text
//!   books   shadow(b) = b | 2^63      user book b's exactly-once records (step logs,
//!                                     write logs, transition logs, instances stream)
//!           PLATFORM_BOOK             the registry and the platform-wide lists
//!
//!   tags    1 0 000..000 n (n < 2^32) fixed streams: MANIFESTS, BOOKS, SWITCHES, TABLES,
//!                                     INSTANCES, TAG_KEY, APPENDED, SCHEDULES,
//!                                     LIBRARIES
//!           1 1 h (62 bits)           derived streams: h = SHA-256 keyed with the
//!                                     cluster's secret, over a domain and the length-
//!                                     prefixed parts (instance ID, table, key, ...)
//!           1 0 1 h (61 bits)         marks (`Tag::is_mark`), derived the same way:
//!                                     an instance's appends to its user book (two
//!                                     per instance: plain and conditional appends)
//! ```
//!
//! Isolation rules (ARCHITECTURE.md):
//! - A user client refuses every book with the top bit set, so no user read, trim or
//!   aux-data call reaches a shadow book: a user's `trim(0, s)` on book b trims b only.
//! - Fixed and derived tags differ in bit 62, so a derived tag is never a fixed stream.
//! - Derived tags are keyed with a secret the cluster draws once and keeps in
//!   PLATFORM_BOOK (its first TAG_KEY record): without it, a caller cannot search for
//!   keys or IDs whose tags collide, short of trying 2^31 of them through the API.
//!   Readers still check that each record names what they look for, and garbage
//!   collection trims a write log only up to the first record of another object.
//!
//! PLATFORM_BOOK is also book 1's shadow (it has been the registry's book since before
//! shadow books): the registry uses only fixed tags and untagged records, the exactly-
//! once layer only derived tags and INSTANCES, and nothing trims tag 0 of a platform
//! book, so the two never meet.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tally_log_core::{BookId, Tag};

use crate::id::InstanceId;
use crate::memo::Memo;
use crate::record::kind;
use crate::record::Step;

/// The platform book of the registry and the platform-wide lists.
pub const PLATFORM_BOOK: BookId = BookId(BookId::RESERVED_BIT | 1);

/// Registry manifests (deploy, delete), in [`PLATFORM_BOOK`].
pub const MANIFESTS: Tag = fixed(1);
/// Books with exactly-once invocations, in [`PLATFORM_BOOK`]: the recovery scan reads each.
pub const BOOKS: Tag = fixed(2);
/// Switches started by any node, `(book, table)` each, in [`PLATFORM_BOOK`].
pub const SWITCHES: Tag = fixed(3);
/// Tables with a transition log, `(book, table)` each, in [`PLATFORM_BOOK`].
pub const TABLES: Tag = fixed(4);
/// Every Init and Result record of a book, in its shadow book.
pub const INSTANCES: Tag = fixed(5);
/// The cluster's tag key: the first record wins, in [`PLATFORM_BOOK`].
pub const TAG_KEY: Tag = fixed(6);
/// The Result records (also in INSTANCES) of instances that appended to their user
/// book: garbage collection retires their marks when it collects their step logs.
pub const APPENDED: Tag = fixed(7);
/// Definitions and deletions of schedules (their whole state), in [`PLATFORM_BOOK`]:
/// every node learns the names from it.
pub const SCHEDULES: Tag = fixed(8);
/// Every record of an object's, a queue shard's or a lock's stream, in its book's
/// shadow: garbage collection walks it to learn which streams changed (`gc.rs`).
pub const LIBRARIES: Tag = fixed(9);
/// The compactions of SCHEDULES, in [`PLATFORM_BOOK`]: each says below which seqnum
/// SCHEDULES was trimmed, once every live schedule was listed again above it.
pub const SCHEDULES_COMPACTED: Tag = fixed(10);
/// Grants and revocations of API tokens (`tally::auth`), in [`PLATFORM_BOOK`].
pub const TOKENS: Tag = fixed(11);
/// The floors of a book's history, in its shadow: each a u64 below which garbage
/// collection may remove what a read as of an earlier seqnum needs (`gc.rs`).
pub const HISTORY: Tag = fixed(12);

const DERIVED_BIT: u64 = 1 << 62;

const fn fixed(n: u32) -> Tag {
    Tag(Tag::RESERVED_BIT | n as u64)
}

/// The platform book that holds user book `book`'s exactly-once records.
pub fn shadow(book: BookId) -> BookId {
    assert!(!book.is_reserved(), "platform books have no shadow");
    BookId(book.0 | BookId::RESERVED_BIT)
}

/// Slots of a node's memo of object tags: SHA-256 costs about a microsecond on a CPU
/// without SHA extensions, which is as much as a whole read-optimized read served in
/// place.
const OBJECT_MEMO_SLOTS: usize = 4096;

/// The secret that derived tags are keyed with, and the object tags it derived lately.
#[derive(Clone)]
pub struct TagKey {
    key: [u8; 32],
    /// Shared by the clones, which have the same key.
    objects: Arc<Memo<Tag>>,
}

impl PartialEq for TagKey {
    fn eq(&self, other: &TagKey) -> bool {
        self.key == other.key
    }
}

impl Eq for TagKey {}

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(..)")
    }
}

impl TagKey {
    pub const BYTES: usize = 32;

    pub fn new(key: [u8; 32]) -> TagKey {
        TagKey { key, objects: Arc::new(Memo::new(OBJECT_MEMO_SLOTS)) }
    }

    pub fn from_slice(bytes: &[u8]) -> Option<TagKey> {
        Some(TagKey::new(bytes.try_into().ok()?))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.key
    }

    fn digest(&self, domain: &str, parts: &[&[u8]]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        for part in std::iter::once(domain.as_bytes()).chain(parts.iter().copied()) {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        h.finalize().into()
    }

    fn derive(&self, domain: &str, parts: &[&[u8]]) -> Tag {
        let digest = self.digest(domain, parts);
        let bits = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        Tag(Tag::RESERVED_BIT | DERIVED_BIT | (bits & (DERIVED_BIT - 1)))
    }

    /// The seed of an instance's random bytes: the same in every execution of the
    /// invocation, and secret (keyed), so a guest cannot predict another's; an ID
    /// names an invocation of one book, and so does the seed.
    pub fn random_seed(&self, book: BookId, id: &InstanceId) -> [u8; 32] {
        self.digest("random", &[&book.0.to_be_bytes(), &id.encode()])
    }

    /// The step log of an instance.
    pub fn step(&self, id: &InstanceId) -> Tag {
        self.derive("step", &[&id.encode()])
    }

    /// The marks of the instance whose step log is `step`: its plain appends to its
    /// user book carry the first, the `j`-th at offset `j`, so a re-execution or a peer
    /// finds the record instead of appending it again; its conditional appends carry the
    /// second (their offsets are the guest's condition's). Derived from the step tag,
    /// which is all garbage collection knows of a finished instance.
    pub fn marks(&self, step: Tag) -> [Tag; 2] {
        [self.mark("mark", step), self.mark("cond-mark", step)]
    }

    fn mark(&self, domain: &str, step: Tag) -> Tag {
        let digest = self.digest(domain, &[&step.0.to_be_bytes()]);
        let bits = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        Tag(Tag::MARK_BITS | (bits & ((1 << 61) - 1)))
    }

    /// The read-optimized write log of `(table, key)`: remembered, since an invocation
    /// derives it for each operation on the object, and the recovery scan for each write
    /// of a result record.
    pub fn object(&self, table: &str, key: &[u8]) -> Tag {
        self.objects.get_or(table, key, || self.derive("object", &[table.as_bytes(), key]))
    }

    /// The step log that a record of the INSTANCES stream (with `tags`, holding `step`)
    /// is a step of: its one derived tag, besides the object streams of the writes and of
    /// a commit's writes, the queue shards of the pushes and pops and the locks of the
    /// tries and releases a [`Step::Group`] holds. (A record of no step log,
    /// such as a retry, gives its own stream.)
    pub fn step_log_of(&self, tags: &[Tag], step: &Step) -> Option<Tag> {
        let others: Vec<Tag> = step
            .as_steps()
            .iter()
            .flat_map(|s| match s {
                Step::Write(kind::Write { table, key, .. }) | Step::Put(kind::Put { table, key, .. }) => {
                    vec![self.object(table, key)]
                }
                Step::QueuePush(kind::QueuePush { queue, shard, .. })
                | Step::QueuePop(kind::QueuePop { queue, shard, .. })
                | Step::QueuePopMany(kind::QueuePopMany { queue, shard, .. }) => vec![self.queue_shard(queue, *shard)],
                Step::LockTry(kind::LockTry { lock, .. }) | Step::LockRelease(kind::LockRelease { lock, .. }) => {
                    vec![self.lock(lock)]
                }
                // A commit rides a deferred Init (`instance/transactions.rs`).
                Step::TxnCommit(kind::TxnCommit { writes, .. }) => writes.iter().map(|(o, _)| self.bokistore(o)).collect(),
                _ => Vec::new(),
            })
            .collect();
        tags.iter().copied().find(|t| t.is_reserved() && t.0 & DERIVED_BIT != 0 && !others.contains(t))
    }

    /// The transition log of a table.
    pub fn transition(&self, table: &str) -> Tag {
        self.derive("transition", &[table.as_bytes()])
    }

    /// The claim of one key's migration in the switch that began at `begin`: the first
    /// migration record there wins, so a migration run twice writes each key once.
    pub fn migration(&self, begin: u64, table: &str, key: &[u8]) -> Tag {
        self.derive("migration", &[&begin.to_be_bytes(), table.as_bytes(), key])
    }

    /// The ID of the `n`-th promise instance `id` of `book` creates: 32 hex digits,
    /// keyed, so that no one can guess another invocation's promises (the same
    /// function and idempotency key in another book included).
    pub fn promise_id(&self, book: BookId, id: &InstanceId, n: u64) -> String {
        let digest = self.digest("promise-id", &[&book.0.to_be_bytes(), &id.encode(), &n.to_be_bytes()]);
        crate::id::hex(&digest[..16])
    }

    /// The stream of a promise (in its book's shadow): its creation at offset 0, its
    /// one completion at offset 1.
    pub fn promise(&self, promise: &str) -> Tag {
        self.derive("promise", &[promise.as_bytes()])
    }

    /// The awaits of a promise that would suspend (their Sleep records, in the promise's
    /// book's shadow): a completion wakes their roots.
    pub fn promise_waiters(&self, promise: &str) -> Tag {
        self.derive("promise-waiters", &[promise.as_bytes()])
    }

    /// The cancel stream of a root invocation (in its book's shadow): a Cancel record at
    /// offset 0 cancels the root and its children.
    pub fn cancel(&self, root: &InstanceId) -> Tag {
        self.derive("cancel", &[&root.encode()])
    }

    /// The retry stream of an instance (in its book's shadow): its Retry records.
    pub fn retry(&self, id: &InstanceId) -> Tag {
        self.derive("retry", &[&id.encode()])
    }

    /// The stream of an instance's `n`-th outgoing call (in its book's shadow): its
    /// record (`kind::Outcall`) at offset 0.
    pub fn outcall(&self, id: &InstanceId, n: u64) -> Tag {
        self.derive("outcall", &[&id.encode(), &n.to_be_bytes()])
    }

    /// The `Idempotency-Key` an instance's `n`-th outgoing call carries, the same in
    /// every execution: keyed, so that no one guesses another invocation's.
    pub fn outcall_key(&self, book: BookId, id: &InstanceId, n: u64) -> String {
        let digest = self.digest("outcall-key", &[&book.0.to_be_bytes(), &id.encode(), &n.to_be_bytes()]);
        format!("tally-{}", crate::id::hex(&digest[..16]))
    }

    /// The stream of a durable object (in its book's shadow): its writes and the
    /// commits of the transactions that write it (`objects.rs`).
    pub fn bokistore(&self, object: &str) -> Tag {
        self.derive("bokistore", &[object.as_bytes()])
    }

    /// The stream of shard `shard` of a queue (in its book's shadow): its pushes and
    /// pops (`queues.rs`).
    pub fn queue_shard(&self, queue: &str, shard: u64) -> Tag {
        self.derive("queue-shard", &[queue.as_bytes(), &shard.to_be_bytes()])
    }

    /// The stream of a lock (in its book's shadow): its tries and releases (`locks.rs`).
    pub fn lock(&self, lock: &crate::record::LockId) -> Tag {
        use crate::record::LockId;
        match lock {
            LockId::Named(name) => self.derive("lock", &[name.as_bytes()]),
            LockId::Key { function, key } => self.derive("key-lock", &[function.as_bytes(), key.as_bytes()]),
        }
    }

    /// The checkpoints of an object's, a queue shard's or a lock's stream `stream` (in
    /// its book's shadow): its state at a seqnum, below which garbage collection trims
    /// the stream (`gc.rs`).
    pub fn checkpoint(&self, stream: Tag) -> Tag {
        self.derive("checkpoint", &[&stream.0.to_be_bytes()])
    }

    /// The stream of a schedule (in [`PLATFORM_BOOK`]): its states, one per change.
    pub fn schedule(&self, name: &str) -> Tag {
        self.derive("schedule", &[name.as_bytes()])
    }
}

/// Whether `text` is a promise ID as [`TagKey::promise_id`] makes them.
pub fn is_promise_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `tag` is one of the fixed streams (and so no derived tag).
#[cfg(test)]
fn is_fixed(tag: Tag) -> bool {
    tag.is_reserved() && tag.0 & DERIVED_BIT == 0 && !tag.is_mark()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_log_of_a_group_is_its_derived_tag_that_no_write_push_or_pop_names() {
        use bytes::Bytes;
        let key = TagKey::new([7; 32]);
        let id = InstanceId::generated("00ff");
        let step = key.step(&id);
        // An object whose tag sorts before the step log's, as the engine sorts a record's
        // tags: the first derived tag of the record is then the object's.
        let object = (0u32..).map(|n| n.to_be_bytes()).find(|k| key.object("t", k) < step).expect("one sorts first");
        let write =
            Step::Write(kind::Write { table: "t".into(), key: Bytes::copy_from_slice(&object), version: 1, migrated_from: None });
        let result = Step::Result(kind::Result { outcome: crate::record::Outcome::Ok(Bytes::new()) });
        let group = Step::Group(kind::Group { steps: vec![write, result.clone()] });
        let mut tags = vec![step, key.object("t", &object), INSTANCES, APPENDED];
        tags.sort_unstable();
        assert_eq!(key.step_log_of(&tags, &group), Some(step));
        assert_eq!(key.step_log_of(&[INSTANCES, APPENDED, step], &result), Some(step));
        // A queue shard that sorts first, which a group's push names (the simulator found
        // garbage collection trimming such a shard as the step log, and its pushes with it).
        let queue = (0u32..).map(|n| format!("q{n}")).find(|q| key.queue_shard(q, 1) < step).expect("one sorts first");
        let push = Step::QueuePush(kind::QueuePush { queue: queue.clone(), shard: 1, message: Bytes::new() });
        let group = Step::Group(kind::Group { steps: vec![push, result] });
        let mut tags = vec![step, key.queue_shard(&queue, 1), INSTANCES];
        tags.sort_unstable();
        assert_eq!(key.step_log_of(&tags, &group), Some(step));
        // And a pop that a deferred Init rides (garbage collection found no Result of a
        // consumer whose first record was taken for the shard's, and stopped collecting).
        let init = Step::Init(kind::Init { id: id.clone(), function: "f".into(), version: 1, input: Bytes::new() });
        for pop in [
            Step::QueuePop(kind::QueuePop { queue: queue.clone(), shard: 1, last: false }),
            Step::QueuePopMany(kind::QueuePopMany { queue: queue.clone(), shard: 1, last: false, max: 8 }),
        ] {
            let group = Step::Group(kind::Group { steps: vec![init.clone(), pop] });
            assert_eq!(key.step_log_of(&tags, &group), Some(step));
        }
        // And a commit that a deferred Init rides, its objects sorting first.
        let objects: Vec<String> = (0u32..).map(|n| format!("o{n}")).filter(|o| key.bokistore(o) < step).take(2).collect();
        let writes = objects.iter().map(|o| (o.clone(), Vec::new())).collect();
        let commit = Step::TxnCommit(kind::TxnCommit { start: 1, reads: Vec::new(), writes });
        let group = Step::Group(kind::Group { steps: vec![init, commit] });
        let mut tags: Vec<Tag> = objects.iter().map(|o| key.bokistore(o)).chain([step, INSTANCES]).collect();
        tags.sort_unstable();
        assert_eq!(key.step_log_of(&tags, &group), Some(step));
    }

    #[test]
    fn derived_tags_are_platform_tags_apart_from_fixed_ones_and_from_each_other() {
        let key = TagKey::new([7; 32]);
        let id = InstanceId::generated("00ff");
        let derived = [
            key.step(&id),
            key.object("a", b"b"),
            key.object("ab", b""),
            key.transition("ab"),
            key.migration(1, "a", b"b"),
            key.migration(2, "a", b"b"),
            key.promise("ab"),
            key.promise_waiters("ab"),
            key.cancel(&id),
            key.retry(&id),
            key.schedule("ab"),
            key.bokistore("ab"),
            key.queue_shard("ab", 0),
            key.queue_shard("ab", 1),
            key.lock(&crate::record::LockId::Named("ab".into())),
            key.lock(&crate::record::LockId::Key { function: "a".into(), key: "b".into() }),
            key.lock(&crate::record::LockId::Key { function: "ab".into(), key: "".into() }),
        ];
        for (i, t) in derived.iter().enumerate() {
            assert!(t.is_reserved() && !is_fixed(*t) && !t.is_mark());
            for u in &derived[i + 1..] {
                assert_ne!(t, u);
            }
        }
        for f in [MANIFESTS, BOOKS, SWITCHES, TABLES, INSTANCES, TAG_KEY, APPENDED, SCHEDULES, LIBRARIES, SCHEDULES_COMPACTED] {
            assert!(is_fixed(f) && !f.is_mark());
        }
        let marks = key.marks(key.step(&id));
        for mark in marks {
            assert!(mark.is_mark() && mark.is_reserved() && !is_fixed(mark));
        }
        assert_ne!(marks[0], marks[1]);
        assert_ne!(marks, key.marks(key.step(&InstanceId::generated("00fe"))));
        // Another key derives other tags: the secret matters.
        assert_ne!(TagKey::new([8; 32]).object("a", b"b"), key.object("a", b"b"));
    }

    #[test]
    fn the_object_memo_gives_the_derived_tag_and_derives_each_object_once_while_it_holds_it() {
        let key = TagKey::new([7; 32]);
        let derive = |table: &str, k: &[u8]| key.derive("object", &[table.as_bytes(), k]);
        // One set of four slots: the eight objects below collide, and evict each other.
        let memo = Memo::new(4);
        let long = vec![b'k'; crate::memo::BYTES_MAX];
        let objects: [(&str, &[u8]); 9] = [
            ("a", b"bc"),
            ("ab", b"c"),
            ("abc", b""),
            ("", b"abc"),
            ("t", &long),
            ("a", b"bc"),
            ("t", b"1"),
            ("t", b"2"),
            ("t", b"3"),
        ];
        for _ in 0..3 {
            for (table, k) in objects {
                let mut derived = 0;
                let tag = memo.get_or(table, k, || {
                    derived += 1;
                    derive(table, k)
                });
                assert_eq!(tag, derive(table, k), "{table:?}/{k:?}");
                assert!(derived <= 1);
                // Asked again at once: remembered, unless too long to keep.
                let kept = table.len() + k.len() <= crate::memo::BYTES_MAX;
                let again = memo.get_or(table, k, || {
                    assert!(!kept, "{table:?}/{k:?} was derived twice in a row");
                    derive(table, k)
                });
                assert_eq!(again, tag);
            }
        }
        // The memo changes no tag: the derivation is what stored write logs are found by.
        assert_eq!(key.object("accounts", b"alice"), derive("accounts", b"alice"));
        assert_eq!(key.object("accounts", b"alice"), Tag(0xfaba_09d1_7741_0e98));
    }

    #[test]
    fn shadow_books_are_platform_books() {
        assert_eq!(shadow(BookId(9)), BookId(9 | BookId::RESERVED_BIT));
        assert!(shadow(BookId(0)).is_reserved());
    }
}
