//! `ApiError`: every error a handler returns, and its one JSON shape on the wire.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::{LimitKind, StoreError};

/// The contract's errors. Each variant fixes its status and its `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{message}")]
    Invalid {
        status: StatusCode,
        code: &'static str,
        message: String,
    },
    #[error("authentication required")]
    Unauthorized,
    #[error("not found")]
    NotFound,
    /// `422 limit_reached`; the error object also names the `limit`.
    #[error("{0}")]
    LimitReached(LimitKind),
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("too many requests")]
    RateLimited { retry_after_s: u64 },
    #[error("the node is draining")]
    Draining,
    /// An internal failure; the detail goes to the log, never to the client.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    /// A rule-specific error with its own status and code (`422 invalid_handle`, `409 handle_taken`, ...).
    pub fn rule(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::Invalid {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::rule(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::rule(StatusCode::CONFLICT, code, message)
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Invalid { status, .. } => *status,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::LimitReached(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Draining => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Invalid { code, .. } => code,
            ApiError::Unauthorized => "unauthorized",
            ApiError::NotFound => "not_found",
            ApiError::LimitReached(_) => "limit_reached",
            ApiError::TooLarge(_) => "too_large",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Draining => "draining",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Internal(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = format!("{e:#}"), "internal error");
        }
        let mut error = json!({ "code": self.code(), "message": self.to_string() });
        if let ApiError::LimitReached(limit) = &self {
            error["limit"] = limit.as_str().into();
        }
        let mut response = (self.status(), axum::Json(json!({ "error": error }))).into_response();
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(crate::defects::SeededDefect::NoRetryAfter) {
            return response;
        }
        if let ApiError::RateLimited { retry_after_s } = &self {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_s.max(&1).to_owned()),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
