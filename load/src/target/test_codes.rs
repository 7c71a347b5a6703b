//! The [`CodeSource`] of a deployed cloud (`--codes-from https://OPS-ADDR --admin-token-file
//! FILE`): a node started with `--test-codes` answers `GET /v1/admin/codes?email=ADDR` on its
//! operations listener with the newest code of that address, behind its admin token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use reqwest::StatusCode;

use crate::api::client::http_client;
use crate::error::LoadError;
use crate::sync::lock;
use crate::target::mail_log::DEFAULT_WAIT;
use crate::target::CodeSource;

/// How often a code not there yet is asked for again.
const POLL: Duration = Duration::from_millis(50);

pub struct TestCodes {
    http: reqwest::Client,
    /// `…/v1/admin/codes`.
    url: String,
    token: String,
    /// The code last given for each address: the same one is never given twice.
    given: Mutex<HashMap<String, String>>,
}

impl TestCodes {
    /// Reads the admin token of `token_file` (its first line) now.
    pub fn new(ops: &str, token_file: &Path) -> Result<TestCodes, LoadError> {
        let refused = |why: String| LoadError::Refused(format!("--codes-from {ops}: {why}"));
        let text = anyplay_cloud::small_file::read_to_string(token_file)
            .map_err(|e| refused(format!("--admin-token-file {}: {e}", token_file.display())))?;
        let token = text.lines().next().unwrap_or_default().trim().to_owned();
        if token.is_empty() {
            return Err(refused(format!(
                "--admin-token-file {} holds no token",
                token_file.display()
            )));
        }
        let http = http_client(None).map_err(|e| refused(e.to_string()))?;
        Ok(TestCodes {
            http,
            url: format!("{}/v1/admin/codes", ops.trim_end_matches('/')),
            token,
            given: Mutex::default(),
        })
    }

    /// The address's newest code now, if it has one.
    async fn newest(&self, email: &str) -> Result<Option<String>, LoadError> {
        let failed = |detail: String| LoadError::Node {
            url: self.url.clone(),
            detail,
        };
        let response = self
            .http
            .get(&self.url)
            .query(&[("email", email)])
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::OK => {
                #[derive(serde::Deserialize)]
                struct Code {
                    code: String,
                }
                let body: Code = response.json().await.map_err(|e| failed(e.to_string()))?;
                Ok(Some(body.code))
            }
            status => Err(failed(format!(
                "{status}: is the node started with --test-codes, and is the token its --admin-token?"
            ))),
        }
    }
}

impl CodeSource for TestCodes {
    fn code_for<'a>(&'a self, email: &'a str) -> BoxFuture<'a, Result<String, LoadError>> {
        Box::pin(async move {
            let deadline = Instant::now() + DEFAULT_WAIT;
            loop {
                if let Some(code) = self.newest(email).await? {
                    let mut given = lock(&self.given);
                    if given.get(email) != Some(&code) {
                        given.insert(email.to_owned(), code.clone());
                        return Ok(code);
                    }
                }
                if Instant::now() >= deadline {
                    return Err(LoadError::NoCode {
                        email: email.to_owned(),
                        waited: DEFAULT_WAIT,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }
}
