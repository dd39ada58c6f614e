//! `tally dev`: every role in one process. The shared log runs as an in-process cluster
//! (`ClusterBuilder`: a controller, one sequencer, one storage node and one engine, their
//! stores under `data_dir/log`, delivering to each other in process on a thread of their
//! own, as the builder does by default), with the runtime and the gateway on top.
//! Everything durable is under the data directory, so a restart over it keeps functions and
//! books.
//!
//! The roles heartbeat every 500 ms rather than 100 ms, and the controller declares a role
//! failed after 5 s of silence: they share one process, so there is no peer process whose
//! loss to detect. The node is alone (`tally_durable::Alone`): it owns every book's
//! background work, and its roots may defer their Init; in partial mode they may not
//! (`tally_durable::OwnsAll`: its local index may lag the appends it answered).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tally_logsvc::{Cluster, ClusterBuilder};
use tally_runtime::config::{AuthMode, Config};
use tally_runtime::runtime::Runtime;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::gateway;

/// A running development node.
pub struct DevNode {
    pub runtime: Arc<Runtime>,
    /// The gateway's address (the port is the one bound when `listen` asked for 0).
    pub addr: SocketAddr,
    /// The bootstrap admin token (`admin_token_file`, by default `data_dir/admin.token`).
    pub admin_token: String,
    /// `https` with `tls_cert_file` and `tls_key_file`, else `http`.
    scheme: &'static str,
    cluster: Cluster,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
}

/// How often the roles of a dev node report to its controller.
const DEV_HEARTBEAT_US: u64 = 500_000;

impl DevNode {
    pub async fn start(config: Config) -> anyhow::Result<DevNode> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
        let mut b = ClusterBuilder::new(config.data_dir.join("log"));
        b.sequencers = 1;
        b.storage_nodes = 1;
        b.engines = 1;
        b.n_meta = 1;
        b.n_data = 1;
        // Every role lives and dies with this process, so the controller has no failure
        // of a peer process to detect: heartbeats every 500 ms rather than 100 ms, and a
        // role is declared failed after 5 s of silence (a role task that stopped on an
        // error). An idle node wakes five times less (issue 12: idle under 0.5% of a core).
        b.engine_config.heartbeat_interval_us = DEV_HEARTBEAT_US;
        b.storage_config.heartbeat_interval_us = DEV_HEARTBEAT_US;
        b.sequencer_config.heartbeat_interval_us = DEV_HEARTBEAT_US;
        b.failure_timeout_us = 10 * DEV_HEARTBEAT_US;
        // A test hook: a slow disk under the log (the breakdown's tests).
        if let Some(ms) = std::env::var("TALLY_TEST_FSYNC_DELAY_MS").ok().and_then(|v| v.parse().ok()) {
            b.group_commit.sync_delay_ms = ms;
        }
        b.index_resident_max(usize::try_from(config.node.index_resident_bytes).unwrap_or(usize::MAX));
        let ix = &config.index;
        if ix.mode == tally_runtime::config::IndexMode::Partial {
            b.tier = Some((ix.shards, ix.replicas));
            b.index_config.heartbeat_interval_us = DEV_HEARTBEAT_US;
            b.engine_config.local_index = local_bounds(&ix.local);
        }
        let cluster = b.build().await.context("starting the shared log")?;
        let listener =
            tokio::net::TcpListener::bind(&config.listen).await.with_context(|| format!("listening on {}", config.listen))?;
        let addr = listener.local_addr()?;
        if config.auth == AuthMode::Local && !addr.ip().is_loopback() {
            anyhow::bail!(
                "the gateway listens on {addr}, beyond loopback: that needs `--auth token` (every request then \
                 needs a token; the admin token is written to the data directory's admin.token)"
            );
        }
        // One function node: every book's background work is its own. Its roots defer
        // their Init only over a complete index (see `OwnsAll`).
        let peers: Arc<dyn tally_durable::Peers> = match ix.mode {
            tally_runtime::config::IndexMode::Partial => Arc::new(tally_durable::OwnsAll),
            _ => Arc::new(tally_durable::Alone),
        };
        let runtime =
            Runtime::start(config, cluster.client(0), cluster.platform_client(0), peers).await.context("starting the runtime")?;
        // The log's spans (engine, storage node) go with the invocations' to the exporter.
        if let Some(spans) = &runtime.observer.spans {
            cluster.spans().set(spans.clone());
        }
        let (access, admin_token) =
            crate::auth::guard::start(runtime.clone(), cluster.platform_client(0), true).await.context("reading the tokens")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = gateway::router(runtime.clone(), access);
        let stopped = async {
            let _ = stopped.await;
        };
        let config = &runtime.config;
        let (server, scheme) = match (&config.tls_cert_file, &config.tls_key_file) {
            (Some(cert), Some(key)) => {
                let listener = crate::tls::TlsListener::new(listener, crate::tls::server_config(cert, key)?)?;
                (tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await }), "https")
            }
            _ => (tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await }), "http"),
        };
        Ok(DevNode { runtime, addr, admin_token, scheme, cluster, stop, server })
    }

    /// The log's configuration as installed last (its `tier` tells the index mode).
    pub fn log_configuration(&self) -> Option<std::sync::Arc<tally_logsvc::Configuration>> {
        self.cluster.configuration()
    }

    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Stops the gateway, then the log.
    pub async fn shutdown(self) {
        self.runtime.stop();
        let _ = self.stop.send(());
        let _ = self.server.await;
        self.cluster.shutdown().await;
    }
}

/// The local index's bounds of `[index.local]` (`[function.local_index]` in a cluster);
/// none when it is off.
pub(crate) fn local_bounds(l: &tally_runtime::config::LocalIndexConfig) -> Option<tally_logsvc::tier::LocalBounds> {
    l.enabled.then_some(tally_logsvc::tier::LocalBounds {
        suffix_bytes: l.suffix_bytes,
        tag_cache_bytes: l.tag_cache_bytes,
        tag_bytes_max: l.tag_bytes_max,
        popularity_bytes: l.popularity_bytes,
    })
}
