//! The PostgreSQL state store, for clusters whose nodes share one database; and
//! [`TempPostgres`], a throwaway local server for tests and development.
//!
//! Two tables hold the two key spaces (created at connect if missing):
//!
//! ```text
//!   tally_state_versions (tbl, key, version) -> value      multi-version
//!   tally_state_latest   (tbl, key) -> cursor, counter, value   single-version
//!   tally_state_replaced (tbl, key, superseded) -> cursor, counter, value
//! ```
//!
//! A row of `tally_state_latest` that an update with a greater cursor replaces is copied
//! into `tally_state_replaced` under that cursor by a trigger, in the same statement.
//!
//! Every operation is one statement, so PostgreSQL's per-statement atomicity is all the
//! concurrency control needed: first-put-wins is `ON CONFLICT DO NOTHING`, put-if-newer
//! is `ON CONFLICT DO UPDATE ... WHERE` on a row-wise version comparison (which re-checks
//! the condition against the locked row under concurrent updates).
//!
//! Versions are `u64` but PostgreSQL has only signed `BIGINT`, so they are stored with
//! the top bit flipped, which maps `u64` order onto `i64` order.
//!
//! One connection serves every caller; tokio-postgres pipelines concurrent statements
//! on it. A pool is future work, when one connection's throughput is the limit.
//!
//! Batches are one statement too: `put_if_newer_all` keeps only the newest put of each key
//! (one statement may update a row only once) and writes them all with one `INSERT ...
//! SELECT FROM unnest(...)` over arrays, so one commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use tokio_postgres::{Client, NoTls};

use tally_state_api::{check_table, Family, LatestPut, StateError, StateFuture, StateStore, Value, Version};

const SCHEMA: &str = "
    BEGIN;
    -- Serialises schema creation between nodes connecting at once: concurrent
    -- CREATE TABLE IF NOT EXISTS can otherwise fail on the catalog's unique index.
    SELECT pg_advisory_xact_lock(7461836599);
    CREATE TABLE IF NOT EXISTS tally_state_versions (
        tbl TEXT NOT NULL,
        key BYTEA NOT NULL,
        version BIGINT NOT NULL,
        value BYTEA,
        PRIMARY KEY (tbl, key, version)
    );
    CREATE TABLE IF NOT EXISTS tally_state_latest (
        tbl TEXT NOT NULL,
        key BYTEA NOT NULL,
        cursor BIGINT NOT NULL,
        counter BIGINT NOT NULL,
        value BYTEA,
        PRIMARY KEY (tbl, key)
    );
    -- The single-version rows replaced, by the cursor that replaced them, kept by a
    -- trigger in the replacing statement (`get_latest_at`, `trim_replaced`).
    CREATE TABLE IF NOT EXISTS tally_state_replaced (
        tbl TEXT NOT NULL,
        key BYTEA NOT NULL,
        superseded BIGINT NOT NULL,
        cursor BIGINT NOT NULL,
        counter BIGINT NOT NULL,
        value BYTEA,
        PRIMARY KEY (tbl, key, superseded)
    );
    CREATE OR REPLACE FUNCTION tally_state_keep_replaced() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO tally_state_replaced VALUES (OLD.tbl, OLD.key, NEW.cursor, OLD.cursor, OLD.counter, OLD.value)
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$;
    CREATE OR REPLACE TRIGGER tally_state_keep_replaced AFTER UPDATE ON tally_state_latest
        FOR EACH ROW WHEN (OLD.cursor < NEW.cursor) EXECUTE FUNCTION tally_state_keep_replaced();
    COMMIT;
";

/// A single-version row: table, key, version, value.
type LatestRow<'a> = (&'a str, &'a [u8], Version, Option<&'a [u8]>);

/// A [`StateStore`] in a PostgreSQL database.
pub struct PgStateStore {
    client: Client,
}

impl PgStateStore {
    /// Connects with a libpq-style `conninfo` (`host=... user=... dbname=...`; a `host`
    /// that is a directory means a unix socket) and creates the tables if missing.
    ///
    /// Spawns a task named by its purpose, the connection driver: it ends when the
    /// store is dropped, and on a connection error, after which every call fails.
    pub async fn connect(conninfo: &str) -> Result<Self, StateError> {
        let (client, connection) = tokio_postgres::connect(conninfo, NoTls).await.map_err(backend)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "state.postgres connection ended");
            }
        });
        client.batch_execute(SCHEMA).await.map_err(backend)?;
        Ok(PgStateStore { client })
    }

    /// Put-if-newer of each `(table, key)` of `puts` in one statement, so one commit;
    /// returns how many rows it wrote. A statement may update a row only once: the keys
    /// must be distinct.
    async fn upsert_if_newer(&self, puts: &[LatestRow<'_>]) -> Result<u64, StateError> {
        let tables: Vec<&str> = puts.iter().map(|p| p.0).collect();
        let keys: Vec<&[u8]> = puts.iter().map(|p| p.1).collect();
        let cursors: Vec<i64> = puts.iter().map(|p| to_sql(p.2.cursor)).collect();
        let counters: Vec<i64> = puts.iter().map(|p| i64::from(p.2.counter)).collect();
        let values: Vec<Option<&[u8]>> = puts.iter().map(|p| p.3).collect();
        self.client
            .execute(
                "INSERT INTO tally_state_latest AS s (tbl, key, cursor, counter, value)
                 SELECT * FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::bigint[], $5::bytea[])
                 ON CONFLICT (tbl, key) DO UPDATE
                 SET cursor = EXCLUDED.cursor, counter = EXCLUDED.counter,
                     value = EXCLUDED.value
                 WHERE (s.cursor, s.counter) < (EXCLUDED.cursor, EXCLUDED.counter)",
                &[&tables, &keys, &cursors, &counters, &values],
            )
            .await
            .map_err(backend)
    }
}

impl StateStore for PgStateStore {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        Box::pin(async move {
            check_table(table)?;
            let stored = self
                .client
                .execute(
                    "INSERT INTO tally_state_versions (tbl, key, version, value)
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&table, &key, &to_sql(version), &value.as_deref()],
                )
                .await
                .map_err(backend)?;
            Ok(stored == 1)
        })
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        Box::pin(async move {
            check_table(table)?;
            let row = self
                .client
                .query_opt(
                    "SELECT version, value FROM tally_state_versions
                     WHERE tbl = $1 AND key = $2 AND version <= $3
                     ORDER BY version DESC LIMIT 1",
                    &[&table, &key, &to_sql(at)],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|row| {
                let value: Option<Vec<u8>> = row.get(1);
                (from_sql(row.get(0)), value.map(Bytes::from))
            }))
        })
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        Box::pin(async move {
            check_table(table)?;
            let deleted = self
                .client
                .execute(
                    "DELETE FROM tally_state_versions WHERE tbl = $1 AND key = $2 AND version = $3",
                    &[&table, &key, &to_sql(version)],
                )
                .await
                .map_err(backend)?;
            Ok(deleted == 1)
        })
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        Box::pin(async move {
            check_table(table)?;
            Ok(self.upsert_if_newer(&[(table, key, version, value.as_deref())]).await? == 1)
        })
    }

    /// One statement for all of them, so one commit (one WAL flush). Of several puts to
    /// one key only the newest is sent: the others would be overwritten by it anyway.
    fn put_if_newer_all<'a>(&'a self, puts: &'a [LatestPut]) -> StateFuture<'a, ()> {
        Box::pin(async move {
            let mut newest: BTreeMap<(&str, &[u8]), LatestRow<'_>> = BTreeMap::new();
            for p in puts {
                check_table(&p.table)?;
                let row = (p.table.as_str(), &p.key[..], p.version, p.value.as_deref());
                let slot = newest.entry((row.0, row.1)).or_insert(row);
                if row.2 > slot.2 {
                    *slot = row;
                }
            }
            if !newest.is_empty() {
                self.upsert_if_newer(&newest.into_values().collect::<Vec<_>>()).await?;
            }
            Ok(())
        })
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        Box::pin(async move {
            check_table(table)?;
            self.client
                .execute(
                    "INSERT INTO tally_state_latest (tbl, key, cursor, counter, value)
                     VALUES ($1, $2, $3, 0, $4)
                     ON CONFLICT (tbl, key) DO UPDATE
                     SET cursor = EXCLUDED.cursor, counter = 0, value = EXCLUDED.value",
                    &[&table, &key, &to_sql(0), &value.as_deref()],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        Box::pin(async move {
            check_table(table)?;
            let sql = match family {
                Family::Versions => {
                    "SELECT DISTINCT key FROM tally_state_versions
                     WHERE tbl = $1 AND ($2::bytea IS NULL OR key > $2) ORDER BY key LIMIT $3"
                }
                Family::Latest => {
                    "SELECT key FROM tally_state_latest
                     WHERE tbl = $1 AND ($2::bytea IS NULL OR key > $2) ORDER BY key LIMIT $3"
                }
            };
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = self.client.query(sql, &[&table, &after, &limit]).await.map_err(backend)?;
            Ok(rows.iter().map(|r| Bytes::from(r.get::<_, Vec<u8>>(0))).collect())
        })
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        Box::pin(async move {
            check_table(table)?;
            let row = self
                .client
                .query_opt(
                    "SELECT cursor, counter, value FROM tally_state_latest
                     WHERE tbl = $1 AND key = $2",
                    &[&table, &key],
                )
                .await
                .map_err(backend)?;
            row.as_ref().map(latest_row).transpose()
        })
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        Box::pin(async move {
            check_table(table)?;
            // The stored row if it is that old, else the first replaced after `at` if
            // it was written by then: one of the two at most, in one snapshot.
            let row = self
                .client
                .query_opt(
                    "SELECT cursor, counter, value FROM tally_state_latest
                     WHERE tbl = $1 AND key = $2 AND cursor <= $3
                     UNION ALL
                     SELECT * FROM (
                        SELECT cursor, counter, value FROM tally_state_replaced
                        WHERE tbl = $1 AND key = $2 AND superseded > $3 ORDER BY superseded LIMIT 1
                     ) r WHERE r.cursor <= $3",
                    &[&table, &key, &to_sql(at)],
                )
                .await
                .map_err(backend)?;
            row.as_ref().map(latest_row).transpose()
        })
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        Box::pin(async move {
            check_table(table)?;
            self.client
                .execute("DELETE FROM tally_state_replaced WHERE tbl = $1 AND superseded <= $2", &[&table, &to_sql(floor)])
                .await
                .map_err(backend)
        })
    }
}

/// A `(cursor, counter, value)` row as a single-version entry.
fn latest_row(row: &tokio_postgres::Row) -> Result<(Version, Value), StateError> {
    let counter: i64 = row.get(1);
    let counter = u32::try_from(counter).map_err(|_| StateError::Corrupt(format!("write counter {counter}")))?;
    let value: Option<Vec<u8>> = row.get(2);
    Ok((Version { cursor: from_sql(row.get(0)), counter }, value.map(Bytes::from)))
}

fn backend(e: impl std::fmt::Display) -> StateError {
    StateError::Backend { backend: "postgres", message: e.to_string() }
}

/// Maps `u64` order onto `i64` order by flipping the top bit.
fn to_sql(v: u64) -> i64 {
    (v ^ (1 << 63)) as i64
}

fn from_sql(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// A PostgreSQL server over a data directory of its own, run with Debian's binaries:
/// the newest server under `/usr/lib/postgresql/<ver>/bin` (the `postgresql` package,
/// which `scripts/env.sh` installs), else the one on `PATH`. initdb and postgres refuse
/// to run as root, so as root they run as the `postgres` user the package creates,
/// with the data directory chowned to it (its parents must let that user through).
/// `tally cluster` runs one for the function nodes' shared state; [`TempPostgres`]
/// one per test.
pub struct PgServer {
    data: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
}

impl PgServer {
    pub fn new(data: &Path) -> PgServer {
        PgServer { data: data.to_path_buf(), bin: server_bin_dir(), as_postgres: is_root() }
    }

    /// Creates the database cluster (trust authentication, user `postgres`) unless the
    /// directory holds one.
    pub fn init(&self, sync: bool) -> Result<(), StateError> {
        self.init_with(sync, None)
    }

    /// [`PgServer::init`], with `password` for user `postgres` and scram-sha-256
    /// authentication on every connection (sockets included) if given.
    pub fn init_with(&self, sync: bool, password: Option<&str>) -> Result<(), StateError> {
        if self.data.join("PG_VERSION").exists() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.data).map_err(backend)?;
        if self.as_postgres {
            run(Command::new("chown").arg("postgres:postgres").arg(&self.data))?;
        }
        // initdb reads the password from a file (never a command line), next to the
        // data directory, which must be empty.
        let pwfile = self.data.with_extension("pwfile");
        let mut args = vec!["-D", path_str(&self.data)?, "-U", "postgres", "-E", "UTF8", "--locale=C"];
        let pwfile_arg = format!("--pwfile={}", path_str(&pwfile)?);
        match password {
            Some(password) => {
                use std::os::unix::fs::OpenOptionsExt as _;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&pwfile)
                    .map_err(backend)?;
                std::io::Write::write_all(&mut f, password.as_bytes()).map_err(backend)?;
                if self.as_postgres {
                    run(Command::new("chown").arg("postgres:postgres").arg(&pwfile))?;
                }
                args.extend(["--auth=scram-sha-256", &pwfile_arg]);
            }
            None => args.push("--auth=trust"),
        }
        if !sync {
            args.push("--no-sync");
        }
        let made = self.run_tool("initdb", &args);
        let _ = std::fs::remove_file(&pwfile);
        made
    }

    /// Makes `dir` for the server's Unix socket: only the server's user (and root) may
    /// enter it.
    pub fn socket_dir(&self, dir: &Path) -> Result<(), StateError> {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir_all(dir).map_err(backend)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(backend)?;
        if self.as_postgres {
            run(Command::new("chown").arg("postgres:postgres").arg(dir))?;
        }
        Ok(())
    }

    /// Starts the server with `options` (postgres `-c` settings), logging to `log`, and
    /// waits until it accepts connections.
    pub fn start(&self, options: &str, log: &Path) -> Result<(), StateError> {
        self.run_tool("pg_ctl", &["-D", path_str(&self.data)?, "-l", path_str(log)?, "-o", options, "-w", "start"])
    }

    /// Stops the server: `mode` is pg_ctl's (`fast`, `immediate`).
    pub fn stop(&self, mode: &str) -> Result<(), StateError> {
        self.run_tool("pg_ctl", &["-D", path_str(&self.data)?, "-m", mode, "-w", "stop"])
    }

    /// The postmaster's pid while the server runs (the first line of postmaster.pid).
    pub fn pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    fn run_tool(&self, tool: &str, args: &[&str]) -> Result<(), StateError> {
        let program = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        run(command.args(args))
    }
}

/// A PostgreSQL server of its own in a temp dir, for tests and local development:
/// trust authentication, fsync off, listening only on a unix socket in the temp dir.
/// Dropping it stops the server (immediate mode) and deletes the directory.
pub struct TempPostgres {
    dir: tempfile::TempDir,
    server: PgServer,
}

impl TempPostgres {
    /// Initialises a cluster and starts the server, waiting until it accepts
    /// connections. Blocks for a second or two.
    pub fn start() -> Result<Self, StateError> {
        let dir = tempfile::Builder::new().prefix("tally-pg").tempdir().map_err(backend)?;
        if is_root() {
            run(Command::new("chown").arg("postgres:postgres").arg(dir.path()))?;
        }
        let server = PgServer::new(&dir.path().join("data"));
        server.init(false)?;
        let options = format!("-c listen_addresses='' -k {} -c fsync=off", path_str(dir.path())?);
        server.start(&options, &dir.path().join("server.log"))?;
        Ok(TempPostgres { dir, server })
    }

    /// The conninfo for [`PgStateStore::connect`], to the `postgres` database.
    pub fn conninfo(&self) -> String {
        format!("host={} user=postgres dbname=postgres", self.dir.path().display())
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if let Err(e) = self.server.stop("immediate") {
            tracing::warn!(error = %e, "could not stop the temp postgres server");
        }
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

fn server_bin_dir() -> PathBuf {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .max();
    // An empty directory makes `bin.join(tool)` a bare name, found on PATH.
    newest.map(|(_, bin)| bin).unwrap_or_default()
}

fn path_str(path: &Path) -> Result<&str, StateError> {
    path.to_str().ok_or_else(|| backend(format!("path {} is not UTF-8", path.display())))
}

fn run(command: &mut Command) -> Result<(), StateError> {
    let output = command.output().map_err(|e| backend(format!("{command:?}: {e}")))?;
    if !output.status.success() {
        return Err(backend(format!(
            "{command:?} failed with {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}
