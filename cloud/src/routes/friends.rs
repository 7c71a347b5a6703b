//! Friends and blocks: the lists, requests, accept/decline/cancel, unfriend, block
//! and unblock, and the events each change sends once it is committed.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::auth::normalize_handle;
#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;
use crate::error::{ApiError, ApiResult};
use crate::events::{AccountRef, Event};
use crate::extract::{Auth, IdPath, Json};
use crate::state::AppState;
use crate::store::{FriendError, FriendsOverview, RequestOutcome};

impl From<FriendError> for ApiError {
    fn from(e: FriendError) -> Self {
        match e {
            FriendError::NotFound => ApiError::NotFound,
            FriendError::Blocked => ApiError::rule(StatusCode::FORBIDDEN, "blocked", e.to_string()),
            FriendError::CannotFriendSelf => {
                ApiError::unprocessable("cannot_friend_self", e.to_string())
            }
            FriendError::CannotBlockSelf => {
                ApiError::unprocessable("cannot_block_self", e.to_string())
            }
            FriendError::AlreadyFriends => ApiError::conflict("already_friends", e.to_string()),
            FriendError::AlreadyRequested => ApiError::conflict("already_requested", e.to_string()),
            FriendError::LimitReached(kind) => ApiError::LimitReached(kind),
            FriendError::Store(e) => e.into(),
        }
    }
}

/// Where a request or an accept left the two accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FriendStatus {
    Requested,
    Friends,
}

#[derive(Debug, Serialize)]
pub struct StatusBody {
    status: FriendStatus,
}

fn status(code: StatusCode, status: FriendStatus) -> (StatusCode, axum::Json<StatusBody>) {
    (code, axum::Json(StatusBody { status }))
}

pub async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<axum::Json<FriendsOverview>> {
    Ok(axum::Json(
        state.store.friends_overview(auth.account_id).await?,
    ))
}

#[derive(Deserialize)]
pub struct RequestBody {
    handle: String,
}

pub async fn request(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<RequestBody>,
) -> ApiResult<(StatusCode, axum::Json<StatusBody>)> {
    // A string that cannot be a handle names no account: the same 404 as an unknown one.
    let handle = normalize_handle(&body.handle).ok_or(ApiError::NotFound)?;
    let limits = &state.config.friend_limits;
    match state
        .store
        .send_friend_request(auth.account_id, &handle, limits)
        .await?
    {
        RequestOutcome::Requested { caller, target } => {
            state.notify(&[target], &Event::FriendRequest { from: caller });
            Ok(status(StatusCode::CREATED, FriendStatus::Requested))
        }
        RequestOutcome::Friends { caller, target } => {
            became_friends(&state, caller, target).await;
            Ok(status(StatusCode::OK, FriendStatus::Friends))
        }
    }
}

pub async fn accept(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(from): IdPath,
) -> ApiResult<(StatusCode, axum::Json<StatusBody>)> {
    let limits = &state.config.friend_limits;
    #[cfg(feature = "seeded-defects")]
    if crate::defects::every(SeededDefect::RefuseAccepts, 8) {
        return Err(ApiError::NotFound);
    }
    let accepter = state
        .store
        .accept_friend_request(auth.account_id, from, limits)
        .await?;
    became_friends(&state, accepter, from).await;
    #[cfg(feature = "seeded-defects")]
    if crate::defects::in_fault() && crate::defects::every(SeededDefect::UndoFriendshipInFault, 2) {
        let _ = state.store.unfriend(auth.account_id, from).await;
    }
    Ok(status(StatusCode::OK, FriendStatus::Friends))
}

pub async fn decline(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(from): IdPath,
) -> ApiResult<StatusCode> {
    if !state
        .store
        .decline_friend_request(auth.account_id, from)
        .await?
    {
        return Err(ApiError::NotFound);
    }
    let event = Event::FriendRequestDeclined {
        account_id: auth.account_id,
    };
    state.notify(&[from], &event);
    Ok(StatusCode::NO_CONTENT)
}

pub async fn cancel(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(to): IdPath,
) -> ApiResult<StatusCode> {
    if !state
        .store
        .cancel_friend_request(auth.account_id, to)
        .await?
    {
        return Err(ApiError::NotFound);
    }
    let event = Event::FriendRequestCancelled {
        account_id: auth.account_id,
    };
    state.notify(&[to], &event);
    Ok(StatusCode::NO_CONTENT)
}

pub async fn unfriend(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(friend): IdPath,
) -> ApiResult<StatusCode> {
    if !state.store.unfriend(auth.account_id, friend).await? {
        return Err(ApiError::NotFound);
    }
    state.notify(
        &[friend],
        &Event::FriendRemoved {
            account_id: auth.account_id,
        },
    );
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub struct BlockBody {
    account_id: i64,
}

/// Blocking yourself is `422 cannot_block_self` (a well-formed body that breaks a
/// rule); an id that names no account is `404`.
pub async fn block(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<BlockBody>,
) -> ApiResult<StatusCode> {
    if body.account_id <= 0 {
        return Err(ApiError::BadRequest(
            "account_id must be a positive integer".into(),
        ));
    }
    let outcome = state.store.block(auth.account_id, body.account_id).await?;
    // Nothing else tells the blocked account it was blocked.
    if outcome.were_friends {
        state.notify(
            &[body.account_id],
            &Event::FriendRemoved {
                account_id: auth.account_id,
            },
        );
    }
    Ok(StatusCode::NO_CONTENT)
}

pub async fn unblock(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(target): IdPath,
) -> ApiResult<StatusCode> {
    if !state.store.unblock(auth.account_id, target).await? {
        return Err(ApiError::NotFound);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// After a committed friendship: the requester hears who accepted, and each side
/// gets the other's presence now, so neither needs a resync to see it.
async fn became_friends(state: &AppState, accepter: AccountRef, requester: i64) {
    let accepter_id = accepter.account_id;
    state.notify(
        &[requester],
        &Event::FriendAccepted {
            account_id: accepter.account_id,
            handle: accepter.handle,
        },
    );
    for (subject, audience) in [(accepter_id, requester), (requester, accepter_id)] {
        // The friendship is committed and the call succeeded: a failed read only
        // costs this courtesy event, and the next presence change or resync heals it.
        match state.store.presence(subject).await {
            Ok(p) => {
                state.metrics.presence_fanout.inc();
                let event = Event::Presence {
                    account_id: subject,
                    online: p.online,
                    activity: p.activity,
                    version: p.version,
                };
                state.notify(&[audience], &event);
            }
            Err(e) => {
                tracing::warn!(account = subject, error = %e, "could not read presence for a new friend")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;
    use crate::store::LimitKind;

    async fn error_body(e: FriendError) -> (StatusCode, serde_json::Value) {
        let response = ApiError::from(e).into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn refusals_have_the_contract_status_and_code() {
        let cases = [
            (FriendError::NotFound, 404, "not_found"),
            (FriendError::Blocked, 403, "blocked"),
            (FriendError::CannotFriendSelf, 422, "cannot_friend_self"),
            (FriendError::CannotBlockSelf, 422, "cannot_block_self"),
            (FriendError::AlreadyFriends, 409, "already_friends"),
            (FriendError::AlreadyRequested, 409, "already_requested"),
        ];
        for (error, code, name) in cases {
            let (status, body) = error_body(error).await;
            assert_eq!(status.as_u16(), code, "{name}");
            assert_eq!(body["error"]["code"], name);
            assert!(body["error"].get("limit").is_none());
        }
    }

    #[tokio::test]
    async fn a_limit_names_itself_in_the_error_object() {
        for (kind, name) in [
            (LimitKind::Friends, "friends"),
            (LimitKind::Outgoing, "outgoing"),
            (LimitKind::Daily, "daily"),
        ] {
            let (status, body) = error_body(FriendError::LimitReached(kind)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
            assert_eq!(body["error"]["code"], "limit_reached");
            assert_eq!(body["error"]["limit"], name);
            assert!(body["error"]["message"].is_string());
        }
    }

    #[test]
    fn statuses_are_lowercase_words() {
        let body = StatusBody {
            status: FriendStatus::Requested,
        };
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            serde_json::json!({"status": "requested"})
        );
    }
}
