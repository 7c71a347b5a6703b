//! Toxiproxy's routes over [`Control`], as Toxiproxy 2.x serves them: the same paths and
//! methods (updates by POST or PATCH), statuses and error bodies. Bodies are bounded, and a
//! browser is turned away as Toxiproxy turns it away, so a web page cannot drive the faults of
//! a supervisor that runs as root.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::toxiproxy::ApiError;
use super::{Control, TOXIPROXY_VERSION};

/// The largest request body: a toxic or a populate list is far smaller.
const MAX_BODY: usize = 64 * 1024;

type Shared = State<Arc<Control>>;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(self)).into_response()
    }
}

/// Toxiproxy's routes.
pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/reset", post(reset))
        .route("/proxies", get(proxies).post(create))
        .route("/populate", post(populate))
        .route("/anyplay/actions", post(act))
        .route(
            "/proxies/{proxy}",
            get(proxy).post(update).patch(update).delete(delete),
        )
        .route("/proxies/{proxy}/toxics", get(toxics).post(add))
        .route(
            "/proxies/{proxy}/toxics/{toxic}",
            get(toxic).post(change).patch(change).delete(remove),
        )
        .layer(axum::middleware::from_fn(no_browsers))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(control)
}

/// Serves `router` on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, router: Router) {
    if let Err(error) = axum::serve(listener, router).await {
        tracing::warn!(%error, "the control API stopped");
    }
}

async fn no_browsers(
    headers: HeaderMap,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|agent| agent.to_str().ok())
        .unwrap_or_default();
    if agent.starts_with("Mozilla/") {
        return (StatusCode::FORBIDDEN, "User agent not allowed\n").into_response();
    }
    next.run(request).await
}

/// A request's JSON; an empty body is `{}`, as Go's decoder leaves the defaults.
pub fn body(bytes: &Bytes) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

async fn act(State(control): Shared, bytes: Bytes) -> Result<Response, ApiError> {
    let answer = control.act(&body(&bytes)?).await?;
    Ok(Json(answer).into_response())
}

async fn version() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json;charset=utf-8")],
        format!("{{\"version\": \"{TOXIPROXY_VERSION}\"}}\n"),
    )
        .into_response()
}

async fn reset(State(control): Shared) -> StatusCode {
    control.reset();
    StatusCode::NO_CONTENT
}

async fn proxies(State(control): Shared) -> Json<Value> {
    Json(Value::Object(control.proxies()))
}

async fn create(State(control): Shared, bytes: Bytes) -> Result<Response, ApiError> {
    let proxy = control.create(&body(&bytes)?)?;
    Ok((StatusCode::CREATED, Json(proxy)).into_response())
}

async fn populate(State(control): Shared, bytes: Bytes) -> Result<Response, ApiError> {
    let proxies = control.populate(&body(&bytes)?)?;
    Ok((StatusCode::CREATED, Json(json!({ "proxies": proxies }))).into_response())
}

async fn proxy(State(control): Shared, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(control.proxy(&name)?).into_response())
}

async fn update(
    State(control): Shared,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    Ok(Json(control.update(&name, &body(&bytes)?)?).into_response())
}

async fn delete(State(control): Shared, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    control.delete(&name)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn toxics(State(control): Shared, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(control.toxics(&name)?).into_response())
}

async fn add(
    State(control): Shared,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    // The proxy first: an unknown one is a 404 whatever the body.
    control.proxy(&name)?;
    Ok(Json(control.add(&name, &body(&bytes)?)?).into_response())
}

async fn toxic(
    State(control): Shared,
    Path((name, toxic)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(Json(control.toxic(&name, &toxic)?).into_response())
}

async fn change(
    State(control): Shared,
    Path((name, toxic)): Path<(String, String)>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    control.toxic(&name, &toxic)?;
    Ok(Json(control.change(&name, &toxic, &body(&bytes)?)?).into_response())
}

async fn remove(
    State(control): Shared,
    Path((name, toxic)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    control.remove_toxic(&name, &toxic)?;
    Ok(StatusCode::NO_CONTENT)
}
