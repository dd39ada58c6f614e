//! A guest's stdout or stderr: kept as lines, each with the time its last byte was
//! written, up to a bound of bytes per attempt; past it the oldest lines go first, and
//! writes never fail, so a guest that prints without end runs on (wasmtime-wasi's memory
//! pipe fails writes once full, which makes a Rust `println!` panic).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// A partial line longer than this is a line of its own.
const LINE_BYTES_MAX: usize = 16 << 10;
/// What `check-write` grants at once: writes never block.
const WRITE_PERMIT: usize = 64 << 10;

/// One line a guest wrote (without its newline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub at_ms: u64,
    pub text: String,
}

#[derive(Debug, Default)]
struct Lines {
    done: VecDeque<Line>,
    /// Bytes of `done`.
    bytes: usize,
    partial: Vec<u8>,
    /// Bytes let go past the bound.
    dropped: u64,
}

/// One stream of one instance; clones share it.
#[derive(Clone, Debug)]
pub struct GuestOutput {
    lines: Arc<Mutex<Lines>>,
    bytes_max: usize,
}

impl GuestOutput {
    pub fn new(bytes_max: usize) -> GuestOutput {
        GuestOutput { lines: Arc::default(), bytes_max }
    }

    fn push(&self, mut bytes: &[u8]) {
        let now = crate::clock::wall_ns() / 1_000_000;
        let mut l = self.lines.lock().expect("not poisoned");
        while !bytes.is_empty() {
            let room = LINE_BYTES_MAX - l.partial.len();
            let (take, newline) = match bytes.iter().take(room).position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (bytes.len().min(room), bytes.len() >= room),
            };
            l.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if newline {
                self.finish_line(&mut l, now);
            }
        }
    }

    fn finish_line(&self, l: &mut Lines, at_ms: u64) {
        let raw = std::mem::take(&mut l.partial);
        let text = String::from_utf8_lossy(raw.strip_suffix(b"\n").unwrap_or(&raw)).trim_end_matches('\r').to_string();
        l.bytes += text.len();
        l.done.push_back(Line { at_ms, text });
        while l.bytes > self.bytes_max {
            let Some(old) = l.done.pop_front() else { break };
            l.bytes -= old.text.len();
            l.dropped += old.text.len() as u64;
        }
    }

    /// The lines kept, an unfinished last line included, and the bytes let go.
    pub fn take(&self) -> (Vec<Line>, u64) {
        let mut l = self.lines.lock().expect("not poisoned");
        if !l.partial.is_empty() {
            self.finish_line(&mut l, crate::clock::wall_ns() / 1_000_000);
        }
        l.bytes = 0;
        (l.done.drain(..).collect(), std::mem::take(&mut l.dropped))
    }

    /// The last `n` non-empty lines kept (for a trap's message).
    pub fn tail(&self, n: usize) -> Vec<String> {
        let l = self.lines.lock().expect("not poisoned");
        let partial = String::from_utf8_lossy(&l.partial).trim().to_string();
        let lines = l.done.iter().map(|line| line.text.trim().to_string()).chain(std::iter::once(partial));
        let mut lines: Vec<String> = lines.filter(|t| !t.is_empty()).collect();
        lines.drain(..lines.len().saturating_sub(n));
        lines
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

impl Pollable for GuestOutput {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
    {
        Box::pin(async {})
    }
}

impl AsyncWrite for GuestOutput {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_bounded_oldest_first_and_never_refused() {
        let mut out = GuestOutput::new(10);
        out.write(Bytes::from_static(b"one\ntw")).unwrap();
        out.write(Bytes::from_static(b"o\r\nthree\n")).unwrap();
        assert_eq!(out.tail(2), ["two", "three"]);
        let (lines, dropped) = out.take();
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["two", "three"], "the oldest line went past the bound");
        assert_eq!(dropped, 3);
        // A guest that prints without end: every write is taken, the bound holds.
        for _ in 0..10_000 {
            assert_eq!(out.check_write().unwrap(), WRITE_PERMIT);
            out.write(Bytes::from_static(b"spam spam\n")).unwrap();
        }
        out.write(Bytes::from_static(b"last")).unwrap();
        let (lines, dropped) = out.take();
        assert_eq!(lines.iter().map(|l| l.text.len()).sum::<usize>(), 4, "{lines:?}");
        assert_eq!(lines.last().unwrap().text, "last");
        assert_eq!(dropped, 9 * 10_000);
        // A line without a newline is cut at LINE_BYTES_MAX.
        let out = GuestOutput::new(1 << 20);
        out.push(&vec![b'x'; LINE_BYTES_MAX * 2 + 1]);
        let (lines, _) = out.take();
        assert_eq!(lines.iter().map(|l| l.text.len()).collect::<Vec<_>>(), [LINE_BYTES_MAX, LINE_BYTES_MAX, 1]);
    }
}
