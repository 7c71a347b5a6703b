//! Extractors whose rejections speak the contract: `Json`, `Auth` (the bearer token)
//! and `ClientIp`.

use std::net::{IpAddr, SocketAddr};

use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// Largest request body the API takes; more gets `413 too_large`.
pub const MAX_BODY: usize = 16 * 1024;

/// The most of a refused body the node still reads (and throws away) before it answers.
const REFUSED_BODY_READ: u64 = 4 << 20;

/// Refuses a body that says it is larger than [`MAX_BODY`] with `413 too_large`, after
/// reading what the client sends of it (up to [`REFUSED_BODY_READ`], within the body
/// timeout). A node that answers and closes while the body still arrives resets the
/// connection, and the client, still sending, meets the reset instead of its answer.
pub async fn refuse_large_bodies(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;

    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(length) if length > MAX_BODY as u64 => {
            if length <= REFUSED_BODY_READ {
                let mut body = req.into_body().into_data_stream();
                let read = async { while let Some(Ok(_)) = body.next().await {} };
                let _ = tokio::time::timeout(state.config.http.body_timeout, read).await;
            }
            ApiError::TooLarge(MAX_BODY).into_response()
        }
        _ => next.run(req).await,
    }
}

/// `axum::Json`, but a malformed body gets the contract's `400 bad_request`
/// (and an oversized one `413 too_large`) instead of axum's plain-text rejection, and a body
/// that does not arrive whole within the node's body timeout `408 request_timeout`: one that
/// trickles in a byte at a time would otherwise hold its connection for good.
pub struct Json<T>(pub T);

impl<T> FromRequest<AppState> for Json<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let deadline = state.config.http.body_timeout;
        let read = tokio::time::timeout(deadline, axum::Json::<T>::from_request(req, state));
        let Ok(read) = read.await else {
            return Err(ApiError::rule(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the request body did not arrive within {}s",
                    deadline.as_secs_f64()
                ),
            ));
        };
        match read {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(JsonRejection::BytesRejection(e))
                if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::TooLarge(MAX_BODY))
            }
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::BadRequest(
                "expected Content-Type: application/json".into(),
            )),
            // serde's message names the field and the expected type; it is about the
            // client's own input, so it is safe to return.
            Err(e) => Err(ApiError::BadRequest(e.body_text())),
        }
    }
}

/// The signed-in account of an authenticated call.
#[derive(Debug, Clone, Copy)]
pub struct Auth {
    pub account_id: i64,
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts).ok_or(ApiError::Unauthorized)?;
        let account_id = state
            .store
            .account_for_access_token(token)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        Ok(Auth { account_id })
    }
}

/// The token of an `Authorization: Bearer ...` header.
pub fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The source a per-IP rate limit counts: the peer's IPv4 address, or its IPv6 address's
/// /64 ([`crate::ratelimit::source_of`]).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| ClientIp(crate::ratelimit::source_of(addr.ip())))
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no ConnectInfo on the request")))
    }
}

/// A positive id in the path (`/v1/sessions/{id}`); anything else is `400 bad_request`.
#[derive(Debug, Clone, Copy)]
pub struct IdPath(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::BadRequest("expected one id in the path".into()))?;
        parse_id(&raw).map(IdPath)
    }
}

/// An account or session id: a positive integer in plain digits (no sign, no spaces), as
/// `GET /v1/cards?ids=` takes them.
pub fn parse_id(raw: &str) -> Result<i64, ApiError> {
    let digits = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit());
    match raw.parse::<i64>() {
        Ok(id) if digits && id > 0 => Ok(id),
        _ => Err(ApiError::BadRequest(format!(
            "{raw:?} is not an id (a positive integer)"
        ))),
    }
}
