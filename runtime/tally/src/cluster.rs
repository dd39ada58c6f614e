//! A cluster directory: what `tally cluster init` writes and `tally cluster up`,
//! `status` and `down` run. Every node is its own `tally node` process, every etcd
//! member its own `etcd` process, all on one host (loopback by default); the same
//! node files run unchanged on several machines once `host` names each machine.
//!
//! ```text
//!   DIR/
//!     cluster.toml          name, host, etcd members, postgres port, node names in start order
//!     ca/                   the cluster's CA (its key too: `init` issues from it), the
//!                           admin token, the secrets key, the state store's password,
//!                           etcd/ (etcd's certificate) and cli/ (the CLI's, for etcd)
//!     etcd-<i>/             etcd member i's data; etcd-<i>.log
//!     postgres/             the function nodes' shared state store (PostgreSQL), server.log;
//!                           run/ its Unix socket (no TCP), scram password
//!
//! Every hop is authenticated: the log's QUIC and etcd (clients and peers) by
//! certificates of the cluster's CA, PostgreSQL by password over a socket only this
//! machine's users reach, the HTTP API by tokens.
//!     nodes/<name>/         node.toml, certs/, data/, node.log, node.pid
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::hash::{BuildHasher, RandomState};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
pub use tally_control::IndexShape;
use tally_logsvc::net::ClusterCa;
use tally_logsvc::MetalogMode;
use tally_logsvc::NodeId;

use tally_control::{EtcdTls, MemberRole, ETCD_SERVER_NAME};

/// Where the state store's Unix socket is, in the cluster directory.
const PG_SOCKET_DIR: &str = "postgres-run";
/// The state store's password (user `postgres`), under `ca/`.
const PG_PASSWORD_FILE: &str = "postgres.password";
use tally_durable::{StateConfig, StoreKind};
use tally_runtime::config::LocalIndexConfig;
use tally_state::PgServer;

use crate::node::{ControllerRole, FunctionRole, GatewayRole, LogRole, NodeConfig};

/// How many nodes of each role `init` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub controllers: u32,
    pub sequencers: u32,
    pub storage: u32,
    pub functions: u32,
    pub gateways: u32,
    pub logs: u8,
    pub etcd: u32,
    /// Replication; `None`: three, or fewer when there are fewer nodes.
    pub n_data: Option<usize>,
    pub n_meta: Option<usize>,
    /// What an acknowledged append survives (`[controller] metalog`).
    pub metalog: MetalogMode,
    /// The HTTP API in the clear rather than HTTPS (a benchmark's loopback client).
    pub plain_http: bool,
    /// Partial mode's index tier (the default: 2 shards of 2 replicas, as index roles
    /// in the storage and sequencer processes); `None`: complete mode.
    pub index: Option<IndexShape>,
    /// Partial mode: aggregator roles, in the sequencer processes first (0: each
    /// function node aggregates its own lookups).
    pub aggregators: u32,
    /// Partial mode: every function node's local index (`[function.local_index]`);
    /// `None`: the defaults.
    pub local_index: Option<LocalIndexConfig>,
}

/// Aggregator roles of a new cluster in partial mode: none, each function node
/// aggregates its own lookups. The `index` bench's read cases compare one aggregator
/// with none; on this 2-core machine none had the lower p50 at 16 clients (the spec's
/// rule), since an aggregator is one more process on the same cores.
pub const DEFAULT_AGGREGATORS: u32 = 0;

impl Default for Shape {
    fn default() -> Self {
        Shape {
            controllers: 2,
            sequencers: 3,
            storage: 3,
            functions: 2,
            gateways: 1,
            logs: 1,
            etcd: 1,
            n_data: None,
            n_meta: None,
            metalog: MetalogMode::Synced,
            plain_http: false,
            index: Some(IndexShape { shards: 2, replicas: 2 }),
            aggregators: DEFAULT_AGGREGATORS,
            local_index: None,
        }
    }
}

/// One etcd member: its name and ports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMember {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
}

/// `DIR/cluster.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub name: String,
    pub host: String,
    pub etcd: Vec<EtcdMember>,
    /// The port of the PostgreSQL server that holds the function nodes' state: every
    /// function node must see every other's writes, so a cluster's state store is
    /// shared (a node-local RocksDB is `tally dev`'s).
    pub postgres_port: u16,
    /// Node names in the order `up` starts them.
    pub nodes: Vec<String>,
}

impl ClusterFile {
    /// The libpq connection string of the cluster's state store in `dir`: its Unix
    /// socket, with the password.
    pub fn conninfo(&self, dir: &Path, password: &str) -> String {
        let quoted = |text: String| format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"));
        let socket = quoted(dir.join(PG_SOCKET_DIR).display().to_string());
        format!("host={socket} port={} user=postgres password={} dbname=postgres", self.postgres_port, quoted(password.into()))
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.etcd.iter().map(|m| format!("https://{}:{}", self.host, m.client_port)).collect()
    }
}

/// Where a new cluster's ports come from: below Linux's ephemeral range (32768 and up),
/// so that no outgoing connection on the machine takes one as its local port between
/// `init` and `up`.
const PORTS: std::ops::Range<u16> = 10_000..32_768;

/// Ports for a new cluster's processes: distinct, and free on `host` for both TCP and
/// UDP at the moment of asking (another process may bind one later; `up` then fails
/// with the port named). The search starts at a random place in [`PORTS`], so that
/// clusters set up at once on one machine do not take the same ones.
struct Ports {
    host: String,
    next: u16,
    given: HashSet<u16>,
}

impl Ports {
    fn new(host: &str) -> Ports {
        let span = u64::from(PORTS.end - PORTS.start);
        let offset = RandomState::new().hash_one(std::process::id()) % span;
        Ports { host: host.into(), next: PORTS.start + offset as u16, given: HashSet::new() }
    }

    fn free(&mut self) -> anyhow::Result<u16> {
        for _ in PORTS {
            let port = self.next;
            self.next = if port + 1 == PORTS.end { PORTS.start } else { port + 1 };
            let host = self.host.as_str();
            if !self.given.contains(&port) && TcpListener::bind((host, port)).is_ok() && UdpSocket::bind((host, port)).is_ok() {
                self.given.insert(port);
                return Ok(port);
            }
        }
        bail!("no port in {PORTS:?} is free for both tcp and udp on {}", self.host)
    }
}

pub struct ClusterDir {
    pub dir: PathBuf,
    pub file: ClusterFile,
}

/// Where the cluster's configuration stands (`tally cluster status`).
pub struct ConfigStamp {
    pub term: u16,
    pub version: u32,
    /// Partial mode: the index nodes of each index shard, by id.
    pub index: Option<Vec<Vec<u32>>>,
    /// Partial mode: the aggregators listed, by id.
    pub aggregators: Vec<u32>,
}

impl ClusterDir {
    pub fn open(dir: &Path) -> anyhow::Result<ClusterDir> {
        let path = dir.join("cluster.toml");
        let text = fs::read_to_string(&path).with_context(|| {
            format!("reading {} (is {} a cluster directory? `tally cluster init`)", path.display(), dir.display())
        })?;
        let file = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        // Absolute, so that the paths given to the processes (and looked for in their
        // command lines) are the same whatever directory `tally cluster` runs from.
        Ok(ClusterDir { dir: fs::canonicalize(dir)?, file })
    }

    /// Writes a new cluster: a CA, one certificate and one `node.toml` per node process
    /// (one role each), and `cluster.toml`. Refuses a directory that holds a cluster.
    pub fn init(dir: &Path, name: &str, host: &str, shape: &Shape) -> anyhow::Result<ClusterDir> {
        if dir.join("cluster.toml").exists() {
            bail!("{} already holds a cluster", dir.display());
        }
        if shape.controllers == 0 || shape.sequencers == 0 || shape.storage == 0 || shape.etcd == 0 || shape.logs == 0 {
            bail!("a cluster needs at least one controller, sequencer, storage node, etcd member and log");
        }
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = fs::canonicalize(dir)?;
        let ca = ClusterCa::generate(name)?;
        ca.save(&dir.join("ca"))?;
        // etcd's members serve and peer with one certificate for the host and etcd's
        // name; the CLI's own (`grow`) is a client certificate like a node's.
        let (ca_pem, cert_pem, key_pem) = ca.issue_for("etcd", vec![host.to_string(), ETCD_SERVER_NAME.into()])?.pem();
        // The CA in PEM, for clients of the HTTP API (the CLI, curl --cacert).
        fs::write(dir.join("ca").join("http-ca.pem"), &ca_pem)?;
        for (file, text) in [("ca.pem", ca_pem), ("cert.pem", cert_pem), ("key.pem", key_pem)] {
            crate::auth::write_secret(&dir.join("ca").join("etcd").join(file), text.trim_end())?;
        }
        ca.issue_for("tally cli", vec!["cli.tally.local".into()])?.save(&dir.join("ca").join("cli"))?;
        // One key seals every function's secrets, on every node.
        let secrets_key_file = dir.join("ca").join("secrets.key");
        tally_host::SecretsKey::load_or_create(&secrets_key_file)?;
        // The admin token every function role grants once: the cluster's first token.
        let admin_token_file = dir.join("ca").join("admin.token");
        let mut random = [0u8; 40];
        getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
        let (_, admin) = crate::auth::Grant::mint(crate::auth::Role::Admin, Default::default(), None, random);
        crate::auth::write_secret(&admin_token_file, &admin)?;
        // The bearer token of the index roles' metrics addresses (a scraper's secret).
        let metrics_token_file = dir.join("ca").join("metrics.token");
        crate::auth::write_secret(&metrics_token_file, &random_hex("a token")?)?;
        let mut ports = Ports::new(host);
        let etcd = (0..shape.etcd)
            .map(|i| Ok(EtcdMember { name: format!("etcd-{i}"), client_port: ports.free()?, peer_port: ports.free()? }))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let postgres_port = ports.free()?;
        let file = ClusterFile { name: name.into(), host: host.into(), etcd, postgres_port, nodes: Vec::new() };
        let endpoints = file.endpoints();
        let password = random_hex("a password")?;
        crate::auth::write_secret(&dir.join("ca").join(PG_PASSWORD_FILE), &password)?;
        let state =
            StateConfig { store: StoreKind::Postgres, postgres: file.conninfo(&dir, &password), ..StateConfig::default() };
        let mut next = 1u32;
        let mut ids = |n: u32| {
            let ids: Vec<u32> = (next..next + n).collect();
            next += n;
            ids
        };
        let controllers = ids(shape.controllers);
        let (sequencers, storage, functions) = (ids(shape.sequencers), ids(shape.storage), ids(shape.functions));
        let gateways = ids(shape.gateways);
        // One index role per storage or sequencer process at most: a small cluster gets
        // fewer replicas, then fewer shards.
        let hosts = storage.len() + sequencers.len();
        let index_shape = shape.index.map(|i| {
            let shards = i.shards.clamp(1, hosts);
            IndexShape { shards, replicas: i.replicas.clamp(1, (hosts / shards).max(1)) }
        });
        // Every storage or sequencer process left over gets a spare index role, which
        // replaces a replica whose process is gone.
        let index = ids(index_shape.map_or(0, |_| hosts as u32));
        let aggregators = ids(index_shape.map_or(0, |_| shape.aggregators.min(hosts as u32)));
        let mut nodes = Vec::new();
        let base = |node: &str| NodeConfig {
            cluster: name.into(),
            name: node.into(),
            etcd: endpoints.clone(),
            data_dir: dir.join("nodes").join(node).join("data"),
            certs: dir.join("nodes").join(node).join("certs"),
            host: host.into(),
            controllers: controllers.clone(),
            controller: None,
            sequencer: None,
            storage: None,
            function: None,
            gateway: None,
            index: None,
            aggregator: None,
            metrics: None,
            metrics_token_file: None,
            limits: Default::default(),
            node_limits: Default::default(),
            state: state.clone(),
            artifacts_dir: None,
            secrets_key_file: Some(secrets_key_file.clone()),
            admin_token_file: Some(admin_token_file.clone()),
            partition_file: None,
            observe: Default::default(),
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_file: None,
        };
        for &id in &controllers {
            let mut c = base(&format!("controller-{id}"));
            c.controller = Some(ControllerRole {
                id,
                port: ports.free()?,
                n_logs: shape.logs,
                n_meta: shape.n_meta.unwrap_or(3.min(sequencers.len())),
                n_data: shape.n_data.unwrap_or(3.min(storage.len())),
                failure_timeout_ms: 1_000,
                index: index_shape,
                metalog: shape.metalog,
            });
            nodes.push((id, c));
        }
        for &id in &sequencers {
            let mut c = base(&format!("sequencer-{id}"));
            c.sequencer = Some(LogRole { id, port: ports.free()? });
            nodes.push((id, c));
        }
        for &id in &storage {
            let mut c = base(&format!("storage-{id}"));
            c.storage = Some(LogRole { id, port: ports.free()? });
            nodes.push((id, c));
        }
        for &id in &functions {
            let mut c = base(&format!("function-{id}"));
            let http = format!("{host}:{}", ports.free()?);
            c.function =
                Some(FunctionRole { id, port: ports.free()?, http, metalog_delay_ms: 0, local_index: shape.local_index });
            nodes.push((id, c));
        }
        for &id in &gateways {
            let mut c = base(&format!("gateway-{id}"));
            c.gateway = Some(GatewayRole { id, http: format!("{host}:{}", ports.free()?) });
            nodes.push((id, c));
        }
        // Index roles go into the storage processes, then the sequencers', in turn: a
        // shard's replicas (every S-th index id) land in different processes, and the
        // ids past S x R are spares.
        let hosts: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].1.storage.is_some())
            .chain((0..nodes.len()).filter(|&i| nodes[i].1.sequencer.is_some()))
            .collect();
        let mut extra: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        for (&id, &host) in index.iter().zip(&hosts) {
            nodes[host].1.index = Some(LogRole { id, port: ports.free()? });
            nodes[host].1.metrics = Some(format!("{}:{}", file.host, ports.free()?));
            nodes[host].1.metrics_token_file = Some(metrics_token_file.clone());
            extra[host].push(id);
        }
        let aggregator_hosts = hosts.iter().rev();
        for (&id, &host) in aggregators.iter().zip(aggregator_hosts) {
            let node = &mut nodes[host].1;
            node.aggregator = Some(LogRole { id, port: ports.free()? });
            if node.metrics.is_none() {
                node.metrics = Some(format!("{}:{}", file.host, ports.free()?));
                node.metrics_token_file = Some(metrics_token_file.clone());
            }
            extra[host].push(id);
        }
        let mut file = file;
        for ((id, c), extra) in nodes.iter_mut().zip(extra) {
            let ids: Vec<NodeId> = std::iter::once(*id).chain(extra).map(NodeId).collect();
            write_node(&ca, &dir, c, &ids, !shape.plain_http)?;
            file.nodes.push(c.name.clone());
        }
        fs::write(dir.join("cluster.toml"), toml::to_string(&file)?)?;
        Ok(ClusterDir { dir, file })
    }

    /// Adds `n` function node processes to the cluster (not started: `up` starts them),
    /// each a copy of an existing function node's settings with an id, ports and
    /// certificates of its own. Returns their names. In partial mode they join the
    /// running term through a version: no seal, no replay.
    pub fn add_functions(&mut self, n: u32) -> anyhow::Result<Vec<String>> {
        let configs: Vec<NodeConfig> =
            self.file.nodes.iter().map(|name| self.node_config(name)).collect::<anyhow::Result<_>>()?;
        let template = configs.iter().find(|c| c.function.is_some()).context("the cluster has no function node to copy")?;
        let ca = ClusterCa::load(&self.dir.join("ca"))?;
        let mut ports = Ports::new(&self.file.host);
        ports.given.extend(self.file.etcd.iter().flat_map(|e| [e.client_port, e.peer_port]));
        ports.given.insert(self.file.postgres_port);
        ports.given.extend(configs.iter().flat_map(NodeConfig::ports));
        let first = configs.iter().flat_map(NodeConfig::ids).max().unwrap_or(0) + 1;
        let mut added = Vec::new();
        for id in first..first + n {
            let name = format!("function-{id}");
            let mut c = template.clone();
            c.name = name.clone();
            c.data_dir = self.dir.join("nodes").join(&name).join("data");
            c.certs = self.dir.join("nodes").join(&name).join("certs");
            let http = format!("{}:{}", self.file.host, ports.free()?);
            let local_index = template.function.as_ref().and_then(|f| f.local_index);
            c.function = Some(FunctionRole { id, port: ports.free()?, http, metalog_delay_ms: 0, local_index });
            write_node(&ca, &self.dir, &mut c, &[NodeId(id)], template.tls_cert_file.is_some())?;
            self.file.nodes.push(name.clone());
            added.push(name);
        }
        fs::write(self.dir.join("cluster.toml"), toml::to_string(&self.file)?)?;
        Ok(added)
    }

    /// The term, version and index tier of the configuration stored in etcd, if etcd
    /// answers within `wait`.
    pub async fn configuration_stamp(&self, wait: Duration) -> anyhow::Result<Option<ConfigStamp>> {
        let tls = etcd_tls(&self.dir.join("ca").join("cli"))?;
        let load = async {
            let plane = tally_control::ControlPlane::connect_with(&self.file.endpoints(), &self.file.name, Some(&tls)).await?;
            anyhow::Ok(plane.load_config().await?.map(|(c, _)| ConfigStamp {
                term: c.current().term.0,
                version: c.current().version,
                index: c.tier.as_ref().map(|t| t.shards.iter().map(|r| r.iter().map(|n| n.0).collect()).collect()),
                aggregators: c.tier.as_ref().map_or(Vec::new(), |t| t.aggregators.iter().map(|n| n.0).collect()),
            }))
        };
        Ok(tokio::time::timeout(wait, load).await.ok().transpose()?.flatten())
    }

    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }

    pub fn node_config(&self, node: &str) -> anyhow::Result<NodeConfig> {
        NodeConfig::load(&self.node_dir(node).join("node.toml"))
    }

    /// Starts whatever of the cluster is not running: etcd first, then every node, each
    /// a process of its own that outlives this one. `tally` is the binary that runs the
    /// nodes.
    pub fn up(&self, tally: &Path) -> anyhow::Result<()> {
        let initial: Vec<String> =
            self.file.etcd.iter().map(|m| format!("{}=https://{}:{}", m.name, self.file.host, m.peer_port)).collect();
        let pem = |file: &str| self.dir.join("ca").join("etcd").join(file);
        for m in &self.file.etcd {
            let pid_file = self.dir.join(format!("{}.pid", m.name));
            if running(&pid_file).is_some() {
                continue;
            }
            let host = &self.file.host;
            let mut cmd = Command::new(etcd_binary());
            cmd.args(["--name", &m.name])
                .arg("--data-dir")
                .arg(self.dir.join(&m.name))
                .args(["--listen-client-urls", &format!("https://{host}:{}", m.client_port)])
                .args(["--advertise-client-urls", &format!("https://{host}:{}", m.client_port)])
                .args(["--listen-peer-urls", &format!("https://{host}:{}", m.peer_port)])
                .args(["--initial-advertise-peer-urls", &format!("https://{host}:{}", m.peer_port)])
                // Clients and peers alike show a certificate of the cluster's CA.
                .arg("--cert-file")
                .arg(pem("cert.pem"))
                .arg("--key-file")
                .arg(pem("key.pem"))
                .arg("--trusted-ca-file")
                .arg(pem("ca.pem"))
                .arg("--client-cert-auth")
                .arg("--peer-cert-file")
                .arg(pem("cert.pem"))
                .arg("--peer-key-file")
                .arg(pem("key.pem"))
                .arg("--peer-trusted-ca-file")
                .arg(pem("ca.pem"))
                .arg("--peer-client-cert-auth")
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-token", &self.file.name])
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"]);
            spawn_detached(cmd, &self.dir.join(format!("{}.log", m.name)), &pid_file)?;
        }
        self.start_postgres()?;
        // Nodes wait for etcd themselves; waiting here too keeps their logs quiet.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.file.etcd.iter().any(|m| tcp_open(&format!("{}:{}", self.file.host, m.client_port))) {
            if Instant::now() >= deadline {
                bail!("etcd did not start (see {}/etcd-*.log)", self.dir.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for node in &self.file.nodes {
            self.start_node(tally, node)?;
        }
        Ok(())
    }

    /// Starts node process `node` unless it runs.
    pub fn start_node(&self, tally: &Path, node: &str) -> anyhow::Result<()> {
        let dir = self.node_dir(node);
        let pid_file = dir.join("node.pid");
        if running(&pid_file).is_none() {
            let mut cmd = Command::new(tally);
            cmd.arg("node").arg("--config").arg(dir.join("node.toml"));
            spawn_detached(cmd, &dir.join("node.log"), &pid_file)?;
        }
        Ok(())
    }

    fn postgres(&self) -> PgServer {
        PgServer::new(&self.dir.join("postgres"))
    }

    /// Starts the state store's server unless it runs, creating its database cluster on
    /// the first start.
    fn start_postgres(&self) -> anyhow::Result<()> {
        let pg = self.postgres();
        if pg.pid().is_some_and(alive) {
            return Ok(());
        }
        if is_root() {
            // The server runs as `postgres`, which must get through to its directory.
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o711))?;
        }
        let password =
            fs::read_to_string(self.dir.join("ca").join(PG_PASSWORD_FILE)).context("reading the state store's password")?;
        pg.init_with(true, Some(password.trim())).context("creating the state store's database")?;
        let socket = self.dir.join(PG_SOCKET_DIR);
        pg.socket_dir(&socket).context("making the state store's socket directory")?;
        // A Unix socket only: no TCP port for anyone on the network to try passwords on.
        let options = format!(
            "-c listen_addresses='' -p {} -c unix_socket_directories='{}' -c max_connections=200",
            self.file.postgres_port,
            socket.display()
        );
        pg.start(&options, &self.dir.join("postgres").join("server.log")).context("starting the state store's server")?;
        Ok(())
    }

    /// The URL of the first gateway (or, in a cluster without one, of the first
    /// function node's HTTP API).
    /// Asks the cluster for `n_logs` physical logs (stored in etcd's settings; the
    /// leading controller adds the missing ones in a new term) and waits up to `wait`
    /// for a configuration that has them. Returns its term.
    pub async fn grow(&self, n_logs: u16, wait: Duration) -> anyhow::Result<u16> {
        let tls = etcd_tls(&self.dir.join("ca").join("cli"))?;
        let plane = tally_control::ControlPlane::connect_with(&self.file.endpoints(), &self.file.name, Some(&tls))
            .await
            .context("connecting to the cluster's etcd (is it up?)")?;
        let settings = plane.set_n_logs(n_logs).await?;
        let deadline = Instant::now() + wait;
        loop {
            if let Some((config, _)) = plane.load_config().await? {
                if config.n_logs >= settings.n_logs {
                    return Ok(config.current().term.0);
                }
            }
            if Instant::now() >= deadline {
                bail!("no configuration with {} physical logs after {wait:?}: is a controller running?", settings.n_logs);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `https`, unless the cluster was made with plain HTTP.
    fn scheme(&self) -> &'static str {
        let tls = self.file.nodes.iter().filter_map(|n| self.node_config(n).ok()).any(|c| c.tls_cert_file.is_some());
        if tls {
            "https"
        } else {
            "http"
        }
    }

    /// The CA certificate (PEM) the HTTP API's certificates are issued by.
    pub fn http_ca(&self) -> PathBuf {
        self.dir.join("ca").join("http-ca.pem")
    }

    pub fn gateway_url(&self) -> anyhow::Result<String> {
        let configs = self.file.nodes.iter().map(|n| self.node_config(n)).collect::<anyhow::Result<Vec<_>>>()?;
        let gateway = configs.iter().find_map(|c| c.gateway.as_ref().map(|g| g.http.clone()));
        match gateway.or_else(|| configs.iter().find_map(|c| c.function.as_ref().map(|f| f.http.clone()))) {
            Some(http) => Ok(format!("{}://{http}", self.scheme())),
            None => bail!("the cluster has no gateway and no function node"),
        }
    }

    /// Each process of the cluster (etcd members and nodes), as `status` prints it.
    pub fn status(&self) -> anyhow::Result<Vec<ProcessStatus>> {
        let mut out = Vec::new();
        for m in &self.file.etcd {
            let pid = running(&self.dir.join(format!("{}.pid", m.name)));
            let addr = format!("{}:{}", self.file.host, m.client_port);
            let healthy = pid.is_some() && tcp_open(&addr);
            out.push(ProcessStatus {
                name: m.name.clone(),
                roles: vec!["etcd".into()],
                pid,
                addr,
                http: None,
                url: None,
                healthy,
            });
        }
        let pg = self.postgres().pid().filter(|&p| alive(p));
        let socket = self.dir.join(PG_SOCKET_DIR).join(format!(".s.PGSQL.{}", self.file.postgres_port));
        let healthy = pg.is_some() && std::os::unix::net::UnixStream::connect(&socket).is_ok();
        let pg_addr = socket.display().to_string();
        out.push(ProcessStatus {
            name: "postgres".into(),
            roles: vec!["postgres".into()],
            pid: pg,
            addr: pg_addr,
            http: None,
            url: None,
            healthy,
        });
        for node in &self.file.nodes {
            let c = self.node_config(node)?;
            let pid = running(&self.node_dir(node).join("node.pid"));
            let mut roles: Vec<(NodeId, MemberRole, u16)> = c.log_roles();
            let addr = roles.first().map(|(_, _, port)| format!("{}:{port}", c.host)).unwrap_or_default();
            roles.extend(c.gateway.as_ref().map(|g| (NodeId(g.id), MemberRole::Gateway, 0)));
            let http = c.function.as_ref().map(|f| f.http.clone()).or_else(|| c.gateway.as_ref().map(|g| g.http.clone()));
            let scheme = if c.tls_cert_file.is_some() { "https" } else { "http" };
            let url = http.as_ref().map(|h| format!("{scheme}://{h}"));
            let healthy = pid.is_some() && url.as_deref().is_none_or(|u| http_ok(u, c.tls_ca_file.as_deref()));
            let names = roles.iter().map(|(id, role, _)| format!("{}:{}", format!("{role:?}").to_lowercase(), id.0)).collect();
            out.push(ProcessStatus { name: node.clone(), roles: names, pid, addr, http, url, healthy });
        }
        Ok(out)
    }

    /// Stops every process: nodes first (SIGTERM, then SIGKILL after `grace`), then
    /// etcd; each group is gone (or [`KILL_WAIT`] passed) before the next.
    pub fn down(&self, grace: Duration) -> anyhow::Result<()> {
        let nodes: Vec<PathBuf> = self.file.nodes.iter().map(|n| self.node_dir(n).join("node.pid")).collect();
        let stop_postgres = || {
            if self.postgres().pid().is_some_and(alive) {
                if let Err(e) = self.postgres().stop("fast") {
                    eprintln!("tally cluster: stopping the state store: {e}");
                }
            }
        };
        let etcd: Vec<PathBuf> = self.file.etcd.iter().map(|m| self.dir.join(format!("{}.pid", m.name))).collect();
        for (i, group) in [nodes, etcd].into_iter().enumerate() {
            if i == 1 {
                stop_postgres();
            }
            let pids: Vec<(PathBuf, u32)> = group.iter().filter_map(|f| running(f).map(|p| (f.clone(), p))).collect();
            for (_, pid) in &pids {
                signal(*pid, "TERM");
            }
            let deadline = Instant::now() + grace;
            while pids.iter().any(|(_, p)| alive(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            for (_, pid) in &pids {
                if alive(*pid) {
                    signal(*pid, "KILL");
                }
            }
            // Gone before `down` returns: a process still dying holds its ports, and an
            // `up` right after would find them taken.
            let deadline = Instant::now() + KILL_WAIT;
            while pids.iter().any(|(_, p)| alive(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            for (file, _) in &pids {
                let _ = fs::remove_file(file);
            }
        }
        Ok(())
    }
}

/// How long `down` waits for a killed process to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// One process as `tally cluster status` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStatus {
    pub name: String,
    /// `role:id` of each role (`etcd` for an etcd member).
    pub roles: Vec<String>,
    pub pid: Option<u32>,
    /// The QUIC address of its first role (etcd's client address).
    pub addr: String,
    pub http: Option<String>,
    /// Its HTTP API's URL (`https://` unless the cluster was made with plain HTTP).
    #[serde(default)]
    pub url: Option<String>,
    /// Running, and its HTTP API (or etcd's port) answers.
    pub healthy: bool,
}

/// The etcd client identity of the certificates in `dir` (as `Certs::save` writes
/// them: a node's, or the CLI's).
/// Writes a node process's certificates (it speaks as `ids`; HTTPS for the API of a
/// function node or gateway with `https`) and its `node.toml`.
/// 32 random bytes in hex, for `what` (a secret).
fn random_hex(what: &str) -> anyhow::Result<String> {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no randomness for {what}: {e}"))?;
    Ok(random.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_node(ca: &ClusterCa, dir: &Path, c: &mut NodeConfig, ids: &[NodeId], https: bool) -> anyhow::Result<()> {
    let node_dir = dir.join("nodes").join(&c.name);
    ca.issue(&c.name, ids)?.save(&c.certs)?;
    // HTTPS for the API: a certificate of the cluster's CA for the host (and a name of
    // its own), and the CA, which a gateway trusts function nodes by.
    if (c.function.is_some() || c.gateway.is_some()) && https {
        let names = vec![c.host.clone(), format!("{}.tally.local", c.name)];
        let (ca_pem, cert_pem, key_pem) = ca.issue_for(&c.name, names)?.pem();
        for (file, text) in [("http-ca.pem", &ca_pem), ("http.pem", &cert_pem), ("http.key.pem", &key_pem)] {
            crate::auth::write_secret(&c.certs.join(file), text.trim_end())?;
        }
        c.tls_cert_file = Some(c.certs.join("http.pem"));
        c.tls_key_file = Some(c.certs.join("http.key.pem"));
        c.tls_ca_file = Some(c.certs.join("http-ca.pem"));
    }
    let text = toml::to_string(c)?;
    // It holds the state store's password: its owner's only.
    crate::auth::write_secret(&node_dir.join("node.toml"), &text).with_context(|| format!("writing {}", node_dir.display()))
}

pub fn etcd_tls(dir: &Path) -> anyhow::Result<EtcdTls> {
    let certs = tally_logsvc::net::Certs::load(dir).with_context(|| format!("reading the certificates in {}", dir.display()))?;
    let (ca_pem, cert_pem, key_pem) = certs.pem();
    Ok(EtcdTls { ca_pem, cert_pem, key_pem })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

fn etcd_binary() -> PathBuf {
    std::env::var_os("TALLY_ETCD").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("etcd"))
}

/// Starts `cmd` in a process group of its own (a Ctrl-C of the shell that ran `up`
/// does not reach it), output to `log`, and records its pid.
fn spawn_detached(mut cmd: Command, log: &Path, pid_file: &Path) -> anyhow::Result<u32> {
    use std::os::unix::process::CommandExt;
    let out = fs::OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("opening {}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out).process_group(0);
    let child = cmd.spawn().with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let pid = child.id();
    fs::write(pid_file, pid.to_string())?;
    // The child is not waited for: it outlives this process, and init reaps it.
    std::mem::forget(child);
    Ok(pid)
}

/// The pid in `pid_file` if that process is alive and is the one this directory
/// started: its command line names the pid file's directory (every process `up` starts
/// is given a path under it), so a stale pid file whose pid now belongs to another
/// process (after a reboot) is not taken for a running node, nor signalled by `down`.
fn running(pid_file: &Path) -> Option<u32> {
    let pid: u32 = fs::read_to_string(pid_file).ok()?.trim().parse().ok()?;
    let dir = pid_file.parent()?.to_str()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let ours = cmdline.split(|&b| b == 0).any(|arg| String::from_utf8_lossy(arg).contains(dir));
    (ours && alive(pid)).then_some(pid)
}

/// Whether `pid` is a live process (not a zombie).
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()).is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

fn tcp_open(addr: &str) -> bool {
    addr.parse::<SocketAddr>().is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

/// Whether `url`'s `/healthz` answers, trusting the CA in `ca_file` for https.
fn http_ok(url: &str, ca_file: Option<&Path>) -> bool {
    let ca = ca_file.and_then(|f| fs::read(f).ok());
    let Ok(tls) = crate::tls::ureq_tls(ca.as_deref()) else { return false };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(1)))
        .http_status_as_error(false)
        .tls_config(tls)
        .build()
        .into();
    agent.get(format!("{url}/healthz")).call().is_ok_and(|r| r.status().is_success())
}

/// Waits until every node is healthy or `timeout` passes; returns the statuses.
pub fn wait_healthy(cluster: &ClusterDir, timeout: Duration) -> anyhow::Result<Vec<ProcessStatus>> {
    wait_healthy_of(cluster, timeout, |_| true)
}

/// Waits until the processes `of` picks are healthy.
pub fn wait_healthy_of(cluster: &ClusterDir, timeout: Duration, of: impl Fn(&str) -> bool) -> anyhow::Result<Vec<ProcessStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        let status = cluster.status()?;
        if status.iter().filter(|s| of(&s.name)).all(|s| s.healthy) {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let bad: BTreeMap<&str, Option<u32>> =
                status.iter().filter(|s| of(&s.name) && !s.healthy).map(|s| (s.name.as_str(), s.pid)).collect();
            bail!("not healthy after {timeout:?}: {bad:?} (see their logs under {}/nodes)", cluster.dir.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
