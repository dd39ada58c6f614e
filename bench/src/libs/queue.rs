//! The `libs` suite's queue part: examples/pipeline's `produce` and `consume` on one
//! queue of a dev node against Redis streams with a consumer group (see `mod.rs`).
//!
//! Besides throughput and delivery latency, where a message's time goes: the p50 and p99
//! of the producers' calls (`produce_call_*`: an invocation of 8 pushes, an `XADD`) and
//! of the consumers' calls that got messages (`consume_call_*`: an invocation of a pop
//! of up to 8, an `XREADGROUP` and its `XACK`), and on Tally the mean of each part of
//! the consumers' `Server-Timing` (`consume_server_<part>`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use serde_json::Value;
use tokio::task::JoinSet;

use super::{invoke, json, now_us, Node, Plan};
use crate::http::Http;
use crate::peers::{Redis, RedisConn, Resp};
use crate::report::{micros, round_to, Latencies, Report};

/// The book of the queues on the dev node.
const QUEUE_BOOK: u64 = 31;
/// Producers and consumers: Boki Table 6's P:C of 1:4, 4:1 and 1:1.
const QUEUE_SHAPES: [(usize, usize); 3] = [(4, 16), (16, 4), (8, 8)];
const MESSAGE_BYTES: usize = 1024;
/// Messages a producer invocation pushes, and a consumer invocation pops at most.
const BATCH: u64 = 8;
/// How long a consumer's pop waits for a message.
const POP_TIMEOUT_MS: u64 = 100;

/// The parts of `Server-Timing` a consumer's invocation spends time in, and their metrics.
const CONSUME_PARTS: [(&str, &str); 7] = [
    ("queue", "consume_server_queue"),
    ("instantiate", "consume_server_instantiate"),
    ("guest", "consume_server_guest"),
    ("host-queues", "consume_server_host_queues"),
    ("log", "consume_server_log"),
    ("platform", "consume_server_platform"),
    ("total", "consume_server_total"),
];

/// What one run of producers and consumers on a fresh queue measured.
#[derive(Default)]
struct QueueSamples {
    /// Delivery latencies of the messages consumed within the window.
    latencies_us: Vec<u32>,
    /// Latencies of the producers' and the consumers' calls within the window.
    produce_us: Vec<u32>,
    consume_us: Vec<u32>,
    /// Each part of the consumers' `Server-Timing` (Tally), summed in µs.
    consume_parts: BTreeMap<String, f64>,
    window: Duration,
}

/// What a producer did: how many messages, and its calls' latencies within the window.
#[derive(Default)]
struct Produced {
    count: u64,
    calls_us: Vec<u32>,
}

/// What a consumer saw: latencies within the window, and the ID of every message; its
/// calls' latencies within the window and their `Server-Timing` parts.
#[derive(Default)]
struct Consumed {
    latencies_us: Vec<u32>,
    ids: Vec<String>,
    calls_us: Vec<u32>,
    parts: BTreeMap<String, f64>,
}

#[derive(Clone, Copy)]
enum QueueTarget {
    Tally,
    Redis,
}

impl QueueTarget {
    fn name(self) -> &'static str {
        match self {
            QueueTarget::Tally => "tally",
            QueueTarget::Redis => "redis",
        }
    }
}

pub(super) async fn queues(component: Vec<u8>, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    let node = Node::start(true).await?;
    let invoke_url = node.deploy("pipeline", component, QUEUE_BOOK).await?;
    let redis = tokio::task::spawn_blocking(Redis::start).await?.context("starting Redis")?;
    eprintln!("libs: queue: redis-server {} on {}, appendfsync always", redis.version, redis.addr);
    let targets = [QueueTarget::Tally, QueueTarget::Redis];
    for (producers, consumers) in QUEUE_SHAPES {
        eprintln!(
            "libs: queue P={producers} C={consumers}: {} interleaved runs of {} ms per target",
            plan.slices,
            plan.queue_window.as_millis()
        );
        let mut samples: Vec<QueueSamples> = targets.iter().map(|_| QueueSamples::default()).collect();
        for round in 0..plan.slices as usize {
            for k in 0..targets.len() {
                let i = (round + k) % targets.len();
                let queue = format!("q-p{producers}-c{consumers}-{round}");
                let shape = Shape { producers, consumers, from: plan.slice_warmup, window: plan.queue_window };
                let (produced, produced_calls, consumed) = match targets[i] {
                    QueueTarget::Tally => shape.run(TallyQueue { invoke_url: invoke_url.clone(), queue: queue.clone() }).await?,
                    QueueTarget::Redis => {
                        let mut conn = RedisConn::connect(redis.addr).await?;
                        conn.call(&[b"XGROUP", b"CREATE", queue.as_bytes(), b"g", b"$", b"MKSTREAM"]).await?;
                        shape.run(RedisQueue { redis: redis.addr, stream: queue.clone() }).await?
                    }
                };
                let mut ids = BTreeSet::new();
                for c in &consumed {
                    for id in &c.ids {
                        ensure!(ids.insert(id), "{}: {queue}: message {id} delivered twice", targets[i].name());
                    }
                }
                ensure!(
                    ids.len() as u64 == produced,
                    "{}: {queue}: {produced} messages produced, {} delivered",
                    targets[i].name(),
                    ids.len()
                );
                samples[i].produce_us.extend(produced_calls);
                for c in consumed {
                    samples[i].latencies_us.extend(c.latencies_us);
                    samples[i].consume_us.extend(c.calls_us);
                    for (part, us) in c.parts {
                        *samples[i].consume_parts.entry(part).or_default() += us;
                    }
                }
                samples[i].window += plan.queue_window - plan.slice_warmup;
            }
        }
        let case = |target: QueueTarget| format!("{} P={producers} C={consumers}", target.name());
        for (target, samples) in targets.iter().zip(samples) {
            let case = case(*target);
            let throughput = samples.latencies_us.len() as f64 / samples.window.as_secs_f64();
            report.record(&case, "queue_throughput", throughput.round(), "msgs/s")?;
            let latencies = Latencies::new(samples.latencies_us);
            let delivery = ["queue_delivery_latency_p50", "queue_delivery_latency_p99"];
            crate::log::record_percentiles(report, &case, delivery, &latencies)?;
            // Where a message's time goes: the calls that push and pop it.
            let calls = samples.consume_us.len().max(1) as f64;
            let produce = Latencies::new(samples.produce_us);
            crate::log::record_percentiles(report, &case, ["produce_call_p50", "produce_call_p99"], &produce)?;
            let consume = Latencies::new(samples.consume_us);
            crate::log::record_percentiles(report, &case, ["consume_call_p50", "consume_call_p99"], &consume)?;
            if !samples.consume_parts.is_empty() {
                for (part, metric) in CONSUME_PARTS {
                    let us = samples.consume_parts.get(part).copied().unwrap_or(0.0);
                    report.record(&case, metric, round_to(us / calls, 1), "us")?;
                }
            }
        }
        let throughput = |target| report.value(&case(target), "queue_throughput").expect("recorded above");
        let ratio = round_to(throughput(QueueTarget::Tally) / throughput(QueueTarget::Redis).max(1.0), 2);
        report.record(&case(QueueTarget::Tally), "queue_vs_redis", ratio, "x")?;
    }
    eprintln!("libs: queue: every message of every run was delivered exactly once, on both");
    node.node.shutdown().await;
    drop(redis);
    Ok(())
}

/// A queue the producers and consumers of a run share.
trait Queue: Send + Sync + 'static {
    /// A producer: pushes messages until `end`; how many, and its calls' latencies
    /// after `from`.
    fn produce(
        &self,
        producer: usize,
        from: Instant,
        end: Instant,
    ) -> impl std::future::Future<Output = anyhow::Result<Produced>> + Send;
    /// A consumer: pops until the queue is found empty after `stopped` (every producer
    /// finished); what it popped, latencies counted for pops that end in `from..end`.
    fn consume(
        &self,
        consumer: usize,
        from: Instant,
        end: Instant,
        stopped: &AtomicBool,
    ) -> impl std::future::Future<Output = anyhow::Result<Consumed>> + Send;
}

/// One run: how many producers and consumers, for how long.
struct Shape {
    producers: usize,
    consumers: usize,
    /// When counting starts, after the start.
    from: Duration,
    window: Duration,
}

impl Shape {
    /// Runs the producers for the window and the consumers until the queue is drained,
    /// each a task; what was produced and what each consumer consumed.
    async fn run(&self, queue: impl Queue) -> anyhow::Result<(u64, Vec<u32>, Vec<Consumed>)> {
        let queue = Arc::new(queue);
        let start = Instant::now();
        let (from, end) = (start + self.from, start + self.window);
        let stopped = Arc::new(AtomicBool::new(false));
        let mut consumers = JoinSet::new();
        for c in 0..self.consumers {
            let (queue, stopped) = (queue.clone(), stopped.clone());
            consumers.spawn(async move { queue.consume(c, from, end, &stopped).await });
        }
        let mut producers = JoinSet::new();
        for p in 0..self.producers {
            let queue = queue.clone();
            producers.spawn(async move { queue.produce(p, from, end).await });
        }
        let (mut produced, mut calls_us) = (0, Vec::new());
        while let Some(joined) = producers.join_next().await {
            let p = joined.context("a producer panicked")??;
            produced += p.count;
            calls_us.extend(p.calls_us);
        }
        stopped.store(true, Ordering::SeqCst);
        let mut consumed = Vec::new();
        while let Some(joined) = consumers.join_next().await {
            consumed.push(joined.context("a consumer panicked")??);
        }
        Ok((produced, calls_us, consumed))
    }
}

/// The pipeline example's `produce` and `consume` on one queue of the dev node.
struct TallyQueue {
    invoke_url: String,
    queue: String,
}

impl Queue for TallyQueue {
    async fn produce(&self, producer: usize, from: Instant, end: Instant) -> anyhow::Result<Produced> {
        let mut http = Http::new(&self.invoke_url)?;
        let mut produced = Produced::default();
        let input = format!("produce {} {BATCH} {MESSAGE_BYTES}", self.queue);
        while Instant::now() < end {
            let key = format!("{}-p{producer}-{}", self.queue, produced.count);
            let start = Instant::now();
            let answer = json(&invoke(&mut http, &input, Some(&key)).await?)?;
            if start >= from {
                produced.calls_us.push(micros(start.elapsed()));
            }
            ensure!(answer["pushed"] == BATCH, "{input} answered {answer}");
            produced.count += BATCH;
        }
        Ok(produced)
    }

    async fn consume(&self, consumer: usize, from: Instant, end: Instant, stopped: &AtomicBool) -> anyhow::Result<Consumed> {
        let mut http = Http::new(&self.invoke_url)?;
        let mut consumed = Consumed::default();
        let input = format!("consume {} {BATCH} {POP_TIMEOUT_MS}", self.queue);
        for n in 0.. {
            let after_producers = stopped.load(Ordering::SeqCst);
            let key = format!("{}-c{consumer}-{n}", self.queue);
            let start = Instant::now();
            let answer = json(&invoke(&mut http, &input, Some(&key)).await?)?;
            // Delivered when the consumer's client has the answer, as with Redis.
            let (popped_us, done) = (now_us(), Instant::now());
            let (ids, pushed) = (answer["ids"].as_array(), answer["pushed_us"].as_array());
            let (Some(ids), Some(pushed)) = (ids, pushed) else { bail!("{input} answered {answer}") };
            // A call that got messages (as Redis's, below).
            if (from..end).contains(&start) && !ids.is_empty() {
                consumed.calls_us.push(micros(done - start));
                super::read_only::add_parts(&mut consumed.parts, &http.timing);
            }
            if (from..end).contains(&done) {
                let latency =
                    |t: &Value| t.as_u64().map_or(u32::MAX, |t| popped_us.saturating_sub(t).min(u32::MAX.into()) as u32);
                consumed.latencies_us.extend(pushed.iter().map(latency));
            }
            consumed.ids.extend(ids.iter().map(|id| id.as_str().unwrap_or_default().to_owned()));
            if ids.is_empty() && after_producers {
                break;
            }
        }
        Ok(consumed)
    }
}

/// A Redis stream with the consumer group `g`.
struct RedisQueue {
    redis: SocketAddr,
    stream: String,
}

impl Queue for RedisQueue {
    async fn produce(&self, producer: usize, from: Instant, end: Instant) -> anyhow::Result<Produced> {
        let mut conn = RedisConn::connect(self.redis).await?;
        let mut produced = Produced::default();
        while Instant::now() < end {
            // As the pipeline example's messages: push time, ID, hops, padding.
            let mut message = format!("{} p{producer}:{} 0 ", now_us(), produced.count);
            message.extend(std::iter::repeat_n('x', MESSAGE_BYTES.saturating_sub(message.len())));
            let start = Instant::now();
            let reply = conn.call(&[b"XADD", self.stream.as_bytes(), b"*", b"d", message.as_bytes()]).await?;
            if start >= from {
                produced.calls_us.push(micros(start.elapsed()));
            }
            ensure!(matches!(reply, Resp::Bulk(Some(_))), "XADD answered {reply:?}");
            produced.count += 1;
        }
        Ok(produced)
    }

    async fn consume(&self, consumer: usize, from: Instant, end: Instant, stopped: &AtomicBool) -> anyhow::Result<Consumed> {
        let mut conn = RedisConn::connect(self.redis).await?;
        let mut consumed = Consumed::default();
        let (name, count, block) = (format!("c{consumer}"), BATCH.to_string(), POP_TIMEOUT_MS.to_string());
        let stream = self.stream.as_bytes();
        loop {
            let after_producers = stopped.load(Ordering::SeqCst);
            let start = Instant::now();
            let reply = conn
                .call(&[
                    b"XREADGROUP",
                    b"GROUP",
                    b"g",
                    name.as_bytes(),
                    b"COUNT",
                    count.as_bytes(),
                    b"BLOCK",
                    block.as_bytes(),
                    b"STREAMS",
                    stream,
                    b">",
                ])
                .await?;
            let popped_us = now_us();
            let done = Instant::now();
            let entries = stream_entries(reply)?;
            if entries.is_empty() {
                if after_producers {
                    return Ok(consumed);
                }
                continue;
            }
            let mut ack: Vec<&[u8]> = vec![b"XACK", stream, b"g"];
            for (entry_id, message) in &entries {
                let text = std::str::from_utf8(message).context("a message that is not UTF-8")?;
                let mut fields = text.splitn(3, ' ');
                let pushed_us: u64 =
                    fields.next().unwrap_or_default().parse().with_context(|| format!("a message {text:.40}"))?;
                if (from..end).contains(&done) {
                    consumed.latencies_us.push(u32::try_from(popped_us.saturating_sub(pushed_us)).unwrap_or(u32::MAX));
                }
                consumed.ids.push(fields.next().unwrap_or_default().to_owned());
                ack.push(entry_id);
            }
            let acked = conn.call(&ack).await?;
            ensure!(acked == Resp::Integer(entries.len() as i64), "XACK of {} entries answered {acked:?}", entries.len());
            if (from..end).contains(&start) {
                consumed.calls_us.push(micros(start.elapsed()));
            }
        }
    }
}

/// The (entry ID, field `d`) pairs of an XREADGROUP reply on one stream: nothing when
/// the read timed out.
fn stream_entries(reply: Resp) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let streams = match reply {
        Resp::Array(None) => return Ok(Vec::new()),
        Resp::Array(Some(streams)) => streams,
        other => bail!("XREADGROUP answered {other:?}"),
    };
    let mut entries = Vec::new();
    for stream in streams {
        let Resp::Array(Some(mut pair)) = stream else { bail!("XREADGROUP answered a stream {stream:?}") };
        let Some(Resp::Array(Some(list))) = pair.pop() else { bail!("XREADGROUP answered a stream without entries") };
        for entry in list {
            match entry {
                Resp::Array(Some(entry)) => match <[Resp; 2]>::try_from(entry) {
                    Ok([Resp::Bulk(Some(id)), Resp::Array(Some(fields))]) => match <[Resp; 2]>::try_from(fields) {
                        Ok([_, Resp::Bulk(Some(data))]) => entries.push((id, data)),
                        Ok(fields) => bail!("an entry with fields {fields:?}"),
                        Err(fields) => bail!("an entry with fields {fields:?}"),
                    },
                    Ok(entry) => bail!("an entry {entry:?}"),
                    Err(entry) => bail!("an entry {entry:?}"),
                },
                other => bail!("an entry {other:?}"),
            }
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Resp {
        Resp::Bulk(Some(text.as_bytes().to_vec()))
    }

    #[test]
    fn stream_entries_reads_an_xreadgroup_reply() {
        assert_eq!(stream_entries(Resp::Array(None)).unwrap(), Vec::new());
        let entry = |id: &str, data: &str| Resp::Array(Some(vec![bulk(id), Resp::Array(Some(vec![bulk("d"), bulk(data)]))]));
        let reply = Resp::Array(Some(vec![Resp::Array(Some(vec![
            bulk("q"),
            Resp::Array(Some(vec![entry("1-0", "10 p0:0 0 x"), entry("1-1", "11 p0:1 0 x")])),
        ]))]));
        let want = vec![(b"1-0".to_vec(), b"10 p0:0 0 x".to_vec()), (b"1-1".to_vec(), b"11 p0:1 0 x".to_vec())];
        assert_eq!(stream_entries(reply).unwrap(), want);
        assert!(stream_entries(Resp::Integer(1)).is_err());
        let fieldless = Resp::Array(Some(vec![Resp::Array(Some(vec![
            bulk("q"),
            Resp::Array(Some(vec![Resp::Array(Some(vec![bulk("1-0")]))])),
        ]))]));
        assert!(stream_entries(fieldless).is_err());
    }
}
