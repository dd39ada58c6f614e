//! Connections that hold the node's resources without finishing a request, kept for the
//! whole soak: idle ones (nothing sent), slow heads (a byte of a header a second) and
//! slow bodies (a byte of the body a second). For each, whether and when the node cut
//! it off. Then bodies nearly whole but never finished, many at once: the memory the
//! node holds for them.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{interval, timeout, Instant, MissedTickBehavior};

/// How a held connection holds on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Connects and sends nothing.
    Idle,
    /// Sends a request line and `Host`, then a header's name a byte a second.
    SlowHead,
    /// Sends a whole head announcing a body of a few KiB, then a byte of it a second.
    SlowBody,
}

impl Hold {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hold::Idle => "idle",
            Hold::SlowHead => "slow-head",
            Hold::SlowBody => "slow-body",
        }
    }
}

/// What became of a held connection.
pub(crate) struct Held {
    pub hold: Hold,
    /// When the node closed it, since it opened; `None` if it was still open at the end.
    pub closed_after: Option<Duration>,
    /// How long it was held open (to its close, or to the end).
    pub open_for: Duration,
}

/// Holds one connection, in `manner`, until the node closes it or `stop`
/// turns true. `head` is what a slow body announces (its request line and headers).
pub(crate) async fn hold(addr: String, manner: Hold, head: String, mut stop: watch::Receiver<bool>) -> Held {
    let opened = Instant::now();
    let held = |closed: bool| Held { hold: manner, closed_after: closed.then(|| opened.elapsed()), open_for: opened.elapsed() };
    let Ok(Ok(stream)) = timeout(Duration::from_secs(5), TcpStream::connect(&addr)).await else { return held(true) };
    let (mut reader, mut writer) = stream.into_split();
    let first = match manner {
        Hold::Idle => String::new(),
        Hold::SlowHead => "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_string(),
        Hold::SlowBody => head,
    };
    if writer.write_all(first.as_bytes()).await.is_err() {
        return held(true);
    }
    let mut tick = interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sink = [0u8; 1024];
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return held(false);
                }
            }
            // Anything the node sends (an error answer) is the start of its closing.
            read = reader.read(&mut sink) => {
                if matches!(read, Ok(0) | Err(_)) {
                    return held(true);
                }
            }
            _ = tick.tick() => {
                let byte: &[u8] = if manner == Hold::SlowHead { b"X" } else { b"." };
                if manner != Hold::Idle && writer.write_all(byte).await.is_err() {
                    return held(true);
                }
            }
        }
    }
}

/// The head of a slow body: a POST of `length` bytes with `auth` (a header line).
pub(crate) fn slow_body_head(target: &str, auth: &str, length: usize) -> String {
    format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: {length}\r\n\r\n")
}

/// Connections that each sent `bytes` of a body announced one byte longer, all open
/// at once; dropped to close them.
pub(crate) struct HeldBodies {
    pub streams: Vec<TcpStream>,
}

/// Opens `count` connections and sends each a head announcing `bytes + 1` and then
/// `bytes` of the body; those the node took in full are kept open.
pub(crate) async fn held_bodies(addr: &str, head: &str, count: usize, bytes: usize) -> HeldBodies {
    let body = vec![b'x'; bytes];
    let mut streams = Vec::new();
    for _ in 0..count {
        let Ok(Ok(mut stream)) = timeout(Duration::from_secs(5), TcpStream::connect(addr)).await else { continue };
        let sent = async {
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await
        };
        if matches!(timeout(Duration::from_secs(3), sent).await, Ok(Ok(()))) {
            streams.push(stream);
        }
    }
    HeldBodies { streams }
}
