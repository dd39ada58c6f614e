//! A minimal async HTTP/1.1 keep-alive client for the suites' closed loops: one
//! connection per client, on a tokio runtime, so that a client costs a task rather
//! than a thread (as `wrk`'s do), for every target alike. It POSTs by default, and sends
//! any method with extra headers too.

use anyhow::{ensure, Context as _};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

/// Bytes of an answer's body the client accepts.
const BODY_BYTES_MAX: usize = 16 << 20;

/// POSTs to one URL over one connection, opened on first use.
pub(crate) struct Http {
    /// `host:port`, and the request line's target.
    authority: String,
    target: String,
    stream: Option<BufReader<TcpStream>>,
    /// The `Server-Timing` header of the last answer (empty if it had none).
    pub(crate) timing: String,
}

impl Http {
    pub(crate) fn new(url: &str) -> anyhow::Result<Http> {
        let rest = url.strip_prefix("http://").with_context(|| format!("{url} is not an http:// URL"))?;
        let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let target = if target.is_empty() { "/" } else { target };
        Ok(Http { authority: authority.to_string(), target: target.to_string(), stream: None, timing: String::new() })
    }

    /// POSTs `body` (with an Idempotency-Key if given); the status and the body of the
    /// answer. A connection that failed is never used again. If `resend` is true (the
    /// request may be sent twice) and a reused connection fails, which it does when the
    /// server closed it while it idled, the request goes once more on a fresh one.
    pub(crate) async fn post(&mut self, body: &[u8], key: Option<&str>, resend: bool) -> anyhow::Result<(u16, Vec<u8>)> {
        let key = key.map(|k| format!("Idempotency-Key: {k}\r\n")).unwrap_or_default();
        self.send("POST", &key, body, resend).await
    }

    /// Sends a request with `method`, the header lines `headers` (each ending in
    /// `\r\n`) and `body`, as [`Http::post`] does.
    pub(crate) async fn send(
        &mut self,
        method: &str,
        headers: &str,
        body: &[u8],
        resend: bool,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let reused = self.stream.is_some();
        let mut answer = self.exchange(method, headers, body).await;
        if answer.is_err() {
            self.stream = None;
            if reused && resend {
                answer = self.exchange(method, headers, body).await;
                if answer.is_err() {
                    self.stream = None;
                }
            }
        }
        answer.with_context(|| format!("{method} http://{}{}", self.authority, self.target))
    }

    /// One request and its answer.
    async fn exchange(&mut self, method: &str, headers: &str, body: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(&self.authority).await.with_context(|| format!("connecting to {}", self.authority))?;
                s.set_nodelay(true)?;
                self.stream.insert(BufReader::new(s))
            }
        };
        let mut request = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\n{headers}Content-Length: {}\r\n\r\n",
            self.target,
            self.authority,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        stream.get_mut().write_all(&request).await?;
        let mut line = String::new();
        stream.read_line(&mut line).await?;
        let status: u16 =
            line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("a status line {line:?}"))?;
        let (mut length, mut chunked) = (None, false);
        self.timing.clear();
        loop {
            line.clear();
            ensure!(stream.read_line(&mut line).await? > 0, "the connection closed in an answer's headers");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>()?);
                } else if name.eq_ignore_ascii_case("server-timing") {
                    self.timing = value.trim().to_string();
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        let mut answer = Vec::new();
        if chunked {
            loop {
                line.clear();
                stream.read_line(&mut line).await?;
                let size = line.trim_end().split(';').next().unwrap_or_default();
                let size = usize::from_str_radix(size, 16).with_context(|| format!("a chunk size {line:?}"))?;
                ensure!(answer.len() + size <= BODY_BYTES_MAX, "an answer over {BODY_BYTES_MAX} bytes");
                let at = answer.len();
                answer.resize(at + size, 0);
                stream.read_exact(&mut answer[at..]).await?;
                line.clear();
                stream.read_line(&mut line).await?;
                if size == 0 {
                    // Trailers, if any, end with an empty line; this client sends none
                    // and expects none beyond that line.
                    ensure!(line.trim_end().is_empty(), "trailers after the last chunk: {line:?}");
                    break;
                }
            }
        } else {
            let length = length.context("an answer with neither a Content-Length nor chunks")?;
            ensure!(length <= BODY_BYTES_MAX, "an answer of {length} bytes");
            answer.resize(length, 0);
            stream.read_exact(&mut answer).await?;
        }
        Ok((status, answer))
    }
}
