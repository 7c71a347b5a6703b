//! `GET /v1/events`: the upgrade, and the life of one event connection around
//! the socket loop — registration (replacing any older connection of the
//! account, on any node), the welcome, presence, and clean-up.

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Extension;
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;

use crate::bus::RemoteClose;
use crate::config::Config;
#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;
use crate::drain::SocketGuard;
use crate::error::{ApiError, ApiResult};
use crate::events::connection::{self, Ended, MAX_CLIENT_MESSAGE};
use crate::events::CloseCode;
use crate::http::SendBuffer;
use crate::metrics::{CloseLabels, WelcomeClock};
use crate::presence;
use crate::state::AppState;
use crate::store::{cluster_now_ms, now_ms, rfc3339, ConnectionRecord};

#[derive(Deserialize, Default)]
pub struct TokenQuery {
    token: Option<String>,
}

pub async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<TokenQuery>, QueryRejection>,
    send_buffer: Option<Extension<SendBuffer>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let from_header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string());
    let token = from_header.or(query.token).ok_or(ApiError::Unauthorized)?;
    let account_id = state
        .store
        .account_for_access_token(&token)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let ws = ws.map_err(|e| ApiError::BadRequest(format!("expected a WebSocket upgrade: {e}")))?;
    // Counted from here, while this call is still in flight: a drain that sees
    // no call and no socket has no upgrade pending either.
    let open = state.drain.socket_opened();
    if let Some(Extension(send_buffer)) = send_buffer {
        send_buffer.limit(state.config.event_send_buffer);
    }
    Ok(ws
        // Thousands of mostly idle sockets: small buffers (axum's default read buffer is 128 KiB each).
        .read_buffer_size(4 * 1024)
        .write_buffer_size(4 * 1024)
        // What a client has not read stays bounded: past this, the pongs of a client that
        // floods pings and reads nothing wait in one slot (the newest replaces the older), and
        // our own writes fail, so the socket is dropped as a reader that stopped.
        .max_write_buffer_size(MAX_WRITE_BUFFER)
        // A message over the limit, whole or in fragments, fails the read as it passes it,
        // and the connection closes 1009.
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| serve(state, account_id, token, socket, open)))
}

/// Far above any one event and the 4 KiB the writer gathers before it flushes.
const MAX_WRITE_BUFFER: usize = 64 * 1024;

/// Room for the old node's renewal to run and close what it finds taken.
const RENEWAL_MARGIN: Duration = Duration::from_secs(2);

/// How long until the node of `previous` has renewed its leases once more since it last
/// renewed that record (never past the record's lease: by then a live node has renewed).
fn renewal_seen(previous: &ConnectionRecord, config: &Config) -> Duration {
    let renewed_ms = previous.lease_until_ms - config.lease_expiry.as_millis() as i64;
    let due_ms = (renewed_ms + (config.lease_renew + RENEWAL_MARGIN).as_millis() as i64)
        .min(previous.lease_until_ms);
    Duration::from_millis(u64::try_from(due_ms - cluster_now_ms()).unwrap_or(0))
}

fn new_connection_id() -> String {
    let mut bytes = [0u8; 12];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn serve(
    state: AppState,
    account_id: i64,
    token: String,
    mut socket: WebSocket,
    _open: SocketGuard,
) {
    let node = state.config.node_id.clone();
    let connection_id = new_connection_id();
    let since = now_ms();
    let mut clock = WelcomeClock::start(&state.metrics.welcome_steps);
    // Sockets of one account opening at once take turns until their records are stored. A
    // client that gave up meanwhile (a storm's clients wait 10 s for a welcome, then try
    // again) is shed: its turn, record and announcement would only delay the live ones.
    let turn = tokio::select! {
        turn = state.hub.turn(account_id) => turn,
        () = connection::client_closed(&mut socket) => {
            state.metrics.welcomes_shed.inc();
            return;
        }
    };
    clock.step("turn");
    // Local first: an older connection here is closed (4001) before our welcome. Which one
    // this node held is read under the account's turn, so no other welcome here changes it.
    let held_here = state.hub.connection_of(account_id);
    let mailbox = state
        .hub
        .register(account_id, connection_id.as_str().into(), since);
    // A drain that began before the registration did not see this connection
    // when it closed them all; one that begins after it will. Either way it gets 1001.
    if state.drain.is_draining() {
        state
            .hub
            .close_account(account_id, Some(&connection_id), CloseCode::GoingAway);
    }
    // The record is written only while the token is still valid: a logout that closed the
    // account's connections since the token's check above missed this one, and a later
    // one finds the record (local first, then by the record, over the bus).
    let registering = state.store.register_connection(
        account_id,
        &token,
        &connection_id,
        &node,
        state.config.lease_expiry,
    );
    let registered = tokio::select! {
        registered = registering => registered,
        () = connection::client_closed(&mut socket) => {
            // A write still queued is dropped unwritten; one written already is never
            // renewed, and its lease runs out unless a newer connection replaces it first.
            state.hub.unregister(account_id, &connection_id);
            state.metrics.welcomes_shed.inc();
            return;
        }
    };
    let registered = match registered {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(account_id, error = %e, "could not record a connection");
            state.hub.unregister(account_id, &connection_id);
            return;
        }
    };
    drop(turn);
    clock.step("register");
    // Signed out meanwhile: no record, nobody told; the welcome is followed by 4003.
    if registered.is_none() {
        state
            .hub
            .close_account(account_id, Some(&connection_id), CloseCode::SignedOut);
    }
    // Friends heard the account come online from the previous record's connection only if
    // that was welcomed: a record of this node's that it no longer holds is one whose client
    // left while it was written (shed above), and nobody was told of it.
    let mut came_online = registered.as_ref().is_some_and(|r| match &r.previous {
        None => true,
        Some(p) => p.node == node && held_here.as_deref() != Some(p.connection_id.as_str()),
    });
    let previous = registered
        .and_then(|r| r.previous)
        .filter(|p| p.node != node);
    #[cfg(feature = "seeded-defects")]
    let previous = previous.filter(|_| !crate::defects::active(SeededDefect::NoCrossNodeReplace));
    if let Some(previous) = previous {
        let answer = state
            .bus
            .close_remote(
                &previous.node,
                account_id,
                &previous.connection_id,
                CloseCode::Replaced,
            )
            .await;
        if answer == RemoteClose::NoAnswer {
            // The old node learns it at its next lease renewal, which finds the record
            // taken and closes the old connection with 4001: the welcome waits for it.
            tokio::time::sleep(renewal_seen(&previous, &state.config)).await;
        }
        // A node that is gone or out of reach may have died between recording its
        // connection and welcoming it, after friends heard the account leave: whether they
        // heard it come back is unknown, so they hear it now (once more is harmless). One
        // that did not hold the connection never told them.
        came_online |= answer != RemoteClose::Done;
        clock.step("replace");
    }
    state.hub.established(account_id, &connection_id);
    state.metrics.connections_open.inc();
    let welcome = json!({
        "type": "welcome",
        "node": node,
        "connection_id": connection_id,
        "account_id": account_id,
        "server_time": rfc3339(since),
        "ping_interval_s": state.config.ping_interval.as_secs(),
    })
    .to_string();
    // Friends hear of it before the welcome goes out, so a client that has its
    // welcome knows its friends were told.
    if came_online {
        if let Err(e) = presence::announce(&state, account_id).await {
            tracing::warn!(account_id, error = %e, "could not announce going online");
        }
        clock.step("announce");
    }
    clock.welcomed();

    let (ended, sent) = connection::run(
        socket,
        welcome,
        mailbox,
        state.config.ping_interval,
        state.config.ws_write_timeout,
    )
    .await;

    state.metrics.connections_open.dec();
    if matches!(
        ended,
        Ended::Closed(CloseCode::SlowConsumer) | Ended::Stalled
    ) {
        state.metrics.slow_consumers.inc();
        tracing::info!(
            account_id,
            ?ended,
            sent,
            "a slow consumer's connection ended"
        );
    }
    if let Ended::Closed(code) = ended {
        state
            .metrics
            .connections_closed
            .get_or_create(&CloseLabels { code: code.code() })
            .inc();
    }
    state.hub.unregister(account_id, &connection_id);
    if ended == Ended::Closed(CloseCode::Replaced) {
        return;
    }
    match state
        .store
        .remove_connection(account_id, &connection_id)
        .await
    {
        Ok(true) => {
            if let Err(e) = presence::announce(&state, account_id).await {
                tracing::warn!(account_id, error = %e, "could not announce going offline");
            }
        }
        Ok(false) => {}
        // The lease will expire the record, and friends hear it then.
        Err(e) => tracing::warn!(account_id, error = %e, "could not remove a connection record"),
    }
}
