//! Sessions (parties): create, join, leave and read, and the events they send to
//! the other members once the change is committed.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::extract::{Auth, IdPath, Json};
use crate::state::AppState;
use crate::store::{Departure, MaxMembers, Session, SessionError};

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::NotFound => ApiError::NotFound,
            SessionError::AlreadyInSession => {
                ApiError::conflict("already_in_session", e.to_string())
            }
            SessionError::Full => ApiError::conflict("session_full", e.to_string()),
            SessionError::NotAllowed => {
                ApiError::rule(StatusCode::FORBIDDEN, "not_allowed", e.to_string())
            }
            SessionError::Store(e) => e.into(),
        }
    }
}

#[derive(Deserialize)]
pub struct CreateBody {
    // Any integer is well-formed here; the range is a rule (422), not a format (400).
    max_members: i64,
}

pub async fn create(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<CreateBody>,
) -> ApiResult<(StatusCode, axum::Json<Session>)> {
    let max_members = MaxMembers::new(body.max_members).ok_or_else(|| {
        ApiError::unprocessable(
            "invalid_max_members",
            format!("max_members is {} to {}", MaxMembers::MIN, MaxMembers::MAX),
        )
    })?;
    let session = state
        .store
        .create_session(auth.account_id, max_members)
        .await?;
    Ok((StatusCode::CREATED, axum::Json(session)))
}

pub async fn get(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> ApiResult<axum::Json<Session>> {
    // A non-member learns nothing, not even that the session exists.
    let session = state
        .store
        .session_for_member(id, auth.account_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(axum::Json(session))
}

pub async fn join(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> ApiResult<axum::Json<Session>> {
    let session = state.store.join_session(id, auth.account_id).await?;
    let others: Vec<i64> = session
        .members
        .iter()
        .copied()
        .filter(|&m| m != auth.account_id)
        .collect();
    state.notify(
        &others,
        &Event::SessionMemberJoined {
            session_id: id,
            account_id: auth.account_id,
        },
    );
    #[cfg(feature = "seeded-defects")]
    if crate::defects::every(SeededDefect::UndoSessionJoin, 4) {
        let _ = state.store.leave_session(id, auth.account_id).await;
    }
    Ok(axum::Json(session))
}

pub async fn leave(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> ApiResult<StatusCode> {
    match state.store.leave_session(id, auth.account_id).await? {
        Departure::Left {
            remaining,
            new_leader,
        } => {
            #[cfg(feature = "seeded-defects")]
            if crate::defects::every(crate::defects::SeededDefect::SilentLeaves, 2) {
                return Ok(StatusCode::NO_CONTENT);
            }
            state.notify(
                &remaining,
                &Event::SessionMemberLeft {
                    session_id: id,
                    account_id: auth.account_id,
                },
            );
            #[cfg(feature = "seeded-defects")]
            let new_leader = new_leader.filter(|_| {
                !crate::defects::every(crate::defects::SeededDefect::SilentLeaderChanges, 2)
            });
            if let Some(leader) = new_leader {
                state.notify(
                    &remaining,
                    &Event::SessionLeaderChanged {
                        session_id: id,
                        leader,
                    },
                );
            }
        }
        // `session_closed` goes to the members still in a session when it ends.
        // Leaving closes a session only when its last member goes, so nobody is
        // left to tell: the leaver has its 204.
        Departure::Closed => {}
    }
    Ok(StatusCode::NO_CONTENT)
}
