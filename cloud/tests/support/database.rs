//! A throwaway PostgreSQL database for one test, made on the server that the
//! given URL points at, and dropped with the test.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor};

static NEXT: AtomicUsize = AtomicUsize::new(0);

pub struct TestDatabase {
    /// A database of the server to connect to for `CREATE`/`DROP DATABASE`.
    server_url: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates `t_<pid>_<n>` on the server of `server_url`.
    pub async fn create(server_url: &str) -> TestDatabase {
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = PgConnection::connect(server_url)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {server_url}: {e}"));
        // A crashed run with the same pid may have left it behind.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            conn.execute(sql.as_str())
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let _ = conn.close().await;
        TestDatabase {
            server_url: server_url.to_string(),
            url: with_database(server_url, &name),
            name,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of this database, for `--database-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn drop_now(&self) -> Result<(), sqlx::Error> {
        let mut conn = PgConnection::connect(&self.server_url).await?;
        // FORCE ends the connections of node processes that are still going away.
        conn.execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str())
            .await?;
        conn.close().await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be single-threaded: a
        // thread of its own with its own runtime does the async work.
        let this = &*self;
        std::thread::scope(|s| {
            s.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let result = match runtime {
                    Ok(rt) => rt.block_on(this.drop_now()),
                    Err(e) => Err(sqlx::Error::Io(e)),
                };
                if let Err(e) = result {
                    eprintln!("could not drop test database {}: {e}", this.name);
                }
            });
        });
    }
}

/// `url` with its database (the path) replaced by `name`; query parameters kept.
fn with_database(url: &str, name: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority_start..];
    let path_start = rest
        .find(['/', '?'])
        .map_or(url.len(), |i| authority_start + i);
    let query = url[path_start..]
        .find('?')
        .map_or("", |i| &url[path_start + i..]);
    format!("{}/{name}{query}", &url[..path_start])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database("postgres://anyplay@127.0.0.1:5432/anyplay_test", "t_1_2"),
            "postgres://anyplay@127.0.0.1:5432/t_1_2"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/db?sslmode=disable", "t"),
            "postgres://u:p@h:1/t?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "t"), "postgres://h:1/t");
        assert_eq!(
            with_database("postgres://h:1?application_name=x", "t"),
            "postgres://h:1/t?application_name=x"
        );
    }
}
