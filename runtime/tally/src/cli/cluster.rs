//! `tally cluster`: a cluster of `tally node` processes on one machine (init, up, status,
//! down, add, grow), over `tally::cluster::ClusterDir`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tally::cluster::{wait_healthy, ClusterDir, Shape};
use tally_control::IndexShape;
use tally_runtime::config::LocalIndexConfig;

#[derive(Args, Clone)]
pub struct ShapeArgs {
    /// Controller processes (one leads, the others stand by).
    #[arg(long, default_value_t = 2)]
    controllers: u32,
    #[arg(long, default_value_t = 3)]
    sequencers: u32,
    #[arg(long, default_value_t = 3)]
    storage: u32,
    /// Function nodes (engine + runtime + HTTP API).
    #[arg(long, default_value_t = 2)]
    functions: u32,
    /// Gateways (HTTP fronts that route to the function nodes).
    #[arg(long, default_value_t = 1)]
    gateways: u32,
    /// Physical logs.
    #[arg(long, default_value_t = 1)]
    logs: u8,
    /// etcd members.
    #[arg(long, default_value_t = 1)]
    etcd: u32,
    /// Storage replicas per shard (default: 3, or fewer storage nodes).
    #[arg(long)]
    n_data: Option<usize>,
    /// Sequencers per metalog (default: 3, or fewer sequencers).
    #[arg(long)]
    n_meta: Option<usize>,
    /// What an acknowledged append survives: synced (a power loss of every machine) or
    /// replicated (entries not synced before the acknowledgement: a majority of the
    /// sequencers keeping power; needs 3 sequencers).
    #[arg(long, default_value = "synced", value_parser = ["synced", "replicated"])]
    metalog: String,
    /// The cluster's name (its etcd keys and its CA's name).
    #[arg(long, default_value = "local")]
    name: String,
    /// The address every node listens on and is reached at.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Serve the HTTP API in the clear instead of HTTPS (certificates of the cluster's
    /// CA); tokens then cross the network readable.
    #[arg(long)]
    plain_http: bool,
    /// How the log is indexed: partial (index nodes hold the complete index, sharded;
    /// function nodes a bounded one, and join without a replay) or complete (every
    /// function node indexes whole logs).
    #[arg(long, default_value = "partial", value_parser = ["partial", "complete"])]
    index_mode: String,
    /// Partial mode: index shards, and replicas of each (index roles run in the storage
    /// and sequencer processes).
    #[arg(long, default_value_t = 2)]
    index_shards: usize,
    #[arg(long, default_value_t = 2)]
    index_replicas: usize,
    /// Partial mode: aggregator roles (in the sequencer processes first); 0: each
    /// function node aggregates its own lookups.
    #[arg(long, default_value_t = tally::cluster::DEFAULT_AGGREGATORS)]
    aggregators: u32,
    /// Partial mode: each function node's local index, in bytes in all (at least
    /// 64 KiB, split as the defaults are; 0: none). The defaults (about 20 MiB) if absent.
    #[arg(long)]
    local_index_bytes: Option<usize>,
}

impl ShapeArgs {
    fn shape(&self) -> Shape {
        Shape {
            controllers: self.controllers,
            sequencers: self.sequencers,
            storage: self.storage,
            functions: self.functions,
            gateways: self.gateways,
            logs: self.logs,
            etcd: self.etcd,
            n_data: self.n_data,
            n_meta: self.n_meta,
            metalog: match self.metalog.as_str() {
                "replicated" => tally_logsvc::MetalogMode::Replicated,
                _ => tally_logsvc::MetalogMode::Synced,
            },
            plain_http: self.plain_http,
            index: (self.index_mode == "partial")
                .then_some(IndexShape { shards: self.index_shards.max(1), replicas: self.index_replicas.max(1) }),
            aggregators: self.aggregators,
            local_index: self.local_index_bytes.map(|b| match b {
                0 => LocalIndexConfig { enabled: false, ..LocalIndexConfig::default() },
                b => LocalIndexConfig::with_bytes(b),
            }),
        }
    }
}

#[derive(Subcommand)]
pub enum ClusterVerb {
    /// Write a cluster's CA, node certificates and node configurations into DIR.
    Init {
        dir: PathBuf,
        #[command(flatten)]
        shape: ShapeArgs,
    },
    /// Start etcd and every node of DIR as processes of their own (init DIR first if
    /// it holds no cluster); prints the HTTP API's URL first.
    Up {
        dir: PathBuf,
        #[command(flatten)]
        shape: ShapeArgs,
        /// How long to wait for every node to be healthy, in seconds.
        #[arg(long, default_value_t = 60)]
        wait_s: u64,
    },
    /// Each process of DIR: role, pid, address, health.
    Status {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Stop every process of DIR (nodes, then etcd).
    Down { dir: PathBuf },
    /// Add function node processes to the cluster of DIR and start them: in partial
    /// mode they join the running term (a new version of its configuration), with no
    /// seal and no replay of the log.
    Add {
        dir: PathBuf,
        /// How many function nodes to add.
        #[arg(long)]
        functions: u32,
        /// How long to wait for every node to be healthy, in seconds.
        #[arg(long, default_value_t = 60)]
        wait_s: u64,
    },
    /// Add physical logs to the running cluster of DIR: the books that consistent
    /// hashing maps to the new logs move there in a new term, without a restart.
    Grow {
        dir: PathBuf,
        /// The number of physical logs the cluster should have (never fewer than now).
        #[arg(long)]
        logs: u16,
        /// How long to wait for the new term, in seconds.
        #[arg(long, default_value_t = 30)]
        wait_s: u64,
    },
}

pub fn run(verb: ClusterVerb) -> anyhow::Result<()> {
    match verb {
        ClusterVerb::Init { dir, shape } => {
            let c = ClusterDir::init(&dir, &shape.name, &shape.host, &shape.shape())?;
            println!(
                "cluster {} in {}: {} nodes, etcd at {}",
                c.file.name,
                c.dir.display(),
                c.file.nodes.len(),
                c.file.endpoints().join(",")
            );
            Ok(())
        }
        ClusterVerb::Up { dir, shape, wait_s } => {
            let c = match ClusterDir::open(&dir) {
                Ok(c) => c,
                Err(_) if !dir.join("cluster.toml").exists() => ClusterDir::init(&dir, &shape.name, &shape.host, &shape.shape())?,
                Err(e) => return Err(e),
            };
            // The first line on stdout is the URL: scripts and tests read it.
            let url = c.gateway_url()?;
            println!("{url}");
            // The CLI finds the cluster's admin token and CA by the gateway's address.
            let token = std::fs::read_to_string(c.dir.join("ca").join("admin.token"))?;
            let authority = url.split_once("://").map_or(url.as_str(), |(_, a)| a);
            if let Some(file) = super::token::saved(authority) {
                tally::auth::write_secret(&file, token.trim())?;
            }
            if let Some(file) = super::token::saved_ca(authority).filter(|_| url.starts_with("https://")) {
                tally::auth::write_secret(&file, std::fs::read_to_string(c.http_ca())?.trim_end())?;
            }
            c.up(&std::env::current_exe()?)?;
            let status = wait_healthy(&c, std::time::Duration::from_secs(wait_s))?;
            eprintln!("tally cluster: {} processes up; `tally cluster status {}`", status.len(), c.dir.display());
            Ok(())
        }
        ClusterVerb::Status { dir, json } => {
            let c = ClusterDir::open(&dir)?;
            let status = c.status()?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let stamp = rt.block_on(c.configuration_stamp(std::time::Duration::from_secs(3))).ok().flatten();
            if json {
                let (term, version) = (stamp.as_ref().map(|s| s.term), stamp.as_ref().map(|s| s.version));
                let aggregators = stamp.as_ref().map_or(Vec::new(), |s| s.aggregators.clone());
                let index = stamp.and_then(|s| s.index);
                let value = serde_json::json!({
                    "term": term, "version": version, "index": index, "aggregators": aggregators, "processes": status
                });
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                if let Some(s) = stamp {
                    println!("term {}, version {}", s.term, s.version);
                    if let Some(index) = s.index {
                        let shards: Vec<String> =
                            index.iter().map(|r| r.iter().map(|n| format!("n{n}")).collect::<Vec<_>>().join(" ")).collect();
                        println!("index shards: {}", shards.join(" | "));
                    }
                    if !s.aggregators.is_empty() {
                        let ids: Vec<String> = s.aggregators.iter().map(|n| format!("n{n}")).collect();
                        println!("aggregators: {}", ids.join(" "));
                    }
                }
                for s in &status {
                    let pid = s.pid.map_or("-".to_string(), |p| p.to_string());
                    let health = if s.healthy { "healthy" } else { "down" };
                    println!("{:<16} {:<22} pid {:<8} {:<22} {health}", s.name, s.roles.join(","), pid, s.addr);
                }
            }
            Ok(())
        }
        ClusterVerb::Down { dir } => ClusterDir::open(&dir)?.down(std::time::Duration::from_secs(10)),
        ClusterVerb::Add { dir, functions, wait_s } => {
            let mut c = ClusterDir::open(&dir)?;
            let added = c.add_functions(functions)?;
            // Only the new nodes start: processes that are down stay down.
            let tally = std::env::current_exe()?;
            for name in &added {
                c.start_node(&tally, name)?;
            }
            tally::cluster::wait_healthy_of(&c, std::time::Duration::from_secs(wait_s), |n| added.iter().any(|a| a == n))?;
            println!("cluster {}: added {}", c.file.name, added.join(", "));
            Ok(())
        }
        ClusterVerb::Grow { dir, logs, wait_s } => {
            let c = ClusterDir::open(&dir)?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let term = rt.block_on(c.grow(logs, std::time::Duration::from_secs(wait_s)))?;
            println!("cluster {}: {logs} physical logs from term {term}", c.file.name);
            Ok(())
        }
    }
}
