//! The HTTP routes: the public API (one module per topic) and the operations listener.

mod admin;
mod auth;
mod cards;
mod events;
mod friends;
mod me;
mod presence;
mod sessions;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use axum::Router;

use crate::error::ApiError;
use crate::extract::{refuse_large_bodies, MAX_BODY};
use crate::state::AppState;

/// The public API and the event WebSocket.
pub fn public(state: AppState) -> Router {
    Router::new()
        .route("/v1/auth/email", post(auth::email))
        .route("/v1/auth/code", post(auth::code))
        .route("/v1/auth/signup", post(auth::signup))
        .route("/v1/auth/refresh", post(auth::refresh))
        .route("/v1/auth/logout", post(auth::logout))
        .route("/v1/me", get(me::get).patch(me::patch))
        .route("/v1/me/trophies", post(me::add_trophy))
        .route("/v1/events", get(events::upgrade))
        .route("/v1/presence", put(presence::put))
        .route("/v1/friends", get(friends::list))
        .route("/v1/friends/requests", post(friends::request))
        .route(
            "/v1/friends/requests/{account_id}/accept",
            post(friends::accept),
        )
        .route(
            "/v1/friends/requests/{account_id}/decline",
            post(friends::decline),
        )
        .route("/v1/friends/requests/{account_id}", delete(friends::cancel))
        .route("/v1/friends/{account_id}", delete(friends::unfriend))
        .route("/v1/blocks", post(friends::block))
        .route("/v1/blocks/{account_id}", delete(friends::unblock))
        .route("/v1/sessions", post(sessions::create))
        .route("/v1/sessions/{id}", get(sessions::get))
        .route("/v1/sessions/{id}/join", post(sessions::join))
        .route("/v1/sessions/{id}/leave", post(sessions::leave))
        .route("/v1/cards", get(cards::get))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_large_bodies,
        ))
        .with_state(state)
}

/// Health, readiness, metrics and the admin views.
pub fn ops(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/metrics", get(admin::metrics))
        .route("/v1/admin/connections", get(admin::connections))
        .route("/v1/admin/drain", post(admin::drain))
        .route("/v1/admin/codes", get(admin::codes))
        .fallback(not_found)
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> ApiError {
    ApiError::rule(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this path does not take that method",
    )
}
