//! The harness of the multi-process tests: `tally cluster` run over a directory whose
//! processes stop when a test ends, however it ends.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common::{self, Node};

pub const TALLY: &str = env!("CARGO_BIN_EXE_tally");

pub fn tally(args: &[&str], dir: &Path) -> (bool, String, String) {
    let out = Command::new(TALLY)
        .args(args)
        .arg(dir)
        // TALLY_TEST_LOG: the nodes' RUST_LOG, for a run that needs more.
        .env(
            "RUST_LOG",
            std::env::var("TALLY_TEST_LOG").unwrap_or_else(|_| "warn,tally::node=info,tally_logsvc::driver::index=info".into()),
        )
        .env("TALLY_CONFIG_DIR", dir.join("cli"))
        .output()
        .expect("running tally");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A cluster directory whose processes are stopped when the test ends, however it ends.
pub struct Cluster {
    pub dir: tempfile::TempDir,
}

/// `tally cluster init` of a new directory with the `shape` flags.
pub fn init(shape: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["cluster", "init"];
    args.extend(shape);
    // `tally` puts DIR last; the flags come first.
    let (ok, _, err) = tally(&args, dir.path());
    assert!(ok, "cluster init: {err}");
    dir
}

impl Cluster {
    pub fn up(shape: &[&str]) -> (Cluster, String) {
        let c = Cluster { dir: init(shape) };
        let url = c.start();
        (c, url)
    }

    /// `tally cluster up` over the directory; returns the URL it printed first.
    pub fn start(&self) -> String {
        let (ok, out, err) = tally(&["cluster", "up", "--wait-s", "90"], self.dir.path());
        assert!(ok, "cluster up: {err}\n{}", self.logs());
        common::use_token(&self.admin_token());
        common::use_ca(&std::fs::read(self.dir.path().join("ca").join("http-ca.pem")).unwrap());
        out.lines().next().expect("a URL").to_string()
    }

    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ca").join("admin.token")).unwrap().trim().to_string()
    }

    pub fn status(&self) -> Vec<Value> {
        self.status_json()["processes"].as_array().unwrap().clone()
    }

    /// `cluster status --json`: the term and version etcd holds, and every process.
    pub fn status_json(&self) -> Value {
        let (ok, out, err) = tally(&["cluster", "status", "--json"], self.dir.path());
        assert!(ok, "cluster status: {err}");
        serde_json::from_str::<Value>(&out).unwrap()
    }

    /// SIGKILLs the process named `name`; returns its pid.
    pub fn kill(&self, name: &str) -> u64 {
        let status = self.status();
        let p = status.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no process {name}"));
        let pid = p["pid"].as_u64().unwrap_or_else(|| panic!("{name} is not running: {p}"));
        let ok = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success();
        assert!(ok);
        pid
    }

    /// The id of process `name`'s index role.
    pub fn index_id(&self, name: &str) -> u64 {
        self.index_ids().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} has no index role")).1
    }

    /// Every process with an index role, and the role's id.
    pub fn index_ids(&self) -> Vec<(String, u64)> {
        let nodes = std::fs::read_dir(self.dir.path().join("nodes")).unwrap().flatten();
        let id = |e: std::fs::DirEntry| {
            let node = tally::node::NodeConfig::load(&e.path().join("node.toml")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), u64::from(node.index?.id)))
        };
        nodes.filter_map(id).collect()
    }

    /// The processes with an aggregator role.
    pub fn aggregator_processes(&self) -> Vec<String> {
        let nodes = std::fs::read_dir(self.dir.path().join("nodes")).unwrap().flatten();
        let host = |e: std::fs::DirEntry| {
            let node = tally::node::NodeConfig::load(&e.path().join("node.toml")).ok()?;
            node.aggregator.map(|_| e.file_name().to_string_lossy().into_owned())
        };
        nodes.filter_map(host).collect()
    }

    /// Every process's index role id and the `/metrics` text its process serves.
    pub fn index_metrics(&self) -> Vec<(u64, String)> {
        let nodes = std::fs::read_dir(self.dir.path().join("nodes")).unwrap().flatten();
        let scrape = |e: std::fs::DirEntry| {
            let name = e.file_name().to_string_lossy().into_owned();
            let node = tally::node::NodeConfig::load(&e.path().join("node.toml")).ok()?;
            Some((u64::from(node.index?.id), self.metrics_of(&name)))
        };
        nodes.filter_map(scrape).collect()
    }

    /// The `/metrics` text process `name` serves on its metrics address, with the
    /// cluster's metrics token (the admin token is refused).
    pub fn metrics_of(&self, name: &str) -> String {
        let node = tally::node::NodeConfig::load(&self.dir.path().join("nodes").join(name).join("node.toml")).unwrap();
        // Over HTTPS when the process has a certificate (one with an HTTP API).
        let scheme = if node.tls_cert_file.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", node.metrics.unwrap_or_else(|| panic!("{name} has no metrics address")));
        let refused = node_at(&url).send("GET", "/metrics", &[], b"").status;
        assert_eq!(refused, 401, "GET {url}/metrics with the admin token");
        let token = std::fs::read_to_string(node.metrics_token_file.expect("a metrics token")).unwrap();
        let bearer = format!("Bearer {}", token.trim());
        let answer = node_at(&url).send("GET", "/metrics", &[("authorization", &bearer)], b"");
        assert_eq!(answer.status, 200, "GET {url}/metrics");
        answer.text()
    }

    pub fn log_of(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("nodes").join(name).join("node.log")).unwrap_or_default()
    }

    /// The controller process that leads (the one whose log says it took the lead).
    pub fn leader(&self) -> String {
        let leads = |name: &str| {
            let log = std::fs::read_to_string(self.dir.path().join("nodes").join(name).join("node.log")).unwrap_or_default();
            log.contains("leading the cluster's controllers")
        };
        let leaders: Vec<&str> = ["controller-1", "controller-2"].into_iter().filter(|n| leads(n)).collect();
        assert_eq!(leaders.len(), 1, "one controller leads: {leaders:?}");
        leaders[0].to_string()
    }

    pub fn down(&self) {
        let (ok, _, err) = tally(&["cluster", "down"], self.dir.path());
        assert!(ok, "cluster down: {err}");
    }

    /// The tail of every node's log, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let nodes = self.dir.path().join("nodes");
        for entry in std::fs::read_dir(nodes).into_iter().flatten().flatten() {
            let log = std::fs::read_to_string(entry.path().join("node.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            out += &format!(
                "--- {}\n{}\n",
                entry.file_name().to_string_lossy(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = tally(&["cluster", "down"], self.dir.path());
        // TALLY_KEEP_CLUSTER=DIR keeps a failed test's cluster directory (logs, data).
        if let Some(keep) = std::env::var_os("TALLY_KEEP_CLUSTER").filter(|_| thread::panicking()) {
            let to = Path::new(&keep).join(format!("cluster-{}", std::process::id()));
            let _ = Command::new("cp").arg("-r").arg(self.dir.path()).arg(&to).status();
            eprintln!("the cluster directory is kept in {}", to.display());
        }
    }
}

pub fn node_at(url: &str) -> Node {
    Node::attach(url)
}

/// POSTs with a key until some node answers 200, trying `urls` in turn.
pub fn until_ok(urls: &[String], path: &str, body: &str, key: &str) -> String {
    let mut i = 0;
    let next = || {
        i += 1;
        urls[(i - 1) % urls.len()].clone()
    };
    common::until_ok(next, path, body, key, Duration::from_millis(50))
}
