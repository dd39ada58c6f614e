//! The peers a user would pick instead of Tally, started for real on this machine:
//! Redis (Debian `redis-server`) for a durable log, PostgreSQL (Debian `postgresql`)
//! for durable state, and the bare disk (a file appended to and fdatasync'd) as the
//! physical limit of one durable write.
//!
//! A missing Debian package is installed with apt-get when the bench runs as root (as
//! `scripts/env.sh` does for the test suite); otherwise the error names the package.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use tally_state::PgServer;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::log::Op;
use crate::report::{micros, Samples};

/// Finds `program` on PATH, installing Debian package `package` first if it is
/// missing and this process may.
pub fn debian_program(program: &str, package: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = on_path(program) {
        return Ok(path);
    }
    ensure!(is_root(), "{program} is missing: install the Debian package {package} (apt-get install {package})");
    eprintln!("bench: installing the Debian package {package}");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running apt-get {args:?}"))
    };
    if !apt(&["install", "-y", "-qq", package])?.success() {
        apt(&["update", "-qq"])?;
        ensure!(apt(&["install", "-y", "-qq", package])?.success(), "apt-get install {package} failed");
    }
    on_path(program).with_context(|| format!("{package} is installed but {program} is not on PATH"))
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false)
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// A `redis-server` of its own on loopback, with an append-only file fsynced before
/// every reply (`appendfsync always`): the durability a Tally append gives. Stopped
/// and its directory deleted on drop.
pub struct Redis {
    pub addr: SocketAddr,
    pub version: String,
    child: Child,
    _dir: TempDir,
}

impl Redis {
    pub fn start() -> anyhow::Result<Redis> {
        let server = debian_program("redis-server", "redis-server")?;
        let version = Command::new(&server).arg("--version").output().context("running redis-server --version")?;
        let version = String::from_utf8_lossy(&version.stdout)
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("?")
            .to_string();
        let dir = tempfile::Builder::new().prefix("tally-bench-redis").tempdir().context("creating Redis's directory")?;
        // A free port: bound, read and released just before the server binds it.
        let port = StdListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let child = Command::new(&server)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--dir"])
            .arg(dir.path())
            .args(["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"])
            .arg("--logfile")
            .arg(dir.path().join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", server.display()))?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut redis = Redis { addr, version, child, _dir: dir };
        redis.wait_ready()?;
        Ok(redis)
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("redis-server exited with {status} before accepting connections");
            }
            if let Ok(mut s) = std::net::TcpStream::connect(self.addr) {
                s.write_all(b"PING\r\n")?;
                let mut reply = [0u8; 7];
                if std::io::Read::read_exact(&mut s, &mut reply).is_ok() && &reply == b"+PONG\r\n" {
                    return Ok(());
                }
            }
            ensure!(Instant::now() < deadline, "redis-server did not answer PING within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub async fn xadders(&self, n: usize, stream: &str, field: &[u8]) -> anyhow::Result<Vec<Xadd>> {
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let conn = TcpStream::connect(self.addr).await.context("connecting to Redis")?;
            conn.set_nodelay(true)?;
            ops.push(Xadd { conn: BufReader::new(conn), command: xadd_command(stream, field), reply: Vec::new() });
        }
        Ok(ops)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A PostgreSQL server of its own with PostgreSQL's default durability (`fsync` and
/// `synchronous_commit` on: a commit returns once its WAL is flushed), listening only on
/// a unix socket in its directory. Unlike `tally_state::TempPostgres`, which runs with
/// `fsync=off` for the tests' speed, it is what a user would run, and as durable as
/// Tally, whose state store and log sync every write. Stopped (immediate mode) and its
/// directory deleted on drop.
pub struct Postgres {
    server: PgServer,
    dir: TempDir,
}

impl Postgres {
    /// Initialises a database cluster and starts the server; blocks for a second or two.
    pub fn start() -> anyhow::Result<Postgres> {
        let dir = tempfile::Builder::new().prefix("tally-bench-pg").tempdir().context("creating PostgreSQL's directory")?;
        // As root, the server runs as the `postgres` user, which must reach its data
        // directory and create its socket here.
        if is_root() {
            let status = Command::new("chown").arg("postgres:postgres").arg(dir.path()).status().context("running chown")?;
            ensure!(status.success(), "chown postgres {} failed", dir.path().display());
        }
        let server = PgServer::new(&dir.path().join("data"));
        // Without initdb's final sync: the data directory is thrown away after the run.
        server.init(false)?;
        let socket_dir = dir.path().to_str().context("the temporary directory's path is not UTF-8")?;
        server.start(&format!("-c listen_addresses='' -k {socket_dir}"), &dir.path().join("server.log"))?;
        Ok(Postgres { server, dir })
    }

    /// The libpq-style connection string to the database `dbname`.
    pub fn conninfo(&self, dbname: &str) -> String {
        format!("host={} user=postgres dbname={dbname}", self.dir.path().display())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Err(e) = self.server.stop("immediate") {
            eprintln!("bench: could not stop PostgreSQL: {e}");
        }
    }
}

/// `XADD <stream> * d <field>` in RESP.
fn xadd_command(stream: &str, field: &[u8]) -> Vec<u8> {
    resp_command(&[b"XADD", stream.as_bytes(), b"*", b"d", field])
}

/// A command in RESP: an array of bulk strings.
fn resp_command(args: &[&[u8]]) -> Vec<u8> {
    let mut c = Vec::new();
    write!(c, "*{}\r\n", args.len()).expect("writes to a Vec succeed");
    for a in args {
        write!(c, "${}\r\n", a.len()).expect("writes to a Vec succeed");
        c.extend_from_slice(a);
        c.extend_from_slice(b"\r\n");
    }
    c
}

/// A reply of Redis, as RESP 2 has them.
#[derive(Debug, PartialEq)]
pub enum Resp {
    Simple(String),
    Integer(i64),
    /// A bulk string; `None` is the null bulk string.
    Bulk(Option<Vec<u8>>),
    /// An array; `None` is the null array (a blocking read that timed out).
    Array(Option<Vec<Resp>>),
}

/// Elements of a reply the client accepts, so that a garbled length cannot make it
/// allocate without bound.
const RESP_ELEMENTS_MAX: usize = 1 << 20;

/// One connection to Redis, one command at a time.
pub struct RedisConn {
    conn: BufReader<TcpStream>,
    line: String,
}

impl RedisConn {
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<RedisConn> {
        let conn = TcpStream::connect(addr).await.context("connecting to Redis")?;
        conn.set_nodelay(true)?;
        Ok(RedisConn { conn: BufReader::new(conn), line: String::new() })
    }

    /// Sends a command and reads its reply; an error reply is an error.
    pub async fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<Resp> {
        self.conn.get_mut().write_all(&resp_command(args)).await.context("sending a command to Redis")?;
        self.reply().await.with_context(|| format!("reading the reply to {}", String::from_utf8_lossy(args[0])))
    }

    /// One value of a reply; arrays nest, so this boxes its recursion.
    fn reply(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Resp>> + Send + '_>> {
        Box::pin(async move {
            self.line.clear();
            ensure!(self.conn.read_line(&mut self.line).await? > 0, "Redis closed the connection");
            let line = self.line.trim_end();
            let (kind, rest) = line.split_at(1.min(line.len()));
            let length = || -> anyhow::Result<Option<usize>> {
                let n: i64 = rest.parse().with_context(|| format!("a RESP length {line:?}"))?;
                ensure!(n < RESP_ELEMENTS_MAX as i64, "a RESP length {n}");
                Ok(usize::try_from(n).ok())
            };
            Ok(match kind {
                "+" => Resp::Simple(rest.to_owned()),
                "-" => bail!("Redis answered {rest}"),
                ":" => Resp::Integer(rest.parse().with_context(|| format!("a RESP integer {line:?}"))?),
                "$" => match length()? {
                    None => Resp::Bulk(None),
                    Some(n) => {
                        let mut bulk = vec![0; n + 2];
                        self.conn.read_exact(&mut bulk).await?;
                        bulk.truncate(n);
                        Resp::Bulk(Some(bulk))
                    }
                },
                "*" => match length()? {
                    None => Resp::Array(None),
                    Some(n) => {
                        let mut elements = Vec::with_capacity(n);
                        for _ in 0..n {
                            elements.push(self.reply().await?);
                        }
                        Resp::Array(Some(elements))
                    }
                },
                _ => bail!("a RESP reply {line:?}"),
            })
        })
    }
}

/// One Redis client appending the same entry to one stream, a request at a time.
pub struct Xadd {
    conn: BufReader<TcpStream>,
    command: Vec<u8>,
    reply: Vec<u8>,
}

impl Op for Xadd {
    async fn call(&mut self) -> anyhow::Result<()> {
        self.conn.get_mut().write_all(&self.command).await.context("sending XADD")?;
        // The reply is the new entry's id as a bulk string: `$<len>\r\n<id>\r\n`.
        self.reply.clear();
        self.conn.read_until(b'\n', &mut self.reply).await.context("reading XADD's reply")?;
        let header = std::str::from_utf8(&self.reply).unwrap_or("").trim_end();
        let Some(len) = header.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) else {
            bail!("XADD answered {header:?}");
        };
        self.reply.resize(len + 2, 0);
        self.conn.read_exact(&mut self.reply).await.context("reading XADD's entry id")?;
        Ok(())
    }
}

/// Durable appends of `record_bytes` to new files in `dir`, for `warmup + window`, one
/// after another: each is `stages`, in order, where a stage of `k` writes to `k` files
/// at once (one thread each) and fdatasyncs each. `[1]` is the latency of one durable
/// append on this disk with nothing else in the way; `[n, 2]` the critical path of a
/// shared-log append on one disk (n storage replicas, then a metalog quorum of two).
/// Runs on threads of its own.
pub async fn fsync_loop(
    dir: &Path,
    stages: Vec<usize>,
    record_bytes: usize,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Samples> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        // A stage of no file is one of one: an iteration appends somewhere.
        let stages: Vec<usize> = stages.into_iter().map(|k| k.max(1)).collect();
        let width = stages.iter().copied().max().unwrap_or(1);
        let paths: Vec<PathBuf> = (0..width).map(|i| dir.join(format!("fsync-loop-{i}"))).collect();
        let open = |path: &PathBuf| {
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(path)
                .with_context(|| format!("creating {}", path.display()))
        };
        let mut files = paths.iter().map(open).collect::<anyhow::Result<Vec<_>>>()?;
        let record = vec![0x5au8; record_bytes];
        let append = |file: &mut std::fs::File| -> std::io::Result<()> {
            file.write_all(&record)?;
            file.sync_data()
        };
        let latencies = std::thread::scope(|scope| -> anyhow::Result<Vec<u32>> {
            // A helper thread per file past the first, told to append by a message.
            let (done_tx, done_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
            let mut own = files.remove(0);
            let helpers: Vec<_> = files
                .into_iter()
                .map(|mut file| {
                    let (go, went) = std::sync::mpsc::channel::<()>();
                    let done = done_tx.clone();
                    scope.spawn(move || {
                        while went.recv().is_ok() {
                            let _ = done.send(append(&mut file));
                        }
                    });
                    go
                })
                .collect();
            let from = Instant::now() + warmup;
            let end = from + window;
            let mut latencies = Vec::new();
            loop {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                for &k in &stages {
                    for go in &helpers[..k - 1] {
                        go.send(()).context("a helper thread stopped")?;
                    }
                    append(&mut own)?;
                    for _ in 1..k {
                        done_rx.recv().context("a helper thread stopped")??;
                    }
                }
                let done = Instant::now();
                if (from..end).contains(&done) {
                    latencies.push(micros(done - sent));
                }
            }
            drop(helpers);
            Ok(latencies)
        })?;
        for path in &paths {
            std::fs::remove_file(path)?;
        }
        Ok(Samples { latencies_us: latencies, window })
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stages wider than one file run (helper threads that fail would fail the loop),
    /// each iteration is timed, and the files are gone afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_fsync_loop_runs_its_stages_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let samples = fsync_loop(dir.path(), vec![3, 2], 100, Duration::ZERO, Duration::from_millis(50)).await.unwrap();
        assert!(!samples.latencies_us.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the loop's files are removed");
    }

    #[test]
    fn an_xadd_command_is_resp_with_lengths_in_bytes() {
        let c = xadd_command("s", b"\xffab");
        assert_eq!(c, b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nd\r\n$3\r\n\xffab\r\n");
    }
}
