//! A typed client of the cloud's HTTP API: one method per call; errors carry the HTTP status and
//! the contract's error code.

use std::time::Duration;

use reqwest::{RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::wire::{
    AccountId, Cards, Challenge, CodeOutcome, ErrorBody, FriendStatus, FriendsView, Privacy,
    Session, SessionId, Tokens,
};

/// How long one call may take before it counts as unanswered.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A successful answer: its status (the contract has calls with two success statuses) and body.
#[derive(Debug)]
pub struct Answer<T> {
    pub status: u16,
    pub body: T,
}

/// Why a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The cloud answered with an error body.
    #[error("{status} {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer: connection refused or reset, or [`CALL_TIMEOUT`] passed.
    #[error("no answer: {0}")]
    NoAnswer(#[source] reqwest::Error),
    /// An answer that does not follow the contract (wrong body or status).
    #[error("unexpected answer {status}: {detail}")]
    Unexpected { status: u16, detail: String },
    /// The player has no tokens (never signed in, or its refresh token was refused).
    #[error("the player is not signed in")]
    NotSignedIn,
}

impl ClientError {
    /// The contract's error code, when the cloud sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Builds the HTTP client every player of one source address shares.
pub fn http_client(
    local_address: Option<std::net::IpAddr>,
) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .use_preconfigured_tls(crate::api::tls::client_config().as_ref().clone())
        .timeout(CALL_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .local_address(local_address)
        // The API never redirects: a player follows none, or an agent's --allow-target would
        // hold only for the first hop (a 307 keeps the method and the body).
        .redirect(reqwest::redirect::Policy::none())
        // Below the cloud's deadline for a request head (20 s): a connection it is closing
        // for idleness must not be reused as it closes ("connection closed before message
        // completed" on the next sign-in, measured in the 50,000-player run).
        .pool_idle_timeout(Duration::from_secs(10))
        // A client of its own address serves one player: one idle connection per node is
        // all it reuses. Kept, the connections of its bursts of calls (five friend requests
        // at once) held 20,000 sockets for 1,500 players in the supervisor, which also holds
        // each connection's proxy (upgrade, rate_limits on).
        .pool_max_idle_per_host(match local_address {
            Some(_) => 1,
            None => usize::MAX,
        })
        .build()
}

/// The API of one node, called through one HTTP client.
#[derive(Clone, Copy)]
pub struct Api<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
}

impl<'a> Api<'a> {
    /// `base` is the node's public listener, e.g. `http://127.0.0.1:8080`, without a trailing slash.
    pub fn new(http: &'a reqwest::Client, base: &'a str) -> Self {
        Api { http, base }
    }

    fn post(&self, path: &str) -> RequestBuilder {
        self.http.post(format!("{}{path}", self.base))
    }

    fn get(&self, path: &str) -> RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    fn delete(&self, path: &str) -> RequestBuilder {
        self.http.delete(format!("{}{path}", self.base))
    }

    pub async fn auth_email(&self, email: &str) -> Result<Answer<Challenge>, ClientError> {
        json_answer(self.post("/v1/auth/email").json(&json!({ "email": email }))).await
    }

    pub async fn auth_code(
        &self,
        challenge_id: &str,
        code: &str,
    ) -> Result<Answer<CodeOutcome>, ClientError> {
        let body = json!({ "challenge_id": challenge_id, "code": code });
        json_answer(self.post("/v1/auth/code").json(&body)).await
    }

    pub async fn auth_signup(
        &self,
        signup_token: &str,
        handle: &str,
    ) -> Result<Answer<Tokens>, ClientError> {
        let body = json!({ "signup_token": signup_token, "handle": handle });
        json_answer(self.post("/v1/auth/signup").json(&body)).await
    }

    pub async fn auth_refresh(&self, refresh_token: &str) -> Result<Answer<Tokens>, ClientError> {
        json_answer(
            self.post("/v1/auth/refresh")
                .json(&json!({ "refresh_token": refresh_token })),
        )
        .await
    }

    /// Revokes the account's refresh tokens and closes its event connection (4003).
    pub async fn auth_logout(&self, token: &str) -> Result<Answer<()>, ClientError> {
        empty_answer(self.post("/v1/auth/logout").bearer_auth(token)).await
    }

    pub async fn friends(&self, token: &str) -> Result<Answer<FriendsView>, ClientError> {
        json_answer(self.get("/v1/friends").bearer_auth(token)).await
    }

    pub async fn friend_request(
        &self,
        token: &str,
        handle: &str,
    ) -> Result<Answer<FriendStatus>, ClientError> {
        let req = self
            .post("/v1/friends/requests")
            .bearer_auth(token)
            .json(&json!({ "handle": handle }));
        json_answer(req).await
    }

    pub async fn friend_accept(
        &self,
        token: &str,
        from: AccountId,
    ) -> Result<Answer<FriendStatus>, ClientError> {
        json_answer(
            self.post(&format!("/v1/friends/requests/{from}/accept"))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn friend_decline(
        &self,
        token: &str,
        from: AccountId,
    ) -> Result<Answer<()>, ClientError> {
        empty_answer(
            self.post(&format!("/v1/friends/requests/{from}/decline"))
                .bearer_auth(token),
        )
        .await
    }

    /// Cancels the caller's own request to `to`.
    pub async fn friend_cancel(
        &self,
        token: &str,
        to: AccountId,
    ) -> Result<Answer<()>, ClientError> {
        empty_answer(
            self.delete(&format!("/v1/friends/requests/{to}"))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn unfriend(&self, token: &str, other: AccountId) -> Result<Answer<()>, ClientError> {
        empty_answer(
            self.delete(&format!("/v1/friends/{other}"))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn block(&self, token: &str, other: AccountId) -> Result<Answer<()>, ClientError> {
        let req = self
            .post("/v1/blocks")
            .bearer_auth(token)
            .json(&json!({ "account_id": other }));
        empty_answer(req).await
    }

    pub async fn unblock(&self, token: &str, other: AccountId) -> Result<Answer<()>, ClientError> {
        empty_answer(
            self.delete(&format!("/v1/blocks/{other}"))
                .bearer_auth(token),
        )
        .await
    }

    /// `PATCH /v1/me {"privacy"}`; the account it answers is not read.
    pub async fn privacy_set(
        &self,
        token: &str,
        privacy: Privacy,
    ) -> Result<Answer<()>, ClientError> {
        let req = self
            .http
            .patch(format!("{}/v1/me", self.base))
            .bearer_auth(token)
            .json(&json!({ "privacy": privacy }));
        empty_answer(req).await
    }

    pub async fn presence_set(
        &self,
        token: &str,
        activity: &str,
        version: u64,
    ) -> Result<Answer<()>, ClientError> {
        let body = json!({ "activity": activity, "version": version });
        empty_answer(
            self.http
                .put(format!("{}/v1/presence", self.base))
                .bearer_auth(token)
                .json(&body),
        )
        .await
    }

    pub async fn session_create(
        &self,
        token: &str,
        max_members: u32,
    ) -> Result<Answer<Session>, ClientError> {
        let req = self
            .post("/v1/sessions")
            .bearer_auth(token)
            .json(&json!({ "max_members": max_members }));
        json_answer(req).await
    }

    pub async fn session_join(
        &self,
        token: &str,
        id: &SessionId,
    ) -> Result<Answer<Session>, ClientError> {
        json_answer(
            self.post(&format!("/v1/sessions/{id}/join"))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn session_leave(
        &self,
        token: &str,
        id: &SessionId,
    ) -> Result<Answer<()>, ClientError> {
        empty_answer(
            self.post(&format!("/v1/sessions/{id}/leave"))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn session_get(
        &self,
        token: &str,
        id: &SessionId,
    ) -> Result<Answer<Session>, ClientError> {
        json_answer(self.get(&format!("/v1/sessions/{id}")).bearer_auth(token)).await
    }

    pub async fn cards(
        &self,
        token: &str,
        ids: &[AccountId],
    ) -> Result<Answer<Cards>, ClientError> {
        let list = ids
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        // Commas are left literal: the contract's example is `?ids=1,2,3`.
        json_answer(
            self.get(&format!("/v1/cards?ids={list}"))
                .bearer_auth(token),
        )
        .await
    }
}

async fn send(req: RequestBuilder) -> Result<Response, ClientError> {
    let resp = req.send().await.map_err(ClientError::NoAnswer)?;
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(ClientError::NoAnswer)?;
    Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(body) => ClientError::Api {
            status,
            code: body.error.code,
            message: body.error.message,
        },
        Err(e) => ClientError::Unexpected {
            status,
            detail: format!("error body: {e}"),
        },
    })
}

async fn json_answer<T: DeserializeOwned>(req: RequestBuilder) -> Result<Answer<T>, ClientError> {
    let resp = send(req).await?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(ClientError::NoAnswer)?;
    serde_json::from_slice(&bytes)
        .map(|body| Answer { status, body })
        .map_err(|e| ClientError::Unexpected {
            status,
            detail: e.to_string(),
        })
}

async fn empty_answer(req: RequestBuilder) -> Result<Answer<()>, ClientError> {
    let resp = send(req).await?;
    Ok(Answer {
        status: resp.status().as_u16(),
        body: (),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 307 to an address outside an agent's --allow-target is not followed: the player
    /// sees the redirect, the other address nothing.
    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let elsewhere_addr = elsewhere.local_addr().unwrap();
        let redirector = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let redirector_addr = redirector.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = redirector.accept().await {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{elsewhere_addr}/v1/auth/email\r\ncontent-length: 0\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        let answer = http_client(None)
            .unwrap()
            .post(format!("http://{redirector_addr}/v1/auth/email"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::TEMPORARY_REDIRECT);
        let reached = tokio::time::timeout(Duration::from_millis(300), elsewhere.accept()).await;
        assert!(reached.is_err(), "the redirect was followed");
    }
}
