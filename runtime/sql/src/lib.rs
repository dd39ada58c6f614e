//! Read-only SQL over a node: `POST /v1/sql` and `tally sql`.
//!
//! SQLite (compiled in) runs each query in a fresh in-memory connection whose tables are
//! virtual (`vtab.rs`): each reads the node's log and state store through the same calls
//! the API uses, a page at a time, with the query's constraints on book, invocation,
//! function and seqnum pushed down to index reads (`tables/`). Every table of a query
//! reads at one position: now, or `AS OF <seqnum>` (a clause at the end of the query, or
//! `as_of`), the book as of that prefix of its log.
//!
//! ```text
//!   Sql::query ─ a permit (concurrent_max) ─ spawn_blocking: Connection + authorizer + limits
//!      SQLite ── xBestIndex/xFilter ──► Source::page(env, scan, from) ── Env::block ──► Runtime
//! ```
//!
//! Why SQLite: the whole engine builds in about a minute on two cores and adds about
//! 2 MB to the binary, where Apache DataFusion's cold build takes 18 to 20 minutes here
//! and adds over 100 MB; a query over a node's records is small and row-at-a-time, which
//! SQLite does well, and its virtual tables give us the index pushdown.
//!
//! Limits: time (`time_ms`, checked by SQLite's progress handler and by every page),
//! rows read from the tables (`scan_rows_max`), rows answered (`rows_max`, then
//! `truncated`), memory (SQLite's heap, `memory_bytes_max`, for all queries together),
//! and queries at once (`concurrent_max`). Nothing but `SELECT` passes the authorizer:
//! no DDL, DML, `ATTACH` (no file is ever opened), `PRAGMA` or extension loading.

mod env;
mod tables;
mod vtab;

use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use tally_logsvc::Context;
use tally_runtime::error::RuntimeError;
use tally_runtime::runtime::Runtime;

pub use env::Env;
pub use vtab::{At, Page, Row, Scan, Source, Val};

/// What a query may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlLimits {
    pub time_ms: u64,
    pub rows_max: usize,
    pub scan_rows_max: u64,
    pub concurrent_max: usize,
    pub memory_bytes_max: i64,
}

impl Default for SqlLimits {
    fn default() -> Self {
        SqlLimits { time_ms: 10_000, rows_max: 10_000, scan_rows_max: 5_000_000, concurrent_max: 4, memory_bytes_max: 256 << 20 }
    }
}

/// The longest query text.
pub const SQL_BYTES_MAX: usize = 64 << 10;

/// A query.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub sql: String,
    pub as_of: Option<u64>,
    /// The client's log position: reads start there.
    pub position: Context,
    /// Rows to answer at most (at most the engine's `rows_max`).
    pub limit: Option<usize>,
}

/// A query's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    /// More rows matched than were answered.
    pub truncated: bool,
    pub as_of: Option<u64>,
    pub elapsed_ms: u64,
    /// Where the query's reads reached in the log.
    pub position: Context,
}

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The query is not valid SQL, or names what is not there.
    #[error("{0}")]
    Invalid(String),
    /// The query asks for what the engine never does (a write, a file, a pragma).
    #[error("{0}")]
    Refused(String),
    /// The query passed one of its limits.
    #[error("{0}")]
    Limit(String),
    /// Too many queries run at once.
    #[error("too many SQL queries run at once ({0}); try again")]
    Busy(usize),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The SQL engine of a node.
pub struct Sql {
    rt: Arc<Runtime>,
    limits: SqlLimits,
    permits: Arc<tokio::sync::Semaphore>,
}

impl Sql {
    pub fn new(rt: Arc<Runtime>, limits: SqlLimits) -> Sql {
        static HEAP: Once = Once::new();
        let heap = limits.memory_bytes_max;
        // SQLite's heap is the process's: one limit for every query at once.
        HEAP.call_once(|| unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(heap);
        });
        let permits = Arc::new(tokio::sync::Semaphore::new(limits.concurrent_max));
        Sql { rt, limits, permits }
    }

    /// Runs `q`.
    pub async fn query(&self, q: Query) -> Result<Answer, SqlError> {
        if q.sql.len() > SQL_BYTES_MAX {
            return Err(SqlError::Invalid(format!("a query is at most {SQL_BYTES_MAX} bytes")));
        }
        let (sql, as_of) = as_of(&q.sql, q.as_of)?;
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Err(SqlError::Busy(self.limits.concurrent_max));
        };
        // A client that has its answer finds the invocation's Result in `steps`.
        self.rt.durable().answered_results().await;
        let started = Instant::now();
        let deadline = started + Duration::from_millis(self.limits.time_ms);
        let env = Arc::new(Env::new(self.rt.clone(), as_of, q.position, deadline, self.limits.scan_rows_max));
        let rows_max = q.limit.unwrap_or(self.limits.rows_max).clamp(1, self.limits.rows_max);
        let run = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            run(&env, &sql, rows_max, deadline).map(|(columns, rows, truncated)| (columns, rows, truncated, env.context()))
        });
        let (columns, rows, truncated, position) =
            run.await.map_err(|e| SqlError::Runtime(RuntimeError::Internal(format!("a query's thread: {e}"))))??;
        Ok(Answer { columns, rows, truncated, as_of, elapsed_ms: started.elapsed().as_millis() as u64, position })
    }
}

type Answered = (Vec<String>, Vec<Vec<serde_json::Value>>, bool);

/// Runs `sql` on a fresh connection over `env`'s tables.
fn run(env: &Arc<Env>, sql: &str, rows_max: usize, deadline: Instant) -> Result<Answered, SqlError> {
    let conn = Connection::open_in_memory().map_err(|e| SqlError::Runtime(RuntimeError::Internal(format!("sqlite: {e}"))))?;
    let denied = Arc::new(Mutex::new(None::<String>));
    setup(&conn, env, deadline, denied.clone())
        .map_err(|e| SqlError::Runtime(RuntimeError::Internal(format!("preparing the SQL engine: {e}"))))?;
    let explain = |e: rusqlite::Error| explain(e, &denied, deadline);
    let mut stmt = conn.prepare(sql).map_err(explain)?;
    if !stmt.readonly() {
        return Err(SqlError::Refused("only queries (SELECT) run here: the SQL engine is read-only".into()));
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
    let n = columns.len();
    let mut rows = stmt.query([]).map_err(explain)?;
    let mut out = Vec::new();
    let mut truncated = false;
    while let Some(row) = rows.next().map_err(explain)? {
        if out.len() >= rows_max {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(json_of(row.get_ref(i).map_err(explain)?));
        }
        out.push(values);
    }
    Ok((columns, out, truncated))
}

/// Tables, limits, the authorizer and the time check of a query's connection.
fn setup(conn: &Connection, env: &Arc<Env>, deadline: Instant, denied: Arc<Mutex<Option<String>>>) -> rusqlite::Result<()> {
    for (limit, value) in [
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_LENGTH, 16 << 20),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, SQL_BYTES_MAX as i32),
        (Limit::SQLITE_LIMIT_COLUMN, 256),
        (Limit::SQLITE_LIMIT_EXPR_DEPTH, 200),
        (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 64),
        (Limit::SQLITE_LIMIT_FUNCTION_ARG, 32),
        (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000),
        (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 0),
    ] {
        conn.set_limit(limit, value)?;
    }
    tables::register(conn, env)?;
    conn.progress_handler(10_000, Some(move || Instant::now() >= deadline));
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        let refused = match ctx.action {
            AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => return Authorization::Allow,
            AuthAction::Function { function_name } if function_name != "load_extension" => return Authorization::Allow,
            AuthAction::Function { function_name } => format!("the function {function_name}"),
            AuthAction::Attach { .. } => "ATTACH (the engine opens no file)".to_string(),
            AuthAction::Pragma { pragma_name, .. } => format!("PRAGMA {pragma_name}"),
            AuthAction::Insert { .. } | AuthAction::Update { .. } | AuthAction::Delete { .. } => "a write".to_string(),
            other => format!("{other:?}"),
        };
        *denied.lock().expect("not poisoned") = Some(refused);
        Authorization::Deny
    }));
    Ok(())
}

/// An engine error as the client should read it.
fn explain(e: rusqlite::Error, denied: &Mutex<Option<String>>, deadline: Instant) -> SqlError {
    if let Some(what) = denied.lock().expect("not poisoned").take() {
        return SqlError::Refused(format!("{what} is not allowed: the SQL engine only runs queries (SELECT)"));
    }
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::OperationInterrupted || Instant::now() >= deadline =>
        {
            SqlError::Limit("the query ran past its time limit".into())
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OutOfMemory => {
            SqlError::Limit("the query needed more memory than the SQL engine allows".into())
        }
        rusqlite::Error::SqliteFailure(_, Some(message)) if message.contains("may not be modified") => {
            SqlError::Refused(format!("{message}: the SQL engine only runs queries (SELECT)"))
        }
        rusqlite::Error::SqliteFailure(_, Some(message)) if message.starts_with("limit: ") => {
            SqlError::Limit(message["limit: ".len()..].to_string())
        }
        rusqlite::Error::SqliteFailure(_, Some(message)) if message.contains("too big") || message.contains("too many") => {
            SqlError::Limit(message.clone())
        }
        rusqlite::Error::ModuleError(message) => match message.strip_prefix("limit: ") {
            Some(m) => SqlError::Limit(m.to_string()),
            None => SqlError::Invalid(message.clone()),
        },
        rusqlite::Error::MultipleStatement => SqlError::Invalid("one statement at a time".into()),
        rusqlite::Error::SqliteFailure(_, Some(message)) => SqlError::Invalid(message.clone()),
        other => SqlError::Invalid(other.to_string()),
    }
}

fn json_of(v: ValueRef<'_>) -> serde_json::Value {
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(r) => serde_json::Number::from_f64(r).map_or(serde_json::Value::Null, serde_json::Value::Number),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => serde_json::json!({ "hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() }),
    }
}

/// The query without a trailing `AS OF <seqnum>`, and the seqnum it or `given` names.
fn as_of(sql: &str, given: Option<u64>) -> Result<(String, Option<u64>), SqlError> {
    let trimmed = sql.trim_end().trim_end_matches(';').trim_end();
    let words: Vec<&str> = trimmed.rsplitn(4, char::is_whitespace).collect();
    let clause = match words.as_slice() {
        [n, of, as_, rest] if of.eq_ignore_ascii_case("of") && as_.eq_ignore_ascii_case("as") => {
            let n: u64 = n.parse().map_err(|_| SqlError::Invalid(format!("AS OF takes a seqnum, not {n:?}")))?;
            Some((rest.to_string(), n))
        }
        _ => None,
    };
    match (clause, given) {
        (Some((_, a)), Some(b)) if a != b => Err(SqlError::Invalid(format!("AS OF {a} and as_of {b} disagree"))),
        (Some((rest, a)), _) => Ok((rest, Some(a))),
        (None, given) => Ok((sql.to_string(), given)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_of_is_a_trailing_clause_or_a_field() {
        assert_eq!(as_of("SELECT 1", None).unwrap(), ("SELECT 1".to_string(), None));
        assert_eq!(as_of("SELECT 1 AS OF 42", None).unwrap(), ("SELECT 1".to_string(), Some(42)));
        assert_eq!(as_of("select * from t as of 7;", None).unwrap(), ("select * from t".to_string(), Some(7)));
        assert_eq!(as_of("SELECT 1", Some(9)).unwrap(), ("SELECT 1".to_string(), Some(9)));
        assert_eq!(as_of("SELECT 1 AS OF 9", Some(9)).unwrap().1, Some(9));
        assert!(as_of("SELECT 1 AS OF 9", Some(8)).is_err());
        assert!(as_of("SELECT 1 AS OF x", None).is_err());
        assert!(as_of("SELECT 1 AS OF -1", None).is_err());
        // A column alias named `of` is not the clause.
        assert_eq!(as_of("SELECT x AS of", None).unwrap().1, None);
    }
}
