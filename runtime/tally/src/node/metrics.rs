//! `GET /metrics` of a `tally node` process's index and aggregator roles (partial mode),
//! served on `node.toml`'s `metrics` address: they run inside storage and sequencer
//! processes, which have no HTTP API of their own, nor the log's tokens; a scrape sends
//! the cluster's metrics token (`ca/metrics.token`) as a bearer token.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tally_logsvc::driver::{AggregatorProbe, AggregatorReport, IndexProbe};
use tally_logsvc::tier::IndexNodeReport;

/// The process's roles that report to `/metrics`.
#[derive(Clone, Default)]
pub struct Probes {
    pub index: Vec<IndexProbe>,
    pub aggregators: Vec<AggregatorProbe>,
}

/// The router of the metrics address: `/metrics` only, for holders of `token`.
pub fn router(probes: Probes, token: String) -> axum::Router {
    axum::Router::new().route("/metrics", get(metrics)).with_state((probes, token))
}

async fn metrics(State((probes, token)): State<(Probes, String)>, headers: HeaderMap) -> Response {
    let sent = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !sent.is_some_and(|s| crate::auth::equal_in_constant_time(s.as_bytes(), token.as_bytes())) {
        return (StatusCode::UNAUTHORIZED, "a scrape of this address needs the cluster's metrics token\n").into_response();
    }
    let mut reports = Vec::new();
    for p in &probes.index {
        reports.extend(p.report().await);
    }
    let mut text = render(&reports);
    let aggregators: Vec<AggregatorReport> = probes.aggregators.iter().map(AggregatorProbe::report).collect();
    if !aggregators.is_empty() {
        text += &render_aggregators(&aggregators);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The Prometheus text of aggregator `reports`, one series per aggregator.
pub fn render_aggregators(reports: &[AggregatorReport]) -> String {
    type Value = fn(&AggregatorReport) -> u64;
    let series: [(&str, &str, &str, Value); 6] = [
        ("tally_aggregator_in_flight", "gauge", "Lookups being gathered now.", |r| r.in_flight as u64),
        ("tally_aggregator_answers_total", "counter", "Index shards' answers received.", |r| r.stats.answers),
        ("tally_aggregator_done_total", "counter", "Lookups combined and answered to their caller.", |r| r.stats.done),
        ("tally_aggregator_restarts_total", "counter", "Lookups sent back to their caller to ask again (TooOld).", |r| {
            r.stats.restarts
        }),
        ("tally_aggregator_refused_total", "counter", "Answers refused (not from the tier, or another shard count).", |r| {
            r.stats.refused
        }),
        ("tally_aggregator_expired_total", "counter", "Lookups dropped unanswered after the gather time.", |r| r.stats.expired),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in series {
        write_series(&mut out, name, kind, help, reports.iter().map(|r| (r.id.0, value(r).to_string())));
    }
    out
}

fn write_series(out: &mut String, name: &str, kind: &str, help: &str, values: impl Iterator<Item = (u32, String)>) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (node, v) in values {
        let _ = writeln!(out, "{name}{{node=\"{node}\"}} {v}");
    }
}

/// The Prometheus text of `reports`, one series per index node (`node="<id>"`).
pub fn render(reports: &[IndexNodeReport]) -> String {
    type Value = fn(&IndexNodeReport) -> u64;
    let series: [(&str, &str, &str, Value); 14] = [
        ("tally_index_node_shard", "gauge", "The index shard this node replicates; -1 for a spare.", |r| {
            r.shard.map_or(u64::MAX, |s| s as u64)
        }),
        ("tally_index_node_streams", "gauge", "Streams (book, tag) in the node's stream table.", |r| r.streams as u64),
        ("tally_index_node_stream_table_bytes", "gauge", "Heap bytes of the stream table (all resident).", |r| {
            r.stream_table_bytes as u64
        }),
        (
            "tally_index_node_postings_bytes",
            "gauge",
            "About the heap bytes of the shard's postings (all resident, counted as they change).",
            |r| r.postings_bytes as u64,
        ),
        ("tally_index_node_held", "gauge", "Requests held now until the node reaches their position.", |r| r.held as u64),
        ("tally_index_node_requests_total", "counter", "Lookups, holder lookups and aux data received.", |r| r.stats.requests),
        ("tally_index_node_answered_total", "counter", "Requests answered.", |r| r.stats.answered),
        ("tally_index_node_refused_total", "counter", "Requests refused (not this node's shard, no configuration).", |r| {
            r.stats.refused
        }),
        ("tally_index_node_expired_total", "counter", "Requests held too long or pushed out, unanswered.", |r| r.stats.expired),
        ("tally_index_node_held_seconds_total", "counter", "Time answered requests waited for the node's position.", |r| {
            r.stats.held_us
        }),
        (
            "tally_index_node_storage_reads_total",
            "counter",
            "Records storage was asked to send a lookup's caller (type 2).",
            |r| r.stats.storage_reads,
        ),
        ("tally_index_node_copies_given_total", "counter", "Copies of the node's state given to a new replica.", |r| {
            r.stats.copies_given
        }),
        ("tally_index_node_copies_taken_total", "counter", "Times the node started from a replica's copy.", |r| {
            r.stats.copies_taken
        }),
        ("tally_index_node_replays_total", "counter", "Times the node replayed the log (no replica gave a copy).", |r| {
            r.stats.replays
        }),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in series {
        let shown = reports.iter().map(|r| {
            let v = value(r);
            let shown = match name {
                "tally_index_node_shard" if v == u64::MAX => "-1".to_string(),
                "tally_index_node_held_seconds_total" => format!("{}", v as f64 / 1e6),
                _ => v.to_string(),
            };
            (r.id.0, shown)
        });
        write_series(&mut out, name, kind, help, shown);
    }
    out
}

#[cfg(test)]
mod tests {
    use tally_logsvc::tier::IndexNodeStats;
    use tally_logsvc::NodeId;

    use super::*;

    #[test]
    fn every_series_names_its_node_and_a_spare_shows_no_shard() {
        let stats = IndexNodeStats { requests: 5, held_us: 1_500_000, ..IndexNodeStats::default() };
        let report = |id, shard| IndexNodeReport {
            id: NodeId(id),
            stats,
            shard,
            streams: 3,
            stream_table_bytes: 100,
            postings_bytes: 200,
            held: 0,
        };
        let text = render(&[report(7, Some(1)), report(9, None)]);
        assert!(text.contains("tally_index_node_shard{node=\"7\"} 1\n"), "{text}");
        assert!(text.contains("tally_index_node_shard{node=\"9\"} -1\n"), "{text}");
        assert!(text.contains("tally_index_node_postings_bytes{node=\"7\"} 200\n"), "{text}");
        assert!(text.contains("tally_index_node_requests_total{node=\"9\"} 5\n"), "{text}");
        assert!(text.contains("tally_index_node_held_seconds_total{node=\"7\"} 1.5\n"), "{text}");
        assert_eq!(text.matches("# TYPE").count(), 14);
    }

    #[test]
    fn aggregator_series_name_their_node() {
        use tally_logsvc::tier::AggregatorStats;
        let stats = AggregatorStats { done: 4, expired: 1, ..AggregatorStats::default() };
        let text = render_aggregators(&[AggregatorReport { id: NodeId(12), stats, in_flight: 2 }]);
        assert!(text.contains("tally_aggregator_done_total{node=\"12\"} 4\n"), "{text}");
        assert!(text.contains("tally_aggregator_expired_total{node=\"12\"} 1\n"), "{text}");
        assert!(text.contains("tally_aggregator_in_flight{node=\"12\"} 2\n"), "{text}");
    }
}
