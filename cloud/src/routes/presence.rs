//! `PUT /v1/presence`: an activity change, told to online friends.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::extract::{Auth, Json};
use crate::state::AppState;

#[derive(Deserialize)]
pub struct PresenceBody {
    activity: String,
    version: u64,
}

const MAX_ACTIVITY: usize = 64;

pub async fn put(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<PresenceBody>,
) -> ApiResult<StatusCode> {
    // PostgreSQL text cannot hold U+0000: refused here, for both stores alike.
    if body.activity.chars().count() > MAX_ACTIVITY || body.activity.contains('\0') {
        return Err(ApiError::unprocessable(
            "invalid_activity",
            "an activity is at most 64 characters, none of them NUL",
        ));
    }
    // A stale version is accepted and ignored, so retries are safe.
    if let Some(presence) = state
        .store
        .set_presence(auth.account_id, &body.activity, body.version)
        .await?
    {
        #[allow(unused_mut)]
        let mut friends = state.store.friend_ids(auth.account_id).await?;
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(crate::defects::SeededDefect::PresenceToStrangers) {
            friends.push(auth.account_id + 97);
        }
        state.metrics.presence_fanout.inc_by(friends.len() as u64);
        #[allow(unused_mut)]
        let mut version = presence.version;
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(crate::defects::SeededDefect::PresenceVersionBumped) {
            version += 1;
        }
        state.notify(
            &friends,
            &Event::Presence {
                account_id: auth.account_id,
                online: presence.online,
                activity: presence.activity,
                version,
            },
        );
    }
    Ok(StatusCode::NO_CONTENT)
}
