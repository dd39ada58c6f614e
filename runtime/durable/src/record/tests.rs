//! The records' formats, checked: what each kind encodes to, and what readers of a
//! record make of it.

use super::samples::one_of_each;
use crate::id::InstanceId;

/// What [`one_of_each`] encodes to (format byte first), recorded before the kinds
/// became types of their own.
const ENCODED: [&str; 28] = [
    "0100000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000010000000000000066030000000000000002000000000000006162",
    "0101000000010000000000000074020000000000000061620400000000000000010500000000000000",
    "0102000000010000000000000074020000000000000061620102000000000000006162",
    "01030000000100000000000000740200000000000000616200",
    "0104000000010000000000000067070707070707070707070707070707070707070707070707070707070707070702000000010000000000000078",
    "01050000000000000002000000000000006162",
    "010600000020000000000000003534323765313564643936336565363833353163366365363138653963333630000000000000000001000000000000006608000000",
    "01070000000200000000000000000000000100000000000000010000000200000000000000",
    "010800000001000000000000000200000000000000030303030303030303030303030303030303030303030303030303030303030301000000010400000000000000",
    "01090000000900000000000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000",
    "010a0000000a00000000000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000",
    "010b000000010000000000000070200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000",
    "010c00000001000000000000007001000000",
    "010d00000001000000000000007020000000000000003534323765313564643936336565363833353163366365363138653963333630000000000000000002000000000000006162",
    "010e000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000",
    "010f000000",
    "0110000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000020000000b00000000000000",
    "011100000001000000000000006f0100000000000000010000000100000000000000610200000000000000",
    "01120000000100000000000000010000000000000001000000000000006f010000000000000001000000000000006f0100000000000000010000000100000000000000610200000000000000",
    "0113000000010000000000000071010000000000000002000000000000006162",
    "0114000000010000000000000071010000000000000001",
    "01150000000100000001000000000000006601000000000000006b010000000000000068200000000000000035343237653135646439363365653638333531633663653631386539633336300000000000000000010000000000000000",
    "01160000000100000001000000000000006601000000000000006b0100000000000000680200000000000000",
    "011700000020000000000000003534323765313564643936336565363833353163366365363138653963333630000000000000000001000000000000006601000000000000000200000000000000616201000000000000006b01",
    "011800000003000000000000000100000000000000010000000000000002000000000000006162",
    "011900000002000000000000000f00000005000000050000000500000000000000",
    "011a0000000100000000000000740200000000000000616206000000000000000102000000000000006162",
    "011c00000001000000000000007102000000000000000008000000",
];

/// Records written before a change of how steps are declared must decode as they did:
/// the bytes of one step of every kind, as the format has them.
#[test]
fn every_step_kind_encodes_as_it_always_has() {
    let steps = one_of_each();
    assert_eq!(steps.len(), ENCODED.len());
    for (step, want) in steps.iter().zip(ENCODED) {
        let hex: String = encode(step).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want, "{}", step.describe());
        assert_eq!(&decode::<Step>("step", &encode(step)).expect("decodes"), step);
    }
    let clocks = kind::Clocks { readings: vec![Reading::Wall(1)] };
    assert_eq!(step_len(&clocks), encoded_len(&Step::from(clocks)));
    let read = kind::Read { table: "t".into(), key: Bytes::from_static(b"k"), value: Some(Bytes::from_static(b"v")) };
    assert_eq!(step_len(&read), encoded_len(&Step::from(read)));
}
use super::*;

#[test]
fn steps_round_trip_and_garbage_or_unknown_formats_are_errors() {
    let steps = [
        Step::Init(kind::Init {
            id: InstanceId::keyed("f", "k.1").unwrap().child(3),
            function: "f".into(),
            version: 9,
            input: Bytes::from_static(b"in"),
        }),
        Step::Write(kind::Write {
            table: "t".into(),
            key: Bytes::from_static(b"\0k"),
            version: u64::MAX,
            migrated_from: Some(3),
        }),
        Step::Put(kind::Put {
            table: "t".into(),
            key: Bytes::from_static(b"\0k"),
            version: 3,
            value: Some(Bytes::from_static(b"v")),
        }),
        Step::Put(kind::Put { table: "t".into(), key: Bytes::from_static(b"k"), version: u64::MAX, value: None }),
        Step::Read(kind::Read { table: "t".into(), key: Bytes::from_static(b"k"), value: None }),
        Step::Invoke(kind::Invoke {
            function: "g".into(),
            input_sha256: input_sha256(b"x"),
            outcome: Outcome::NotFound("g".into()),
        }),
        Step::Result(kind::Result { outcome: Outcome::TooLarge { size: None, limit: 7 } }),
        Step::Clocks(kind::Clocks {
            readings: vec![
                Reading::Wall(u64::MAX),
                Reading::Monotonic(0),
                Reading::Log(None),
                Reading::Log(Some(ReadRecord { seqnum: 3, tags: vec![1, 2], data: Bytes::from_static(b"d"), aux: None })),
            ],
        }),
        Step::CondAppend(kind::CondAppend {
            tag: 5,
            position: 0,
            data_sha256: input_sha256(b""),
            outcome: CondOutcome::Conflict(None),
        }),
        Step::CondAppend(kind::CondAppend {
            tag: 5,
            position: 1,
            data_sha256: [0; 32],
            outcome: CondOutcome::Appended(u64::MAX),
        }),
        Step::Sleep(kind::Sleep { until_ms: u64::MAX, root: InstanceId::generated("00ff") }),
        Step::Delay(kind::Delay { until_ms: 0, root: InstanceId::generated("00ff") }),
        Step::Promise(kind::Promise { promise: "ab".into(), root: InstanceId::generated("00ff") }),
        Step::Awaited(kind::Awaited { promise: "ab".into(), outcome: Awaited::Value(Bytes::from_static(b"v")) }),
        Step::Awaited(kind::Awaited { promise: "ab".into(), outcome: Awaited::TimedOut }),
        Step::Completed(kind::Completed { promise: "ab".into(), root: InstanceId::generated("00ff"), value: Bytes::new() }),
        Step::Cancel(kind::Cancel { root: InstanceId::generated("00ff") }),
        Step::Cancelled,
        Step::Retry(kind::Retry {
            id: InstanceId::generated("00ff").child(3),
            root: InstanceId::generated("00ff"),
            attempt: 2,
            until_ms: 9,
        }),
    ];
    for s in steps {
        assert_eq!(decode::<Step>("step", &encode(&s)).unwrap(), s);
    }
    assert!(decode::<Step>("step", &[FORMAT, 0xff, 0xff, 0xff]).is_err());
    assert!(decode::<Step>("step", &[FORMAT, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
    let future = decode::<Step>("step", &[FORMAT + 1, 0, 0, 0, 0]).unwrap_err();
    assert!(future.to_string().contains("newer node"), "{future}");
    assert!(decode::<Step>("step", &[]).is_err());
}

#[test]
fn a_write_read_in_place_is_the_one_the_decoded_record_holds() {
    let write = |table: &str, key: &[u8], version: u64, migrated_from: Option<u64>| {
        Step::Write(kind::Write { table: table.into(), key: Bytes::copy_from_slice(key), version, migrated_from })
    };
    let result = Step::Result(kind::Result { outcome: Outcome::Ok(Bytes::from_static(b"k")) });
    let group = Step::Group(kind::Group {
        steps: vec![write("t", b"k", 1, None), write("t", b"j", 2, None), write("t", b"k", 3, None), result.clone()],
    });
    let put = |table: &str, key: &[u8], version: u64, value: Option<&'static [u8]>| {
        Step::Put(kind::Put {
            table: table.into(),
            key: Bytes::copy_from_slice(key),
            version,
            value: value.map(Bytes::from_static),
        })
    };
    type Found = Option<(u64, Option<u64>)>;
    let clocks = Step::Clocks(kind::Clocks { readings: vec![Reading::Wall(7), Reading::Log(None)] });
    let stored = |found: Found| found.map(|(version, migrated_from)| Written { version, migrated_from, value: None });
    let carried = |version: u64, value: Option<&'static [u8]>| {
        Some(Written { version, migrated_from: None, value: Some(value.map(Bytes::from_static)) })
    };
    let old: [(Step, &str, &[u8], Found); 9] = [
        (write("t", b"k", u64::MAX, Some(7)), "t", b"k", Some((u64::MAX, Some(7)))),
        (write("t", b"k", 5, None), "t", b"k\0", None),
        // The table and key are length-prefixed: no separator to forge.
        (write("tk", b"", 5, None), "t", b"k", None),
        (group.clone(), "t", b"k", Some((3, None))),
        (group.clone(), "t", b"j", Some((2, None))),
        (group, "u", b"k", None),
        (Step::Group(kind::Group { steps: vec![write("t", b"k", 4, None), Step::Cancelled] }), "t", b"k", Some((4, None))),
        (result.clone(), "t", b"k", None),
        (
            Step::Group(kind::Group {
                steps: vec![write("t", b"k", 5, None), clocks.clone(), write("t", b"k", 6, None), clocks.clone()],
            }),
            "t",
            b"k",
            Some((6, None)),
        ),
    ];
    let mut cases: Vec<(Step, &str, &[u8], Option<Written>)> =
        old.into_iter().map(|(step, table, key, found)| (step, table, key, stored(found))).collect();
    let mixed = Step::Group(kind::Group {
        steps: vec![put("t", b"k", 1, Some(b"one")), write("t", b"j", 2, None), put("t", b"j", 3, None), result.clone()],
    });
    let new: [(Step, &str, &[u8], Option<Written>); 7] = [
        (put("t", b"k", 9, Some(b"v")), "t", b"k", carried(9, Some(b"v"))),
        (put("t", b"k", 9, Some(b"")), "t", b"k", carried(9, Some(b""))),
        (put("t", b"k", 9, None), "t", b"k", carried(9, None)),
        (put("t", b"k", 9, Some(b"v")), "t", b"kv", None),
        (mixed.clone(), "t", b"k", carried(1, Some(b"one"))),
        (mixed, "t", b"j", carried(3, None)),
        (
            Step::Group(kind::Group {
                steps: vec![put("t", b"k", 5, Some(b"five")), clocks.clone(), write("t", b"j", 6, None), clocks],
            }),
            "t",
            b"k",
            carried(5, Some(b"five")),
        ),
    ];
    cases.extend(new);
    for (step, table, key, expected) in cases {
        let bytes = encode(&step);
        assert_eq!(write_in(&bytes, table, key).unwrap(), expected, "{step:?}");
        // Every cut of a record that holds the write is an error, never a wrong answer.
        if expected.is_some() {
            for cut in 1..bytes.len() {
                assert!(
                    !matches!(write_in(&bytes.slice(..cut), table, key), Ok(Some(found)) if Some(&found) != expected.as_ref()),
                    "{step:?} cut at {cut}"
                );
            }
        }
    }
    assert!(write_in(&Bytes::from_static(&[FORMAT + 1, 1, 0, 0, 0]), "t", b"k").is_err(), "a newer format");
    assert!(write_in(&Bytes::new(), "t", b"k").is_err());
}

#[test]
fn a_step_is_the_same_operation_only_with_the_same_table_key_and_callee() {
    let read = |t: &str, k: &'static [u8]| Step::Read(kind::Read { table: t.into(), key: Bytes::from_static(k), value: None });
    let recorded =
        Step::Read(kind::Read { table: "t".into(), key: Bytes::from_static(b"k"), value: Some(Bytes::from_static(b"v")) });
    assert!(recorded.same_operation(&read("t", b"k")));
    assert!(!recorded.same_operation(&read("u", b"k")));
    assert!(!recorded.same_operation(&read("t", b"j")));
    let call = |f: &str, i: &[u8]| {
        Step::Invoke(kind::Invoke { function: f.into(), input_sha256: input_sha256(i), outcome: Outcome::Ok(Bytes::new()) })
    };
    assert!(call("g", b"1").same_operation(&call("g", b"1")));
    assert!(!call("g", b"1").same_operation(&call("h", b"1")));
    assert!(!call("g", b"1").same_operation(&call("g", b"2")));
    let write = |v: &'static [u8]| {
        Step::LoggedWrite(kind::LoggedWrite {
            table: "t".into(),
            key: Bytes::from_static(b"k"),
            value: Some(Bytes::from_static(v)),
        })
    };
    assert!(!write(b"a").same_operation(&write(b"b")));
    assert!(!write(b"a").same_operation(&read("t", b"k")));
    // A read-optimized write is the same write whether it carries its value or not.
    let stored = |key: &'static [u8], version| {
        Step::Write(kind::Write { table: "t".into(), key: Bytes::from_static(key), version, migrated_from: None })
    };
    let put = |key: &'static [u8], version, value: &'static [u8]| {
        Step::Put(kind::Put { table: "t".into(), key: Bytes::from_static(key), version, value: Some(Bytes::from_static(value)) })
    };
    assert!(put(b"k", 1, b"a").same_operation(&put(b"k", 1, b"b")));
    assert!(put(b"k", 1, b"a").same_operation(&stored(b"k", 1)));
    assert!(stored(b"k", 1).same_operation(&put(b"k", 1, b"a")));
    assert!(!put(b"k", 1, b"a").same_operation(&put(b"k", 2, b"a")));
    assert!(!put(b"k", 1, b"a").same_operation(&stored(b"j", 1)));
}

/// Found by the `step_records` fuzz target: groups nested in groups (no node writes
/// one, groups never nest; a corrupt record) thousands deep, which decoding followed
/// down until it overflowed the stack and killed the process. The target's input held
/// a group of three steps, then 3,222 groups of one step each nested in it.
#[test]
fn groups_nested_in_groups_are_refused_without_recursing() {
    let group_of_one = [0x19, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    let cancelled = [0x0f, 0, 0, 0];
    let nested = |depth: usize| -> Vec<u8> { [&[FORMAT][..], &group_of_one.repeat(depth), &cancelled].concat() };
    for depth in [2, 3_222, 100_000] {
        let bytes = nested(depth);
        assert!(decode::<Step>("step", &bytes).is_err(), "{depth} deep");
        assert!(decode_steps("step", &bytes).is_err(), "{depth} deep");
    }
    // One group, not nested, still reads.
    let one = nested(1);
    assert_eq!(decode::<Step>("step", &one).unwrap(), Step::Group(kind::Group { steps: vec![Step::Cancelled] }));
}

/// A commit ends a group only after readings: the Init it rides, clock readings and
/// reads (`Instance::may_end_group`); a record of an object's stream holds no write,
/// push or lock step of another stream.
#[test]
fn a_commit_ends_a_group_of_readings_only() {
    let init = Step::Init(kind::Init { id: InstanceId::generated("00"), function: "f".into(), version: 1, input: Bytes::new() });
    let commit = Step::TxnCommit(kind::TxnCommit { start: 1, reads: vec!["o".into()], writes: vec![("o".into(), Vec::new())] });
    let clocks = Step::Clocks(kind::Clocks { readings: Vec::new() });
    let push = Step::QueuePush(kind::QueuePush { queue: "q".into(), shard: 0, message: Bytes::new() });
    let read = |t: &str, k: &'static [u8]| Step::Read(kind::Read { table: t.into(), key: Bytes::from_static(k), value: None });
    let group = |steps: Vec<Step>| encode(&Step::Group(kind::Group { steps }));
    assert!(decode_steps("step", &group(vec![init.clone(), commit.clone()])).is_ok());
    assert!(decode_steps("step", &group(vec![init.clone(), clocks.clone(), read("t", b"k"), commit.clone()])).is_ok());
    assert!(decode_steps("step", &group(vec![clocks, commit.clone()])).is_ok());
    assert!(decode_steps("step", &group(vec![init.clone(), push.clone(), commit])).is_err());
    assert!(decode_steps("step", &group(vec![init, push])).is_ok(), "a push ends a group as before");
}
