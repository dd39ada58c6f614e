//! Raw HTTP/1.1 for the hostile clients: requests written byte for byte (so that they
//! can be malformed, truncated or dribbled), and answers read with their headers (the
//! honest clients' `http.rs` keeps only status and body), or seen to be a closed
//! connection. Every read and write has a deadline: a node that holds a connection
//! open without answering is an outcome to count, never a hang of the suite.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at, Instant};

/// Bytes of an answer's body read at most; the node's refusals are small JSON.
const BODY_BYTES_MAX: usize = 1 << 20;
/// Bytes of an answer's head read at most.
const HEAD_BYTES_MAX: usize = 64 << 10;

/// What came back for a request.
#[derive(Debug)]
pub(crate) enum Answer {
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// The node closed (or reset) the connection without an answer.
    Closed,
    /// No answer within the deadline, the connection still open.
    TimedOut,
    /// Not even a connection.
    Refused,
}

impl Answer {
    /// The status as the report counts it: `200`, `closed`, `timeout`, `refused`.
    pub(crate) fn label(&self) -> String {
        match self {
            Answer::Status { status, .. } => status.to_string(),
            Answer::Closed => "closed".into(),
            Answer::TimedOut => "timeout".into(),
            Answer::Refused => "refused".into(),
        }
    }

    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Answer::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The value of header `name`, if the answer has one.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        match self {
            Answer::Status { headers, .. } => headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()),
            _ => None,
        }
    }

    pub(crate) fn body(&self) -> &[u8] {
        match self {
            Answer::Status { body, .. } => body,
            _ => &[],
        }
    }

    /// A short description for a mismatch line.
    pub(crate) fn shown(&self) -> String {
        let body = String::from_utf8_lossy(self.body());
        let body: String = body.chars().take(160).collect();
        match self {
            Answer::Status { .. } => format!("{} {body}", self.label()),
            _ => self.label(),
        }
    }
}

/// A request as bytes: the request line, `Host`, the given header lines (each ending in
/// `\r\n`), `Content-Length` of the body unless the headers frame it themselves, and
/// the body.
pub(crate) fn request(method: &str, target: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let framed =
        headers.to_ascii_lowercase().contains("transfer-encoding:") || headers.to_ascii_lowercase().contains("content-length:");
    let length = if framed { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
    let mut bytes = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}{length}\r\n").into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// One connection to the node.
pub(crate) struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `addr` (`host:port`); `None` if the node refused or did not accept
    /// within `deadline`.
    pub(crate) async fn open(addr: &str, deadline: Duration) -> Option<Conn> {
        let stream = timeout(deadline, TcpStream::connect(addr)).await.ok()?.ok()?;
        stream.set_nodelay(true).ok()?;
        Some(Conn { stream: BufReader::new(stream) })
    }

    /// Writes `bytes`; `false` if the node closed the connection first.
    pub(crate) async fn write(&mut self, bytes: &[u8], deadline: Duration) -> bool {
        matches!(timeout(deadline, self.stream.get_mut().write_all(bytes)).await, Ok(Ok(())))
    }

    /// Closes this side for writing: the node reads an end of stream, and may answer.
    pub(crate) async fn half_close(&mut self) {
        let _ = self.stream.get_mut().shutdown().await;
    }

    /// The next answer on the connection, waiting up to `deadline`.
    pub(crate) async fn answer(&mut self, deadline: Duration) -> Answer {
        match timeout_at(Instant::now() + deadline, self.read_answer()).await {
            Ok(Ok(Some(answer))) => answer,
            // A reset, an end of stream or a broken answer: the node gave up on us.
            Ok(Ok(None) | Err(_)) => Answer::Closed,
            Err(_) => Answer::TimedOut,
        }
    }

    /// `None` at an end of stream before a status line.
    async fn read_answer(&mut self) -> anyhow::Result<Option<Answer>> {
        let stream = &mut self.stream;
        let mut line = String::new();
        if stream.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let status: u16 =
            line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("a status line {line:?}"))?;
        let mut headers = Vec::new();
        let mut head_bytes = line.len();
        loop {
            line.clear();
            let n = stream.read_line(&mut line).await?;
            ensure!(n > 0, "the connection closed in an answer's headers");
            head_bytes += n;
            ensure!(head_bytes <= HEAD_BYTES_MAX, "an answer's head over {HEAD_BYTES_MAX} bytes");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let value = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let chunked = value("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let length = value("content-length").map(str::parse::<usize>).transpose()?;
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                stream.read_line(&mut line).await?;
                let size = line.trim_end().split(';').next().unwrap_or_default();
                let size = usize::from_str_radix(size, 16).with_context(|| format!("a chunk size {line:?}"))?;
                ensure!(body.len() + size <= BODY_BYTES_MAX, "an answer over {BODY_BYTES_MAX} bytes");
                let at = body.len();
                body.resize(at + size, 0);
                stream.read_exact(&mut body[at..]).await?;
                line.clear();
                stream.read_line(&mut line).await?;
                if size == 0 {
                    break;
                }
            }
        } else if let Some(length) = length {
            ensure!(length <= BODY_BYTES_MAX, "an answer of {length} bytes");
            body.resize(length, 0);
            stream.read_exact(&mut body).await?;
        } else if status >= 200 && status != 204 && status != 304 {
            // Framed by the end of the connection.
            stream.take(BODY_BYTES_MAX as u64).read_to_end(&mut body).await?;
        }
        Ok(Some(Answer::Status { status, headers, body }))
    }
}
