//! `node.toml`: the roles one `tally node` process runs and the settings of each, as
//! `tally cluster init` writes them and [`NodeConfig::load`] checks them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use tally_control::MemberRole;
use tally_logsvc::NodeId;
use tally_runtime::config::{Config, IndexConfig, Limits, LocalIndexConfig, NodeLimits, StateConfig};

/// A role of the shared log: its node id and the UDP port of its QUIC endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogRole {
    pub id: u32,
    pub port: u16,
}

/// The function role: an engine (a log role) and the runtime over it, with an HTTP API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionRole {
    pub id: u32,
    pub port: u16,
    /// The HTTP address of this node's API (invocations, deploys, books).
    pub http: String,
    /// Test hook: the engine learns of metalog entries this long after they arrive (a
    /// lagging node). 0 in production.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub metalog_delay_ms: u64,
    /// `[function.local_index]`: the node's local index in partial mode, bounded in
    /// bytes (the defaults when absent; `enabled = false` runs without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_index: Option<LocalIndexConfig>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The gateway role: an HTTP front that routes to the function nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayRole {
    /// Its id among the cluster's members (it has no log endpoint).
    pub id: u32,
    pub http: String,
}

/// The controller role, and the cluster's shape it installs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerRole {
    pub id: u32,
    pub port: u16,
    /// Written into etcd by the first controller to start; later ones use what is
    /// there (and say so when theirs differ).
    #[serde(default = "default_n_logs")]
    pub n_logs: u8,
    /// Partial mode's index tier (`[controller.index]`: shards, replicas); absent:
    /// complete mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<tally_control::IndexShape>,
    #[serde(default = "default_replication")]
    pub n_meta: usize,
    #[serde(default = "default_replication")]
    pub n_data: usize,
    /// A node silent this long is sealed out by a reconfiguration.
    #[serde(default = "default_failure_timeout_ms")]
    pub failure_timeout_ms: u64,
    /// `synced` (the default: an acknowledged append survives a power loss of every
    /// machine) or `replicated` (entries are not synced before the acknowledgement: it
    /// survives as long as a majority of each metalog's sequencers keep power; needs
    /// `n_meta >= 3`). See the README.
    #[serde(default)]
    pub metalog: tally_logsvc::MetalogMode,
}

fn default_n_logs() -> u8 {
    1
}

fn default_replication() -> usize {
    3
}

fn default_failure_timeout_ms() -> u64 {
    1_000
}

/// A node's configuration file (`tally node --config node.toml`). Unknown keys and
/// roles are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The cluster's name: its keys in etcd live under `/tally/<cluster>/`.
    pub cluster: String,
    /// This process's name (the certificate's holder, and what `cluster status` shows).
    pub name: String,
    /// etcd's client URLs.
    pub etcd: Vec<String>,
    /// Every node's data lives under here, one directory per role.
    pub data_dir: PathBuf,
    /// The directory of this process's certificate (`ca.der`, `node.der`,
    /// `node.key.der`), issued by `tally cluster init`.
    pub certs: PathBuf,
    /// The address the other nodes reach this one at; every endpoint binds on it.
    pub host: String,
    /// The node ids of every controller of the cluster (heartbeats go to all).
    pub controllers: Vec<u32>,
    #[serde(default)]
    pub controller: Option<ControllerRole>,
    #[serde(default)]
    pub sequencer: Option<LogRole>,
    #[serde(default)]
    pub storage: Option<LogRole>,
    #[serde(default)]
    pub function: Option<FunctionRole>,
    #[serde(default)]
    pub gateway: Option<GatewayRole>,
    /// An index node of the index tier (partial mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<LogRole>,
    /// An aggregator of the index tier's lookups (partial mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregator: Option<LogRole>,
    /// The address `GET /metrics` of this process's index role is served on (a
    /// function role's API serves its own); over HTTPS when the process has a
    /// certificate (`tls_cert_file`), which `tally cluster init` gives only processes
    /// with an HTTP API, so plain HTTP in a storage or sequencer process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// The bearer token a scrape of `metrics` must send (`Authorization: Bearer ...`);
    /// required with `metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_token_file: Option<PathBuf>,
    /// Per-function defaults of the function role.
    #[serde(default)]
    pub limits: Limits,
    /// Bounds of the function role's node.
    #[serde(default)]
    pub node_limits: NodeLimits,
    /// The function role's state store.
    #[serde(default)]
    pub state: StateConfig,
    /// Where the function role keeps compiled components (default: its data
    /// directory's `artifacts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts_dir: Option<PathBuf>,
    /// The key that seals functions' secrets: the same file for every function role of
    /// the cluster (`tally cluster init` makes it), else the data directory's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_key_file: Option<PathBuf>,
    /// The cluster's bootstrap admin token (`tally cluster init` makes it): every
    /// function role grants it once. A cluster's nodes always ask for tokens.
    pub admin_token_file: Option<PathBuf>,
    /// HTTPS of the function role's API and the gateway role: this process's
    /// certificate and key (PEM; `tally cluster init` issues them from the cluster's
    /// CA), and the CA a gateway trusts the function nodes' certificates by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<PathBuf>,
    /// A test hook: while this file exists, every message of this process's log roles
    /// to or from another node is dropped, as a network partition would (etcd and HTTP
    /// stay reachable). Checked every 100 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_file: Option<PathBuf>,
    /// Traces of the function role's executions (`[observe]` of a node's config).
    #[serde(default)]
    pub observe: tally_runtime::config::ObserveConfig,
}

impl NodeConfig {
    pub fn load(path: &Path) -> anyhow::Result<NodeConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: NodeConfig = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        config.validate().with_context(|| format!("{}", path.display()))?;
        Ok(config)
    }

    /// Every member id of this process (its log roles and its gateway).
    pub fn ids(&self) -> Vec<u32> {
        let gateway = self.gateway.iter().map(|g| g.id);
        self.log_roles().into_iter().map(|(n, _, _)| n.0).chain(gateway).collect()
    }

    /// Every port this process listens on.
    pub fn ports(&self) -> Vec<u16> {
        let http = self.function.iter().map(|f| &f.http).chain(self.gateway.iter().map(|g| &g.http)).chain(&self.metrics);
        let http = http.filter_map(|a| a.rsplit_once(':').and_then(|(_, p)| p.parse().ok()));
        self.log_roles().into_iter().map(|(_, _, port)| port).chain(http).collect()
    }

    /// The log roles of this process: (id, role, port).
    pub fn log_roles(&self) -> Vec<(NodeId, MemberRole, u16)> {
        let mut roles = Vec::new();
        if let Some(c) = &self.controller {
            roles.push((NodeId(c.id), MemberRole::Controller, c.port));
        }
        if let Some(s) = &self.sequencer {
            roles.push((NodeId(s.id), MemberRole::Sequencer, s.port));
        }
        if let Some(s) = &self.storage {
            roles.push((NodeId(s.id), MemberRole::Storage, s.port));
        }
        if let Some(f) = &self.function {
            roles.push((NodeId(f.id), MemberRole::Engine, f.port));
        }
        if let Some(x) = &self.index {
            roles.push((NodeId(x.id), MemberRole::Index, x.port));
        }
        if let Some(a) = &self.aggregator {
            roles.push((NodeId(a.id), MemberRole::Aggregator, a.port));
        }
        roles
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.metrics.is_some() && self.metrics_token_file.is_none() {
            bail!("`metrics` needs `metrics_token_file`: its scrapes ask for a token");
        }
        let roles = self.log_roles();
        if roles.is_empty() && self.gateway.is_none() {
            bail!("a node needs at least one role: controller, sequencer, storage, function, index or gateway");
        }
        if self.etcd.is_empty() {
            bail!("`etcd` lists no endpoint");
        }
        if self.controllers.is_empty() {
            bail!("`controllers` lists no controller id");
        }
        let mut ids = BTreeSet::new();
        let mut ports = BTreeSet::new();
        for (id, role, port) in &roles {
            if !ids.insert(*id) {
                bail!("node id {} is given to two roles", id.0);
            }
            if *port != 0 && !ports.insert(*port) {
                bail!("port {port} is given to two roles ({role:?} among them)");
            }
        }
        if let Some(g) = &self.gateway {
            if !ids.insert(NodeId(g.id)) {
                bail!("node id {} is given to two roles", g.id);
            }
            if self.function.as_ref().is_some_and(|f| f.http == g.http) {
                bail!("the gateway and the function role both listen on {}", g.http);
            }
        }
        if let Some(c) = &self.controller {
            if !self.controllers.contains(&c.id) {
                bail!("the controller role's id {} is not in `controllers`", c.id);
            }
            if c.n_logs == 0 || c.n_meta == 0 || c.n_data == 0 {
                bail!("[controller] n_logs, n_meta and n_data must be positive");
            }
            if c.metalog == tally_logsvc::MetalogMode::Replicated && c.n_meta < 3 {
                bail!("[controller] metalog = \"replicated\" needs n_meta >= 3 (a majority of sequencers must outlive a power loss)");
            }
        }
        if let Some(f) = &self.function {
            if self.admin_token_file.is_none() {
                bail!("a function role needs `admin_token_file` (`tally cluster init` writes one): a cluster asks every request for a token");
            }
            self.runtime_config(f).validate()?;
        }
        Ok(())
    }

    pub(super) fn runtime_config(&self, f: &FunctionRole) -> Config {
        Config {
            data_dir: self.data_dir.join(format!("function-{}", f.id)),
            listen: f.http.clone(),
            artifacts_dir: self.artifacts_dir.clone(),
            secrets_key_file: self.secrets_key_file.clone(),
            auth: tally_runtime::config::AuthMode::Token,
            admin_token_file: self.admin_token_file.clone(),
            tls_cert_file: self.tls_cert_file.clone(),
            tls_key_file: self.tls_key_file.clone(),
            limits: self.limits,
            node: self.node_limits.clone(),
            state: self.state.clone(),
            // The cluster's index mode is the controller's (`Configuration::tier`); of a
            // dev node's `[index]` section only the local index's bounds apply.
            index: IndexConfig { local: f.local_index.unwrap_or_default(), ..IndexConfig::default() },
            observe: self.observe.clone(),
        }
    }
}
