//! A throwaway etcd on loopback, for tests: one member, or a cluster of several, each a
//! real `etcd` child process (Debian's etcd-server, v3.4) with its data in a temporary
//! directory.
//!
//! Ports are picked by binding 127.0.0.1:0 and releasing the port before etcd binds it;
//! another process may take one in between, so a start that fails is tried again with
//! fresh ports, three times in all. etcd's log goes to `<member>.log` in the directory,
//! and its tail is in the error when a member does not start. The directory is in
//! /dev/shm when there is one: etcd fsyncs its WAL on every write, and a slow disk on a
//! loaded machine would otherwise stall the short election timeout used here. Set
//! `TALLY_KEEP_DIR` to keep the directory (its path is printed) when a test panics.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tempfile::TempDir;
use tokio::time::{sleep, timeout, Instant};

/// How long a member may take to answer after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Starts tried, each with fresh ports, before giving up.
const START_ATTEMPTS: usize = 3;
/// One readiness probe's time limit, and the pause between probes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const PROBE_PAUSE: Duration = Duration::from_millis(50);
/// How much of a member's log an error quotes.
const LOG_TAIL_BYTES: u64 = 3000;

/// Running etcd members on loopback with their data in a temporary directory; killed
/// (SIGKILL) and reaped on drop. See the module doc.
pub struct TempEtcd {
    dir: Option<TempDir>,
    members: Vec<EtcdMember>,
    /// `--initial-cluster-token`: unique per `TempEtcd`, so members of two test clusters
    /// that got each other's old ports never join up.
    token: String,
}

struct EtcdMember {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl TempEtcd {
    /// Starts a one-member etcd and returns once it answers a read.
    pub async fn start() -> io::Result<TempEtcd> {
        TempEtcd::cluster(1).await
    }

    /// Starts an etcd cluster of `n` members (each its own data directory and ports)
    /// and returns once every member answers a linearizable read.
    pub async fn cluster(n: usize) -> io::Result<TempEtcd> {
        assert!(n >= 1, "an etcd cluster has at least one member");
        static CLUSTERS: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("tally-etcd-");
            b
        };
        let dir = if shm.is_dir() { builder.tempdir_in(shm)? } else { builder.tempdir()? };
        let token = format!("tally-{}-{}", std::process::id(), CLUSTERS.fetch_add(1, Ordering::Relaxed));
        let mut etcd = TempEtcd { dir: Some(dir), members: Vec::new(), token };
        let mut failures = Vec::new();
        for attempt in 1..=START_ATTEMPTS {
            let ports = free_ports(2 * n)?;
            etcd.members = (0..n)
                .map(|i| EtcdMember {
                    name: format!("m{i}"),
                    client_port: ports[2 * i],
                    peer_port: ports[2 * i + 1],
                    child: None,
                })
                .collect();
            // A new attempt starts from nothing; a restart appends to the log instead.
            for i in 0..n {
                let (data, log) = (etcd.data_dir(i), etcd.log_path(i));
                if data.exists() {
                    std::fs::remove_dir_all(&data)?;
                }
                if log.exists() {
                    std::fs::remove_file(&log)?;
                }
            }
            match etcd.start_members(&(0..n).collect::<Vec<_>>()).await {
                Ok(()) => return Ok(etcd),
                Err(e) => {
                    etcd.kill();
                    failures.push(format!("attempt {attempt}: {e}"));
                }
            }
        }
        Err(io::Error::other(format!("etcd did not start in {START_ATTEMPTS} attempts\n{}", failures.join("\n"))))
    }

    /// Every member's client URL (`http://127.0.0.1:<port>`), killed members included.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    /// The temporary directory: each member's data directory and log.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("present until dropped").path()
    }

    /// Kills every member (SIGKILL) and reaps it. Their data stays for a restart.
    pub fn kill(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
        }
    }

    /// Kills every member still running, then starts them all again over their data
    /// directories and ports, and returns once each answers a linearizable read.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.kill();
        self.start_members(&(0..self.members.len()).collect::<Vec<_>>()).await
    }

    /// Kills member `i` (SIGKILL) and reaps it; a member already killed stays so.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            // Errors mean it has exited already; wait() reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills member `i` if it runs, then starts it again over its data directory and
    /// ports, and returns once it answers a linearizable read (it needs a quorum).
    pub async fn restart_member(&mut self, i: usize) -> io::Result<()> {
        self.kill_member(i);
        self.start_members(&[i]).await
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir().join(&self.members[i].name)
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir().join(format!("{}.log", self.members[i].name))
    }

    /// Starts `which` members, all first, then waits for each: a member of a new
    /// cluster answers only once a quorum runs.
    async fn start_members(&mut self, which: &[usize]) -> io::Result<()> {
        for &i in which {
            self.spawn(i)?;
        }
        let deadline = Instant::now() + START_TIMEOUT;
        for &i in which {
            self.wait_ready(i, deadline).await?;
        }
        Ok(())
    }

    fn spawn(&mut self, i: usize) -> io::Result<()> {
        let url = |port: u16| format!("http://127.0.0.1:{port}");
        let initial_cluster: Vec<String> = self.members.iter().map(|m| format!("{}={}", m.name, url(m.peer_port))).collect();
        let log = OpenOptions::new().create(true).append(true).open(self.log_path(i))?;
        let member = &self.members[i];
        let mut command = Command::new(etcd_binary());
        // An ETCD_* variable in the environment would override the flags below.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ETCD_") {
                command.env_remove(name);
            }
        }
        command
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .arg("--listen-client-urls")
            .arg(url(member.client_port))
            .arg("--advertise-client-urls")
            .arg(url(member.client_port))
            .arg("--listen-peer-urls")
            .arg(url(member.peer_port))
            .arg("--initial-advertise-peer-urls")
            .arg(url(member.peer_port))
            .arg("--initial-cluster")
            .arg(initial_cluster.join(","))
            // Ignored by a member restarted over its data directory, as it should be.
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg(&self.token)
            // Loopback: a leader is re-elected within about a second.
            .arg("--heartbeat-interval")
            .arg("50")
            .arg("--election-timeout")
            .arg("500")
            .arg("--logger")
            .arg("zap")
            .arg("--log-outputs")
            .arg("stderr")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = command.spawn().map_err(|e| {
            io::Error::new(e.kind(), format!("running {:?}: {e} (Debian: apt-get install etcd-server)", etcd_binary()))
        })?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// Probes member `i` until it answers a linearizable read, it exits, or `deadline`.
    async fn wait_ready(&mut self, i: usize, deadline: Instant) -> io::Result<()> {
        let endpoint = self.endpoint(i);
        let options = ConnectOptions::new().with_connect_timeout(PROBE_TIMEOUT).with_timeout(PROBE_TIMEOUT);
        let mut client: Option<Client> = None;
        let mut last = String::from("no probe answered");
        loop {
            if let Some(status) = self.members[i].child.as_mut().expect("spawned").try_wait()? {
                return Err(self.start_error(i, &format!("it exited ({status})")));
            }
            if client.is_none() {
                match Client::connect([endpoint.as_str()], Some(options.clone())).await {
                    Ok(c) => client = Some(c),
                    Err(e) => last = e.to_string(),
                }
            }
            if let Some(c) = client.as_mut() {
                match timeout(PROBE_TIMEOUT, c.get("/tally-temp-etcd-probe", None)).await {
                    Ok(Ok(_)) => return Ok(()),
                    Ok(Err(e)) => last = e.to_string(),
                    Err(_) => last = format!("no answer within {PROBE_TIMEOUT:?}"),
                }
            }
            if Instant::now() >= deadline {
                return Err(self.start_error(i, &format!("it did not answer within {START_TIMEOUT:?}; last probe: {last}")));
            }
            sleep(PROBE_PAUSE).await;
        }
    }

    fn start_error(&self, i: usize, why: &str) -> io::Error {
        let path = self.log_path(i);
        let tail = log_tail(&path).unwrap_or_else(|e| format!("(cannot read it: {e})"));
        io::Error::other(format!(
            "etcd member {} ({}) did not start: {why}\n--- tail of {} ---\n{tail}",
            self.members[i].name,
            self.endpoint(i),
            path.display()
        ))
    }
}

impl Drop for TempEtcd {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() && std::env::var_os("TALLY_KEEP_DIR").is_some() {
            if let Some(dir) = self.dir.take() {
                eprintln!("keeping the etcd directory {}", dir.keep().display());
            }
        }
    }
}

impl std::fmt::Debug for TempEtcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempEtcd").field("endpoints", &self.endpoints()).field("dir", &self.dir()).finish()
    }
}

/// `etcd` from PATH, else Debian's.
fn etcd_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("etcd"))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"))
}

/// `n` distinct free loopback ports, all bound at once so none repeats, then released.
fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<io::Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

fn log_tail(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
