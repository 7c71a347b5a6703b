//! The signed-in account: profile and trophies.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, Json};
use crate::state::AppState;
use crate::store::{Account, Privacy};

pub async fn get(State(state): State<AppState>, auth: Auth) -> ApiResult<axum::Json<Account>> {
    let account = state
        .store
        .account(auth.account_id)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    Ok(axum::Json(account))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchBody {
    // `Some(None)` clears the avatar; absent leaves it.
    #[serde(default, deserialize_with = "present")]
    avatar: Option<Option<String>>,
    // `Some(None)`, a null, is no privacy: refused as any other.
    #[serde(default, deserialize_with = "present")]
    privacy: Option<Option<String>>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

const MAX_AVATAR: usize = 64;

pub async fn patch(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<PatchBody>,
) -> ApiResult<axum::Json<Account>> {
    let privacy = match body.privacy {
        Some(p) => Some(p.as_deref().and_then(Privacy::parse).ok_or_else(|| {
            ApiError::unprocessable("invalid_privacy", "privacy is public, friends or private")
        })?),
        None => None,
    };
    if let Some(Some(avatar)) = &body.avatar {
        // PostgreSQL text cannot hold U+0000: refused here, for both stores alike.
        if avatar.chars().count() > MAX_AVATAR || avatar.contains('\0') {
            return Err(ApiError::unprocessable(
                "invalid_avatar",
                "an avatar is at most 64 characters, none of them NUL",
            ));
        }
    }
    let account = state
        .store
        .update_account(auth.account_id, body.avatar, privacy)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    Ok(axum::Json(account))
}

#[derive(Deserialize)]
pub struct TrophyBody {
    name: String,
}

pub async fn add_trophy(
    State(state): State<AppState>,
    auth: Auth,
    Json(body): Json<TrophyBody>,
) -> ApiResult<StatusCode> {
    let len = body.name.chars().count();
    if !(1..=40).contains(&len) || body.name.contains('\0') {
        return Err(ApiError::unprocessable(
            "invalid_name",
            "a trophy name is 1 to 40 characters, none of them NUL",
        ));
    }
    state.store.add_trophy(auth.account_id, &body.name).await?;
    Ok(StatusCode::CREATED)
}
