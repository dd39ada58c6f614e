//! The bytes of one unidirectional stream: a hello that names the sender, then frames.
//!
//! ```text
//!  hello, once per stream (9 bytes):
//!  +--------+-------------+------------------+
//!  | "TLY1" | version: u8 | sender: u32 (BE) |
//!  +--------+-------------+------------------+
//!
//!  frame, once per message (5 + len bytes):
//!  +---------------+-------------+--------------------------------+
//!  | len: u32 (BE) | version: u8 | bincode(Message): len bytes    |
//!  +---------------+-------------+--------------------------------+
//! ```
//!
//! Everything read here comes from the network, so every check returns a
//! [`FrameError`] and nothing panics: the length is checked against the limit before
//! anything is allocated, and bincode decodes with the frame's own length as its limit,
//! so a hostile length prefix inside the body cannot allocate more than the frame holds.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::Poll;

use bincode::Options;
use bytes::{BufMut, BytesMut};
use tally_log_core::{Message, NodeId, WIRE_VERSION};
use tokio::io::{AsyncRead, ReadBuf};

const MAGIC: [u8; 4] = *b"TLY1";
const HELLO_LEN: usize = 9;
const HEADER_LEN: usize = 5;

/// Why a stream's bytes could not be read as a hello or a frame.
#[derive(Debug, thiserror::Error)]
pub(super) enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: u64, limit: usize },
    #[error("wire version {0}, expected {WIRE_VERSION}")]
    Version(u8),
    #[error("hello does not start with the magic bytes: {0:02x?}")]
    Magic([u8; 4]),
    #[error("undecodable frame body: {0}")]
    Decode(String),
    #[error("unencodable message: {0}")]
    Encode(String),
    #[error("stream ended after {read} of {expected} bytes")]
    Truncated { read: usize, expected: usize },
    /// The stream or its connection failed; the bytes read so far were fine.
    #[error("stream: {0}")]
    Stream(#[from] io::Error),
}

impl FrameError {
    /// True when the peer sent bytes that break the format, as opposed to the
    /// connection going away under a well-formed stream.
    pub(super) fn is_malformed(&self) -> bool {
        !matches!(self, FrameError::Stream(_))
    }
}

/// Varint integers, little endian, trailing bytes rejected. The same options on both
/// sides are part of the wire format: changing them means bumping [`WIRE_VERSION`].
fn options() -> impl Options {
    bincode::DefaultOptions::new()
}

pub(super) fn hello(me: NodeId) -> [u8; HELLO_LEN] {
    let mut hello = [0; HELLO_LEN];
    hello[..4].copy_from_slice(&MAGIC);
    hello[4] = WIRE_VERSION;
    hello[5..].copy_from_slice(&me.0.to_be_bytes());
    hello
}

/// Reads the hello that starts every stream. Its size is fixed, so a peer cannot make
/// the acceptor buffer anything before it knows who is talking.
pub(super) async fn read_hello<R: AsyncRead + Unpin>(recv: &mut R) -> Result<NodeId, FrameError> {
    let mut hello = [0; HELLO_LEN];
    let read = read_full(recv, &mut hello).await?;
    if read < HELLO_LEN {
        return Err(FrameError::Truncated { read, expected: HELLO_LEN });
    }
    let magic = [hello[0], hello[1], hello[2], hello[3]];
    if magic != MAGIC {
        return Err(FrameError::Magic(magic));
    }
    if hello[4] != WIRE_VERSION {
        return Err(FrameError::Version(hello[4]));
    }
    Ok(NodeId(u32::from_be_bytes([hello[5], hello[6], hello[7], hello[8]])))
}

/// Appends one frame holding `msg` to `buf`. On error `buf` is left as it was.
///
/// The body is measured first, so `buf` grows once to the exact size and a message
/// over the limit is refused without being copied.
pub(super) fn encode_into(msg: &Message, buf: &mut BytesMut, frame_bytes_max: usize) -> Result<(), FrameError> {
    let body_len = options().serialized_size(msg).map_err(|e| FrameError::Encode(e.to_string()))?;
    let too_large = FrameError::TooLarge { len: body_len, limit: frame_bytes_max };
    if body_len > frame_bytes_max as u64 {
        return Err(too_large);
    }
    let len = u32::try_from(body_len).map_err(|_| too_large)?;
    let frame_start = buf.len();
    buf.reserve(HEADER_LEN + len as usize);
    buf.put_u32(len);
    buf.put_u8(WIRE_VERSION);
    if let Err(e) = options().serialize_into((&mut *buf).writer(), msg) {
        buf.truncate(frame_start);
        return Err(FrameError::Encode(e.to_string()));
    }
    // Paired with the length check in `read_frame`: the prefix must describe the body.
    assert_eq!(buf.len() - frame_start - HEADER_LEN, len as usize, "bincode wrote another size than it measured");
    Ok(())
}

/// One frame holding `msg`, for tests and tools that speak the wire format by hand;
/// the transport itself coalesces frames with [`encode_into`].
#[cfg(test)]
pub(super) fn encode(msg: &Message) -> bytes::Bytes {
    let mut buf = BytesMut::new();
    encode_into(msg, &mut buf, u32::MAX as usize).expect("test messages are under 4 GiB");
    buf.freeze()
}

/// Reads the next frame: `Ok(None)` when the stream ended cleanly between frames.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(
    recv: &mut R,
    frame_bytes_max: usize,
) -> Result<Option<Message>, FrameError> {
    let mut header = [0; HEADER_LEN];
    match read_full(recv, &mut header).await? {
        0 => return Ok(None),
        HEADER_LEN => {}
        read => return Err(FrameError::Truncated { read, expected: HEADER_LEN }),
    }
    // The version comes first: from a peer of another version the length means nothing.
    if header[4] != WIRE_VERSION {
        return Err(FrameError::Version(header[4]));
    }
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    if len as usize > frame_bytes_max {
        return Err(FrameError::TooLarge { len: len.into(), limit: frame_bytes_max });
    }
    let mut body = vec![0; len as usize];
    let read = read_full(recv, &mut body).await?;
    if read < body.len() {
        return Err(FrameError::Truncated { read: HEADER_LEN + read, expected: HEADER_LEN + body.len() });
    }
    let msg =
        options().with_limit(len.into()).deserialize(&body).map_err(|e| FrameError::Decode(e.to_string().trim().to_string()))?;
    Ok(Some(msg))
}

/// Fills `buf` unless the stream ends first; returns how many bytes were read.
async fn read_full<R: AsyncRead + Unpin>(recv: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let read = poll_fn(|cx| {
            let mut window = ReadBuf::new(&mut buf[filled..]);
            match Pin::new(&mut *recv).poll_read(cx, &mut window) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(window.filled().len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await?;
        if read == 0 {
            break;
        }
        filled += read;
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tally_log_core::{BookId, LogId, MetalogEntry, Record, RecordMeta, SeqNum, ShardId, StoredRead, Tag, Term};

    use super::*;

    const LIMIT: usize = 1 << 20;

    fn messages() -> Vec<Message> {
        let record =
            Record { meta: RecordMeta::plain(BookId(7), vec![Tag(3), Tag::platform(1)]), data: Bytes::from_static(b"payload") };
        vec![
            Message::Heartbeat { incarnation: 42, term: Term(3), version: 0 },
            Message::Replicate { shard: ShardId(9), records: vec![(0, record.clone()), (1, record.clone())], traces: Vec::new() },
            Message::MetalogPush {
                entry: MetalogEntry {
                    term: Term(2),
                    log: LogId(1),
                    index: 17,
                    start_position: 100,
                    prev_cut: vec![1, 2],
                    cut: vec![3, 4],
                    trims: vec![],
                    version: 0,
                },
            },
            Message::RecordReply { req: 5, seqnum: SeqNum::new(Term(1), LogId(0), 9), read: StoredRead::Found(record) },
            // A tier without aggregators: an empty list is encoded like any other (a
            // field skipped when empty once broke every partial-mode cluster over QUIC).
            Message::NewConfig {
                config: std::sync::Arc::new(tally_log_core::Configuration {
                    n_logs: 1,
                    controller: NodeId(1),
                    terms: Vec::new(),
                    indexers: vec![Vec::new()],
                    tier: Some(tally_log_core::TierLayout { shards: vec![vec![NodeId(8)]], aggregators: Vec::new() }),
                }),
            },
            Message::TierDone { req: 3, round: 1, found: None, q: Default::default(), aux: None, sent: false },
        ]
    }

    /// A frame with the given header fields around `body`.
    fn frame(len: u32, version: u8, body: &[u8]) -> Vec<u8> {
        let mut out = len.to_be_bytes().to_vec();
        out.push(version);
        out.extend_from_slice(body);
        out
    }

    /// Classifies a read so cases can name what they expect.
    fn outcome(result: Result<Option<Message>, FrameError>) -> String {
        match result {
            Ok(Some(msg)) => format!("message {}", msg.name()),
            Ok(None) => "end".into(),
            Err(FrameError::TooLarge { .. }) => "too large".into(),
            Err(FrameError::Version(v)) => format!("version {v}"),
            Err(FrameError::Magic(_)) => "magic".into(),
            Err(FrameError::Decode(_)) => "decode".into(),
            Err(FrameError::Encode(_)) => "encode".into(),
            Err(FrameError::Truncated { .. }) => "truncated".into(),
            Err(FrameError::Stream(_)) => "stream".into(),
        }
    }

    async fn check(name: &str, input: &[u8], expect: &str) {
        let mut recv = input;
        let got = outcome(read_frame(&mut recv, LIMIT).await);
        assert_eq!(got, expect, "case {name:?}");
    }

    #[tokio::test]
    async fn frames_round_trip_back_to_back() {
        let msgs = messages();
        let mut stream = BytesMut::new();
        for msg in &msgs {
            encode_into(msg, &mut stream, LIMIT).unwrap();
        }
        assert_eq!(&stream[..encode(&msgs[0]).len()], &encode(&msgs[0])[..]);
        let mut recv = &stream[..];
        for msg in &msgs {
            let got = read_frame(&mut recv, LIMIT).await.unwrap().expect("a frame");
            assert_eq!(format!("{got:?}"), format!("{msg:?}"));
        }
        assert!(read_frame(&mut recv, LIMIT).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn bad_frames_are_errors() {
        let heartbeat = encode(&messages()[0]);
        let body = &heartbeat[HEADER_LEN..];
        let mut trailing = body.to_vec();
        trailing.push(0);
        // Replicate { shard 1, one record, local id 0, book 0, no tags, no cond, data of
        // 2^40 bytes }: the data length is a lie that must not be allocated.
        let mut hostile_bytes = vec![0, 1, 1, 0, 0, 0, 0, 253];
        hostile_bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        hostile_bytes.extend_from_slice(b"abc");
        // Replicate { shard 5, 2^62 records }.
        let mut hostile_vec = vec![0, 5, 253];
        hostile_vec.extend_from_slice(&(1u64 << 62).to_le_bytes());

        let newer = format!("version {}", WIRE_VERSION + 1);
        let cases: &[(&str, Vec<u8>, &str)] = &[
            ("empty stream", vec![], "end"),
            ("valid frame", heartbeat.to_vec(), "message heartbeat"),
            ("length one over the limit", frame(LIMIT as u32 + 1, WIRE_VERSION, body), "too large"),
            ("length u32::MAX", frame(u32::MAX, WIRE_VERSION, body), "too large"),
            ("older version", frame(body.len() as u32, 0, body), "version 0"),
            ("newer version", frame(body.len() as u32, WIRE_VERSION + 1, body), &newer),
            ("empty body", frame(0, WIRE_VERSION, &[]), "decode"),
            ("garbage body", frame(8, WIRE_VERSION, &[0xff; 8]), "decode"),
            ("unknown variant", frame(1, WIRE_VERSION, &[200]), "decode"),
            ("trailing byte in body", frame(trailing.len() as u32, WIRE_VERSION, &trailing), "decode"),
            ("hostile bytes length", frame(hostile_bytes.len() as u32, WIRE_VERSION, &hostile_bytes), "decode"),
            ("hostile vec length", frame(hostile_vec.len() as u32, WIRE_VERSION, &hostile_vec), "decode"),
            ("truncated header", heartbeat[..3].to_vec(), "truncated"),
            ("truncated body", heartbeat[..heartbeat.len() - 1].to_vec(), "truncated"),
        ];
        for (name, input, expect) in cases {
            check(name, input, expect).await;
        }
    }

    #[tokio::test]
    async fn random_bytes_never_panic() {
        // A fixed LCG: the same inputs every run, some of them with a plausible header.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u8
        };
        for case in 0..4000 {
            let len = usize::from(next()) % 64;
            let mut input: Vec<u8> = (0..len).map(|_| next()).collect();
            if case % 2 == 0 && input.len() >= HEADER_LEN {
                let body_len = (input.len() - HEADER_LEN) as u32;
                input[..4].copy_from_slice(&body_len.to_be_bytes());
                input[4] = WIRE_VERSION;
            }
            let mut recv = &input[..];
            while let Ok(Some(_)) = read_frame(&mut recv, LIMIT).await {}
            let mut recv = &input[..];
            let _ = read_hello(&mut recv).await;
        }
    }

    #[test]
    fn oversized_messages_are_refused_when_encoding_and_leave_the_buffer_alone() {
        let big = Message::Replicate {
            shard: ShardId(1),
            records: vec![(0, Record { meta: RecordMeta::plain(BookId(1), vec![]), data: vec![7; 4096].into() })],
            traces: Vec::new(),
        };
        let mut buf = BytesMut::from(&b"before"[..]);
        assert!(matches!(encode_into(&big, &mut buf, 4096), Err(FrameError::TooLarge { .. })));
        assert_eq!(&buf[..], b"before");
        encode_into(&big, &mut buf, 8192).unwrap();
        assert!(buf.len() > 4096 + HEADER_LEN);
    }

    #[tokio::test]
    async fn hellos_name_their_sender() {
        let good = hello(NodeId(0xdead_beef));
        let mut wrong_version = good;
        wrong_version[4] = WIRE_VERSION + 1;
        let mut wrong_magic = good;
        wrong_magic[0] = b'X';
        let newer = format!("version {}", WIRE_VERSION + 1);
        let cases: &[(&str, &[u8], &str)] = &[
            ("good", &good, "node 3735928559"),
            ("wrong version", &wrong_version, &newer),
            ("wrong magic", &wrong_magic, "magic"),
            ("truncated", &good[..8], "truncated"),
            ("empty", &[], "truncated"),
        ];
        for (name, input, expect) in cases {
            let mut recv = *input;
            let got = match read_hello(&mut recv).await {
                Ok(node) => format!("node {}", node.0),
                Err(FrameError::Version(v)) => format!("version {v}"),
                Err(FrameError::Magic(_)) => "magic".into(),
                Err(FrameError::Truncated { .. }) => "truncated".into(),
                Err(e) => format!("unexpected {e}"),
            };
            assert_eq!(got, *expect, "case {name:?}");
        }
    }
}
