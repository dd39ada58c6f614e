//! `tally dev`: its flags (every key of the configuration file has one) and the command
//! that runs a development node until Ctrl-C.

use std::path::PathBuf;

use clap::Args;
use tally::dev::DevNode;
use tally_runtime::config::{IndexMode, Protocol, StoreKind};
use tally_runtime::Config;

use crate::init_tracing;

#[derive(Args)]
pub struct DevArgs {
    /// A TOML configuration file; flags override its keys.
    #[arg(long, short)]
    config: Option<PathBuf>,
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The gateway's address (port 0 picks a free one).
    #[arg(long)]
    listen: Option<String>,
    /// Where compiled components are kept (default: <data-dir>/artifacts).
    #[arg(long)]
    artifacts_dir: Option<PathBuf>,
    /// Default linear memory of a function, in bytes.
    #[arg(long)]
    memory_bytes: Option<u64>,
    /// Default wall time of an invocation, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
    #[arg(long)]
    request_bytes_max: Option<u64>,
    #[arg(long)]
    response_bytes_max: Option<u64>,
    /// Default instances of one function running at once.
    #[arg(long)]
    concurrency_max: Option<u32>,
    /// Instances alive at once on the node.
    #[arg(long)]
    instances_max: Option<u32>,
    /// The largest memory a function may ask for.
    #[arg(long)]
    memory_bytes_max: Option<u64>,
    #[arg(long)]
    component_bytes_max: Option<u64>,
    #[arg(long)]
    call_depth_max: Option<u32>,
    #[arg(long)]
    invocations_kept: Option<usize>,
    /// Linear memory of an instance slot kept resident for the next instance (0: off).
    #[arg(long)]
    memory_keep_resident_bytes: Option<u64>,
    /// Bytes of full index chunks each index keeps in memory; older ones are spilled to
    /// a scratch file (0: spill every full chunk).
    #[arg(long)]
    index_resident_bytes: Option<u64>,
    /// How the log is indexed: complete (every function node indexes whole logs) or
    /// partial (index nodes hold the complete index; function nodes a bounded one).
    #[arg(long)]
    index_mode: Option<IndexMode>,
    /// Partial mode: index shards and replicas of each (in this process).
    #[arg(long)]
    index_shards: Option<usize>,
    #[arg(long)]
    index_replicas: Option<usize>,
    /// Partial mode: whether this node keeps a local index, and its bounds in bytes.
    #[arg(long)]
    local_index: Option<bool>,
    #[arg(long)]
    local_suffix_bytes: Option<usize>,
    #[arg(long)]
    local_tag_cache_bytes: Option<usize>,
    #[arg(long)]
    local_tag_bytes_max: Option<usize>,
    #[arg(long)]
    local_popularity_bytes: Option<usize>,
    /// Where function state lives: rocksdb (under the data dir) or postgres.
    #[arg(long)]
    state_store: Option<StoreKind>,
    /// The PostgreSQL connection string, for --state-store postgres.
    #[arg(long)]
    postgres: Option<String>,
    /// The protocol of state tables no deploy names: read-optimized, write-optimized,
    /// symmetric, unsafe or auto.
    #[arg(long)]
    protocol: Option<Protocol>,
    /// Test hook: honour the Tally-Crash-After header.
    #[arg(long)]
    crash_injection: Option<bool>,
    /// How long past its timeout an unfinished invocation waits to be run again, in ms.
    #[arg(long)]
    reexecute_after_ms: Option<u64>,
    /// Default attempts of an invocation whose guest traps, the first included.
    #[arg(long)]
    retry_attempts: Option<u32>,
    /// Default wait before the second attempt, in ms (doubling after).
    #[arg(long)]
    retry_backoff_ms: Option<u64>,
    /// Default longest wait between attempts, in ms.
    #[arg(long)]
    retry_backoff_max_ms: Option<u64>,
    /// The largest timeout_ms a deploy may set.
    #[arg(long)]
    function_timeout_ms_max: Option<u64>,
    /// The largest request_bytes_max a deploy may set.
    #[arg(long)]
    function_request_bytes_max: Option<u64>,
    /// The largest response_bytes_max a deploy may set.
    #[arg(long)]
    function_response_bytes_max: Option<u64>,
    /// Requests out of guests in flight at once.
    #[arg(long)]
    outgoing_in_flight_max: Option<u32>,
    /// The longest a request out may take to connect, to answer, or between two parts.
    #[arg(long)]
    outgoing_timeout_ms_max: Option<u64>,
    /// The largest body a request out may carry.
    #[arg(long)]
    outgoing_request_bytes_max: Option<u64>,
    /// The largest response a request out may get (logged whole: at most 786432).
    #[arg(long)]
    outgoing_response_bytes_max: Option<u64>,
    /// A name the node answers itself for requests out, before DNS, e.g.
    /// --outgoing-hosts api.internal=10.0.0.7 (repeatable; several addresses: a,b).
    #[arg(long = "outgoing-hosts", value_name = "NAME=IP[,IP]")]
    outgoing_hosts: Vec<String>,
    /// Bytes of functions' logs the node keeps (tally logs), the oldest going first.
    #[arg(long)]
    logs_bytes_max: Option<u64>,
    /// Bytes of each of stdout and stderr one attempt keeps.
    #[arg(long)]
    logs_invocation_bytes_max: Option<u64>,
    /// Invocations from outside running at once; more wait, round-robin between books.
    #[arg(long)]
    invocations_max: Option<u32>,
    /// One book's invocations running at once.
    #[arg(long)]
    book_invocations_max: Option<u32>,
    /// One book's requests waiting for a place; more are answered 429.
    #[arg(long)]
    book_queue_max: Option<u32>,
    /// How long a request waits for a place before 429.
    #[arg(long)]
    queue_wait_ms: Option<u64>,
    /// Requests a second per token (0: no limit).
    #[arg(long)]
    caller_rate_max: Option<u32>,
    /// The longest a SQL query runs.
    #[arg(long)]
    sql_time_ms: Option<u64>,
    /// Rows a SQL query may read from its tables.
    #[arg(long)]
    sql_scan_rows_max: Option<u64>,
    /// Rows a SQL query answers at most (then `truncated`).
    #[arg(long)]
    sql_rows_max: Option<u32>,
    /// SQL queries at once (more are answered 429).
    #[arg(long)]
    sql_concurrent_max: Option<u32>,
    /// SQLite's memory for all SQL queries together.
    #[arg(long)]
    sql_memory_bytes_max: Option<u64>,
    /// The key that seals functions' secrets (default: <data-dir>/secrets.key, made if
    /// missing).
    #[arg(long)]
    secrets_key_file: Option<PathBuf>,
    /// `local` (the default; loopback only): a request without a token acts as the
    /// admin unless a web page could have forged it. `token`: every request needs one.
    #[arg(long)]
    auth: Option<tally_runtime::config::AuthMode>,
    /// The admin token (default: <data-dir>/admin.token, made if missing, mode 0600).
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM), with --tls-key-file.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The key of --tls-cert-file (PEM).
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// Export every execution's trace to this OTLP/HTTP collector (http://host:4318).
    #[arg(long)]
    otlp_endpoint: Option<String>,
    /// The protocol of one state table, e.g. --table accounts=write-optimized (repeatable).
    #[arg(long = "table", value_name = "TABLE=PROTOCOL")]
    tables: Vec<String>,
    #[arg(long)]
    recovery_interval_ms: Option<u64>,
    /// Re-executions before a transient failure becomes the result.
    #[arg(long)]
    attempts_max: Option<u32>,
    #[arg(long)]
    gc_interval_ms: Option<u64>,
    #[arg(long)]
    results_kept_ms: Option<u64>,
    /// How long the past of read-optimized tables, objects and queues stays readable
    /// with SQL's AS OF.
    #[arg(long)]
    history_kept_ms: Option<u64>,
    #[arg(long)]
    auto_interval_ms: Option<u64>,
    #[arg(long)]
    auto_min_ops: Option<u64>,
    /// A synced state-store write's cost in percent of a log append, for auto.
    #[arg(long)]
    auto_sync_cost: Option<u32>,
    /// Unfinished root invocations the recovery scan tracks per book.
    #[arg(long)]
    open_max: Option<usize>,
    /// Asynchronous invocations running on this node at once.
    #[arg(long)]
    async_max: Option<usize>,
    /// Durable sleeps up to this long wait in place; longer ones suspend.
    #[arg(long)]
    sleep_in_place_max_ms: Option<u64>,
    #[arg(long)]
    schedule_poll_ms: Option<u64>,
    /// Books that may have exactly-once state.
    #[arg(long)]
    books_max: Option<usize>,
    /// Cache replayed views of objects, queues and locks in aux data.
    #[arg(long)]
    aux_views: Option<bool>,
    /// Stored versions kept in memory for read-optimized reads, in bytes (0: off).
    #[arg(long)]
    version_cache_bytes: Option<usize>,
    /// Parsed views of objects kept in memory, in bytes of their JSON text.
    #[arg(long)]
    views_bytes: Option<usize>,
}

impl DevArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        macro_rules! set {
            ($($flag:ident => $($field:ident).+),* $(,)?) => {
                $(if let Some(v) = &self.$flag { c.$($field).+ = v.clone(); })*
            };
        }
        set!(
            data_dir => data_dir,
            listen => listen,
            memory_bytes => limits.memory_bytes,
            timeout_ms => limits.timeout_ms,
            request_bytes_max => limits.request_bytes_max,
            response_bytes_max => limits.response_bytes_max,
            concurrency_max => limits.concurrency_max,
            instances_max => node.instances_max,
            memory_bytes_max => node.memory_bytes_max,
            component_bytes_max => node.component_bytes_max,
            call_depth_max => node.call_depth_max,
            invocations_kept => node.invocations_kept,
            memory_keep_resident_bytes => node.memory_keep_resident_bytes,
            index_resident_bytes => node.index_resident_bytes,
            index_mode => index.mode,
            index_shards => index.shards,
            index_replicas => index.replicas,
            local_index => index.local.enabled,
            local_suffix_bytes => index.local.suffix_bytes,
            local_tag_cache_bytes => index.local.tag_cache_bytes,
            local_tag_bytes_max => index.local.tag_bytes_max,
            local_popularity_bytes => index.local.popularity_bytes,
            state_store => state.store,
            postgres => state.postgres,
            protocol => state.protocol,
            crash_injection => state.crash_injection,
            reexecute_after_ms => state.reexecute_after_ms,
            retry_attempts => limits.retry_attempts,
            retry_backoff_ms => limits.retry_backoff_ms,
            retry_backoff_max_ms => limits.retry_backoff_max_ms,
            function_timeout_ms_max => node.function_timeout_ms_max,
            function_request_bytes_max => node.function_request_bytes_max,
            function_response_bytes_max => node.function_response_bytes_max,
            outgoing_in_flight_max => node.outgoing_in_flight_max,
            outgoing_timeout_ms_max => node.outgoing_timeout_ms_max,
            outgoing_request_bytes_max => node.outgoing_request_bytes_max,
            outgoing_response_bytes_max => node.outgoing_response_bytes_max,
            logs_bytes_max => node.logs_bytes_max,
            logs_invocation_bytes_max => node.logs_invocation_bytes_max,
            invocations_max => node.invocations_max,
            book_invocations_max => node.book_invocations_max,
            book_queue_max => node.book_queue_max,
            queue_wait_ms => node.queue_wait_ms,
            caller_rate_max => node.caller_rate_max,
            sql_time_ms => node.sql_time_ms,
            sql_scan_rows_max => node.sql_scan_rows_max,
            sql_rows_max => node.sql_rows_max,
            sql_concurrent_max => node.sql_concurrent_max,
            sql_memory_bytes_max => node.sql_memory_bytes_max,
            recovery_interval_ms => state.recovery_interval_ms,
            attempts_max => state.attempts_max,
            gc_interval_ms => state.gc_interval_ms,
            results_kept_ms => state.results_kept_ms,
            history_kept_ms => state.history_kept_ms,
            auto_interval_ms => state.auto_interval_ms,
            auto_min_ops => state.auto_min_ops,
            auto_sync_cost => state.auto_sync_cost,
            open_max => state.open_max,
            async_max => state.async_max,
            sleep_in_place_max_ms => state.sleep_in_place_max_ms,
            schedule_poll_ms => state.schedule_poll_ms,
            books_max => state.books_max,
            aux_views => state.aux_views,
            version_cache_bytes => state.version_cache_bytes,
            views_bytes => state.views_bytes,
        );
        if !self.tables.is_empty() {
            let pairs = self.tables.iter().map(|t| t.replacen('=', ":", 1)).collect::<Vec<_>>().join(",");
            c.state.tables.extend(tally::gateway::parse_tables(&pairs)?);
        }
        if let Some(dir) = &self.artifacts_dir {
            c.artifacts_dir = Some(dir.clone());
        }
        if let Some(file) = &self.secrets_key_file {
            c.secrets_key_file = Some(file.clone());
        }
        if let Some(auth) = self.auth {
            c.auth = auth;
        }
        if let Some(file) = &self.admin_token_file {
            c.admin_token_file = Some(file.clone());
        }
        if let Some(file) = &self.tls_cert_file {
            c.tls_cert_file = Some(file.clone());
        }
        if let Some(file) = &self.tls_key_file {
            c.tls_key_file = Some(file.clone());
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            c.observe.otlp_endpoint = Some(endpoint.clone());
        }
        for pin in &self.outgoing_hosts {
            let (name, ips) =
                pin.split_once('=').ok_or_else(|| anyhow::anyhow!("--outgoing-hosts takes NAME=IP, got {pin:?}"))?;
            let ips = ips
                .split(',')
                .map(|ip| ip.trim().parse().map_err(|e| anyhow::anyhow!("--outgoing-hosts {pin:?}: {e}")))
                .collect::<anyhow::Result<Vec<std::net::IpAddr>>>()?;
            c.node.outgoing_hosts.insert(name.to_ascii_lowercase(), ips);
        }
        Ok(c)
    }
}

pub fn dev(args: DevArgs) -> anyhow::Result<()> {
    init_tracing();
    let config = args.config()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let node = DevNode::start(config.clone()).await?;
        // The first line on stdout is the URL: scripts and tests read it.
        println!("tally dev: gateway at {}", node.url());
        eprintln!("tally dev: data in {}; Ctrl-C stops", config.data_dir.display());
        // The CLI finds the admin token by the gateway's address.
        let saved = super::token::saved(&node.addr.to_string());
        if let Some(file) = &saved {
            match tally::auth::write_secret(file, &node.admin_token) {
                Ok(()) => eprintln!("tally dev: the admin token is in {} (the CLI sends it)", file.display()),
                Err(e) => eprintln!("tally dev: cannot save the admin token to {}: {e}", file.display()),
            }
        }
        tokio::signal::ctrl_c().await?;
        eprintln!("tally dev: stopping");
        if let Some(file) = &saved {
            let _ = std::fs::remove_file(file);
        }
        node.shutdown().await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every key of the configuration file has a `tally dev` flag: its name with
    /// dashes (`[state] store` is `--state-store`, `[state] tables` is `--table`).
    #[test]
    fn every_configuration_key_has_a_dev_flag() {
        let cli = crate::Cli::command();
        let dev = cli.find_subcommand("dev").expect("tally dev");
        let flags: Vec<&str> = dev.get_arguments().filter_map(|a| a.get_long()).collect();
        let config = serde_json::to_value(Config::default()).expect("the configuration as JSON");
        let mut missing = Vec::new();
        for (key, value) in config.as_object().expect("a table") {
            // (key, its flag): a section's keys take the section's name in `[index]`, a
            // nested section's (`[index.local]`) always.
            let mut keys: Vec<(String, String)> = Vec::new();
            match value.as_object() {
                None => keys.push((key.clone(), key.replace('_', "-"))),
                Some(section) => {
                    for (k, v) in section {
                        match v.as_object() {
                            Some(nested) => keys.extend(nested.keys().map(|n| {
                                let flag = if n == "enabled" { format!("{k}-{key}") } else { format!("{k}-{n}") };
                                (format!("{key}.{k}.{n}"), flag.replace('_', "-"))
                            })),
                            None if key == "index" => keys.push((k.clone(), format!("index-{k}"))),
                            None => keys.push((k.clone(), k.replace('_', "-"))),
                        }
                    }
                }
            }
            for (key, flag) in keys {
                let flag = match flag.as_str() {
                    "store" => "state-store".to_string(),
                    "tables" => "table".to_string(),
                    _ => flag,
                };
                if !flags.contains(&flag.as_str()) {
                    missing.push(key);
                }
            }
        }
        assert!(missing.is_empty(), "keys without a `tally dev` flag: {missing:?}");
    }
}
