//! The log's spans in a caller's trace, with every message on QUIC (as between
//! processes): a traced append yields the engine's span under the caller's, and under it
//! the ordering and each storage replica's write and fsync; an untraced one yields none.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_logsvc::trace::{traced, LogSpan, SpanRef, SpanSink};
use tally_logsvc::{BookId, ClusterBuilder, Context, Tag};

#[derive(Default)]
struct Collected(Mutex<Vec<LogSpan>>);

impl SpanSink for Collected {
    fn span(&self, span: LogSpan) {
        self.0.lock().unwrap().push(span);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_traced_append_is_spans_of_its_engine_and_every_replica_over_quic() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ClusterBuilder::new(dir.path());
    b.local_delivery = false;
    let replicas = b.n_data;
    let cluster = b.build().await.unwrap();
    let collected = Arc::new(Collected::default());
    cluster.spans().set(collected.clone());
    let client = cluster.client(0);
    let mut ctx = Context::new();

    client.append(&mut ctx, BookId(1), &[Tag(1)], Bytes::from_static(b"untraced")).await.unwrap();
    let parent = SpanRef { trace: [7; 16], span: [9; 8] };
    let seqnum =
        traced(Some(parent), client.append(&mut ctx, BookId(1), &[Tag(1)], Bytes::from_static(b"traced"))).await.unwrap();

    // The engine's span ends with the append; the replicas' as each one's fsync does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let spans = loop {
        let spans = collected.0.lock().unwrap().clone();
        if spans.iter().filter(|s| s.name == "log.store").count() == replicas && spans.iter().any(|s| s.name == "log.order") {
            break spans;
        }
        assert!(Instant::now() < deadline, "spans so far: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(spans.iter().all(|s| s.parent.trace == parent.trace), "only the traced append: {spans:#?}");
    let append: Vec<&LogSpan> = spans.iter().filter(|s| s.name == "log.append").collect();
    assert_eq!(append.len(), 1, "{spans:#?}");
    let append = append[0];
    assert_eq!(append.parent, parent);
    assert!(append.attributes.contains(&("tally.log.seqnum", seqnum.0)), "{append:?}");
    for s in spans.iter().filter(|s| s.name != "log.append") {
        assert_eq!(s.parent, SpanRef { trace: parent.trace, span: append.span }, "{s:?}");
        assert!(s.start_unix_ns >= append.start_unix_ns && s.end_unix_ns <= append.end_unix_ns + 1_000_000_000, "{s:?}");
    }
    let ids: std::collections::HashSet<[u8; 8]> = spans.iter().map(|s| s.span).collect();
    assert_eq!(ids.len(), spans.len(), "span IDs are unique");
    cluster.shutdown().await;
}
