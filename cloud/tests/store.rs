//! The store itself, on the PostgreSQL of a pair, with two store handles standing
//! for two nodes: what the database must serialise between them.

use std::time::Duration;

use anyplay_cloud::config::DbTimeouts;
use anyplay_cloud::metrics::Metrics;
use anyplay_cloud::store::{Store, StoreOptions};
use sqlx::Executor;

use crate::support::TestCloud;

async fn open(cloud: &TestCloud) -> Store {
    let options = StoreOptions {
        url: cloud.database_url().to_string(),
        connections: 4,
        acquire_timeout: Duration::from_secs(10),
        timeouts: DbTimeouts::default(),
    };
    Store::open(&options, Metrics::default().pool.clone())
        .await
        .expect("a store on the test database")
}

/// Regression (issue 12): with no record yet, `SELECT … FOR UPDATE` locked nothing,
/// so registrations at the same moment all saw no previous connection and all their
/// sockets stayed. Registered together, each but the first must replace another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_at_once_each_see_a_previous_but_the_first() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let stores = [open(&cloud).await, open(&cloud).await];
    let mut sql = cloud.sql().await;
    let (account, lease) = (ann.id, Duration::from_secs(10));
    let token = std::sync::Arc::new(ann.access.clone());
    for round in 0..20 {
        sql.execute(format!("DELETE FROM connections WHERE account_id = {}", ann.id).as_str())
            .await
            .unwrap();
        let at_once: Vec<_> = (0..4)
            .map(|i| {
                let (store, token) = (stores[i % 2].clone(), token.clone());
                tokio::spawn(async move {
                    let id = format!("r{round}-{i}");
                    store
                        .register_connection(account, &token, &id, &format!("store-{i}"), lease)
                        .await
                })
            })
            .collect();
        let mut replaced = 0;
        for task in at_once {
            let registered = task.await.unwrap().unwrap().expect("a valid token");
            replaced += usize::from(registered.previous.is_some());
        }
        assert_eq!(replaced, 3, "round {round}: registrations that saw another");
    }
}
