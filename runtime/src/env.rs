//! The exactly-once core's interfaces on the real thing: the engine's platform log
//! client, tokio's clock and tasks. (The wasmtime side is `functions.rs`.)

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_durable::{BoxFuture, Clock, Log, LogResult, Spawn};
use tally_logsvc::{BookId, Context, LogClient, LogRecord, SeqNum, Tag};
use tracing::Instrument;

/// The log with the platform's privileges, as the core sees it.
pub struct PlatformLog(pub LogClient);

impl Log for PlatformLog {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.0.append(ctx, book, tags, data))
    }

    fn cond_append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        Box::pin(self.0.cond_append(ctx, book, tags, data, cond_tag, cond_position))
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.0.read_next(ctx, book, tag, min))
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(self.0.read_prev(ctx, book, tag, max))
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(self.0.trim(ctx, book, tag, seqnum))
    }
}

/// tokio's clock (milliseconds since the process's first use of it) and tasks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tokio;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Tokio {
    /// The instant of a time on the core's clock.
    pub fn instant(ms: u64) -> Instant {
        origin() + Duration::from_millis(ms)
    }
}

impl Clock for Tokio {
    fn now_ms(&self) -> u64 {
        origin().elapsed().as_millis() as u64
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

impl Spawn for Tokio {
    fn spawn(&self, name: &'static str, task: BoxFuture<'static, ()>) {
        tokio::spawn(task.instrument(tracing::info_span!("task", name)));
    }
}
