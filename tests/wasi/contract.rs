//! The core's store contract suite against the host's SQLite store: through
//! the component boundary (`diagnostics.run-store-contract`), and natively.
//! Plus compare-and-swap between separate connection pools on one file, as
//! separate host processes sharing a data directory use it.

use std::sync::Arc;

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::store::{StoreError, contract};

use crate::runtime::Clock;
use crate::sqlite::SqliteStore;
use crate::support::{TempDir, runtime, settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_contract_through_the_component() {
    let dir = TempDir::new("contract");
    let rt = runtime(dir.path(), settings(&Clock::System));
    let passed = rt.run_store_contract("contract:").await.unwrap();
    assert_eq!(passed, Ok(13), "{passed:?}");
    // Run again on the same store: the suite cleans up after itself.
    assert_eq!(rt.run_store_contract("contract:").await.unwrap(), Ok(13));
    assert_eq!(rt.store().due(i64::MAX, 100).unwrap(), Vec::<String>::new());
    assert_eq!(rt.traps(), 0);
}

#[test]
fn store_contract_natively() {
    let dir = TempDir::new("contract-native");
    let store = SqliteStore::open(dir.path()).unwrap();
    let report = block_on(contract::run(&store, "native:"));
    assert!(report.failures.is_empty(), "{report}");
    assert_eq!(report.passed, 13, "{report}");
}

#[test]
fn compare_and_swap_holds_across_connection_pools() {
    let dir = TempDir::new("cas");
    let stores: Vec<Arc<SqliteStore>> = (0..4)
        .map(|_| Arc::new(SqliteStore::open(dir.path()).unwrap()))
        .collect();
    stores[0].put("counter", None, "0", None).unwrap();
    const PER_THREAD: u64 = 50;
    std::thread::scope(|s| {
        for store in &stores {
            s.spawn(move || {
                let mut done = 0;
                while done < PER_THREAD {
                    let e = store.get("counter").unwrap().unwrap();
                    let n: u64 = e.body.parse().unwrap();
                    match store.put("counter", Some(e.version), &(n + 1).to_string(), None) {
                        Ok(v) => {
                            assert_eq!(v, e.version + 1);
                            done += 1;
                        }
                        Err(StoreError::Conflict { current }) => {
                            assert!(current.is_some_and(|c| c > e.version), "{current:?}");
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let total = PER_THREAD * stores.len() as u64;
    let e = stores[1].get("counter").unwrap().unwrap();
    assert_eq!(e.body, total.to_string(), "no increment was lost");
    assert_eq!(e.version, total + 1);
}
