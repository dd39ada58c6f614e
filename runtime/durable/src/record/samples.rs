//! A step of every kind, for the record tests and the fuzz targets (`tally-fuzz`).

use bytes::Bytes;

use super::{kind, Awaited, CondOutcome, InvocationKey, LockId, ObjOp, Outcome, Reading, Step};
use crate::id::InstanceId;

/// One step of every kind: what the encoding test checks, and what the fuzz targets
/// start from.
pub fn one_of_each() -> Vec<Step> {
    let id = InstanceId::keyed("f", "k").expect("an ID");
    let b = || Bytes::from_static(b"ab");
    let lock = LockId::Key { function: "f".into(), key: "k".into() };
    let op = ObjOp::Incr { path: "a".into(), by: 2 };
    vec![
        Step::Init(kind::Init { id: id.clone(), function: "f".into(), version: 3, input: b() }),
        Step::Write(kind::Write { table: "t".into(), key: b(), version: 4, migrated_from: Some(5) }),
        Step::LoggedWrite(kind::LoggedWrite { table: "t".into(), key: b(), value: Some(b()) }),
        Step::Read(kind::Read { table: "t".into(), key: b(), value: None }),
        Step::Invoke(kind::Invoke { function: "g".into(), input_sha256: [7; 32], outcome: Outcome::Trap("x".into()) }),
        Step::Result(kind::Result { outcome: Outcome::Ok(b()) }),
        Step::Refused(kind::Refused { id: id.clone(), function: "f".into(), outcome: Outcome::Cancelled }),
        Step::Clocks(kind::Clocks { readings: vec![Reading::Wall(1), Reading::Monotonic(2)] }),
        Step::CondAppend(kind::CondAppend { tag: 1, position: 2, data_sha256: [3; 32], outcome: CondOutcome::Conflict(Some(4)) }),
        Step::Sleep(kind::Sleep { until_ms: 9, root: id.clone() }),
        Step::Delay(kind::Delay { until_ms: 10, root: id.clone() }),
        Step::Promise(kind::Promise { promise: "p".into(), root: id.clone() }),
        Step::Awaited(kind::Awaited { promise: "p".into(), outcome: Awaited::TimedOut }),
        Step::Completed(kind::Completed { promise: "p".into(), root: id.clone(), value: b() }),
        Step::Cancel(kind::Cancel { root: id.clone() }),
        Step::Cancelled,
        Step::Retry(kind::Retry { id: id.clone(), root: id.clone(), attempt: 2, until_ms: 11 }),
        Step::ObjectWrite(kind::ObjectWrite { object: "o".into(), ops: vec![op.clone()] }),
        Step::TxnCommit(kind::TxnCommit { start: 1, reads: vec!["o".into()], writes: vec![("o".into(), vec![op])] }),
        Step::QueuePush(kind::QueuePush { queue: "q".into(), shard: 1, message: b() }),
        Step::QueuePop(kind::QueuePop { queue: "q".into(), shard: 1, last: true }),
        Step::LockTry(kind::LockTry { lock: lock.clone(), holder: "h".into(), root: id.clone(), prev: 1, last: false }),
        Step::LockRelease(kind::LockRelease { lock, holder: "h".into(), prev: 2 }),
        Step::InitKeyed(kind::InitKeyed {
            id: id.clone(),
            function: "f".into(),
            version: 1,
            input: b(),
            key: InvocationKey { key: "k".into(), exclusive: true },
        }),
        Step::Checkpoint(kind::Checkpoint { covers: 3, views: vec![(1, b())] }),
        Step::Group(kind::Group { steps: vec![Step::Cancelled, Step::Result(kind::Result { outcome: Outcome::Timeout(5) })] }),
        Step::Put(kind::Put { table: "t".into(), key: b(), version: 6, value: Some(b()) }),
        Step::QueuePopMany(kind::QueuePopMany { queue: "q".into(), shard: 2, last: false, max: 8 }),
    ]
}
