//! The state store conformance suite against every backend: RocksDB in a temp dir and
//! PostgreSQL on a server of its own, started and stopped by the test.

use tally_state::{PgStateStore, RocksStateStore, TempPostgres};
use tally_state_api::{conformance, StateStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocksdb_conforms() {
    let dir = tempfile::tempdir().expect("temp dir");
    conformance::run_all(|| {
        let store = RocksStateStore::open(dir.path()).expect("open rocksdb");
        async move { Box::new(store) as Box<dyn StateStore> }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_conforms() {
    let server = tokio::task::spawn_blocking(TempPostgres::start).await.expect("start task").expect("start postgres");
    let conninfo = server.conninfo();
    conformance::run_all(|| {
        let conninfo = conninfo.clone();
        async move {
            let store = PgStateStore::connect(&conninfo).await.expect("connect to postgres");
            Box::new(store) as Box<dyn StateStore>
        }
    })
    .await;
}
