//! The operations listener: health, readiness, metrics, connections, drain, and the test
//! codes of a node started with `--test-codes`.

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn healthz() -> StatusCode {
    StatusCode::OK
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    if state.drain.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    if !state.bus.is_connected() {
        return (StatusCode::SERVICE_UNAVAILABLE, "nats: not connected\n").into_response();
    }
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")).into_response(),
    }
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    state.metrics.pool.busy.set(state.store.busy() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

fn authorize(state: &AppState, headers: &HeaderMap) -> ApiResult<()> {
    let Some(expected) = &state.config.admin_token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|given| same_token(given, expected)) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// Compares the SHA-256 digests of the tokens, every byte: how long it takes tells
/// neither how much of a guess was right nor how long the token is.
fn same_token(given: &str, expected: &str) -> bool {
    let (given, expected) = (Sha256::digest(given), Sha256::digest(expected));
    let differ = given
        .iter()
        .zip(expected.iter())
        .fold(0u8, |acc, (a, b)| std::hint::black_box(acc | (a ^ b)));
    differ == 0
}

pub async fn connections(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    authorize(&state, &headers)?;
    Ok(
        axum::Json(json!({ "node": state.config.node_id, "connections": state.hub.list() }))
            .into_response(),
    )
}

pub async fn drain(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<StatusCode> {
    authorize(&state, &headers)?;
    state.drain.start();
    Ok(StatusCode::ACCEPTED)
}

/// `GET /v1/admin/codes?email=ADDR`: `{"code"}` of that address's newest open challenge, on a
/// node started with `--test-codes` (which needs the admin token); not found otherwise.
pub async fn codes(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    if !state.config.test_codes {
        return Err(ApiError::NotFound);
    }
    authorize(&state, &headers)?;
    let email = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "email")
        .map(|(_, value)| value.trim().to_lowercase())
        .ok_or_else(|| ApiError::BadRequest("email=ADDR is required".into()))?;
    match state.store.newest_code(&email).await? {
        Some(code) => Ok(axum::Json(json!({ "code": code })).into_response()),
        None => Err(ApiError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_token_matches() {
        assert!(same_token("s3cret-token", "s3cret-token"));
        for wrong in ["", "s", "s3cret-toke", "s3cret-tokenx", "S3cret-token"] {
            assert!(!same_token(wrong, "s3cret-token"), "{wrong:?}");
        }
    }
}
