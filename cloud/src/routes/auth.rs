//! Email-code sign-in, signup, refresh and logout.

use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::events::CloseCode;
use crate::extract::{Auth, ClientIp, Json};
use crate::state::AppState;
use crate::store::{Account, ChallengeIssue, ChallengeKey, CodeCheck, IssuedTokens, Signup};

#[derive(Deserialize)]
pub struct EmailBody {
    email: String,
}

#[derive(Deserialize)]
pub struct CodeBody {
    challenge_id: String,
    code: String,
}

#[derive(Deserialize)]
pub struct SignupBody {
    signup_token: String,
    handle: String,
}

#[derive(Deserialize)]
pub struct RefreshBody {
    refresh_token: String,
}

/// A plausible address: one `@`, something before it, a dotted domain after,
/// no spaces, at most 254 characters. Deliverability is the mail sink's job.
pub fn valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    email.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Lower-cases a handle and checks it: 3 to 20 of `[a-z0-9_]`.
pub fn normalize_handle(handle: &str) -> Option<String> {
    let h = handle.to_lowercase();
    let ok = (3..=20).contains(&h.len())
        && h.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(h)
}

pub async fn email(
    State(state): State<AppState>,
    ip: ClientIp,
    Json(body): Json<EmailBody>,
) -> ApiResult<Response> {
    let email = body.email.trim().to_lowercase();
    if !valid_email(&email) {
        return Err(ApiError::rule(
            StatusCode::BAD_REQUEST,
            "invalid_email",
            "not a valid email address",
        ));
    }
    let limits = &state.config.rate_limits;
    let per_window = limits.enabled.then_some(limits.auth_email_per_15m);
    let ip = ip.0.to_string();
    // Refused already, and its window cannot have freed up: refused again without store work.
    let key = |by| match by {
        ChallengeKey::Ip => format!("ip {ip}"),
        ChallengeKey::Email => format!("email {email}"),
    };
    let refused = [ChallengeKey::Ip, ChallengeKey::Email]
        .into_iter()
        .find_map(|by| state.sign_in_refusals.remaining(&key(by), Instant::now()));
    if let Some(wait) = refused {
        return Err(ApiError::RateLimited {
            retry_after_s: wait.as_secs_f64().ceil() as u64,
        });
    }
    match state
        .store
        .create_challenge(&email, &ip, per_window)
        .await?
    {
        ChallengeIssue::Created { challenge_id, code } => {
            state
                .mail
                .send_code(&email, &code)
                .map_err(|e| ApiError::Internal(e.into()))?;
            Ok((
                StatusCode::ACCEPTED,
                axum::Json(json!({ "challenge_id": challenge_id })),
            )
                .into_response())
        }
        ChallengeIssue::Limited { by, wait } => {
            state.sign_in_refusals.remember(key(by), wait);
            Err(ApiError::RateLimited {
                retry_after_s: wait.as_secs_f64().ceil() as u64,
            })
        }
    }
}

fn signed_in(account: Account, tokens: IssuedTokens) -> serde_json::Value {
    json!({
        "access_token": tokens.access_token,
        "refresh_token": tokens.refresh_token,
        "expires_in": tokens.expires_in,
        "account": account,
    })
}

pub async fn code(
    State(state): State<AppState>,
    Json(body): Json<CodeBody>,
) -> ApiResult<Response> {
    // No challenge id holds a NUL (and PostgreSQL could not even look one up).
    if body.challenge_id.contains('\0') {
        return Err(invalid_code());
    }
    match state
        .store
        .check_code(
            &body.challenge_id,
            body.code.trim(),
            state.config.access_token_ttl,
        )
        .await?
    {
        CodeCheck::SignedIn(account, tokens) => {
            let mut answer = signed_in(account, tokens);
            answer["status"] = json!("signed_in");
            Ok(axum::Json(answer).into_response())
        }
        CodeCheck::SignupRequired { signup_token } => Ok(axum::Json(
            json!({ "status": "signup_required", "signup_token": signup_token }),
        )
        .into_response()),
        CodeCheck::Invalid => Err(invalid_code()),
    }
}

fn invalid_code() -> ApiError {
    ApiError::rule(
        StatusCode::UNAUTHORIZED,
        "invalid_code",
        "wrong or expired code",
    )
}

fn invalid_token() -> ApiError {
    ApiError::rule(
        StatusCode::UNAUTHORIZED,
        "invalid_token",
        "the token is not valid",
    )
}

pub async fn signup(
    State(state): State<AppState>,
    Json(body): Json<SignupBody>,
) -> ApiResult<Response> {
    let handle = normalize_handle(&body.handle).ok_or_else(|| {
        ApiError::unprocessable(
            "invalid_handle",
            "a handle is 3 to 20 characters of a-z, 0-9 and _",
        )
    })?;
    match state
        .store
        .signup(&body.signup_token, &handle, state.config.access_token_ttl)
        .await?
    {
        Signup::Created(account, tokens) => {
            Ok((StatusCode::CREATED, axum::Json(signed_in(account, tokens))).into_response())
        }
        Signup::HandleTaken => Err(ApiError::conflict("handle_taken", "that handle is taken")),
        Signup::InvalidToken => Err(invalid_token()),
    }
}

pub async fn refresh(
    State(state): State<AppState>,
    Json(body): Json<RefreshBody>,
) -> ApiResult<Response> {
    match state
        .store
        .refresh(&body.refresh_token, state.config.access_token_ttl)
        .await?
    {
        Some((account, tokens)) => Ok(axum::Json(signed_in(account, tokens)).into_response()),
        None => Err(invalid_token()),
    }
}

pub async fn logout(State(state): State<AppState>, auth: Auth) -> ApiResult<StatusCode> {
    #[cfg(feature = "seeded-defects")]
    let (revoke, close) = (
        !crate::defects::active(crate::defects::SeededDefect::LogoutKeepsTokens),
        !crate::defects::active(crate::defects::SeededDefect::LogoutLeavesSocket),
    );
    #[cfg(not(feature = "seeded-defects"))]
    let (revoke, close) = (true, true);
    if revoke {
        state.store.logout(auth.account_id).await?;
    }
    if close {
        state.close_connection(auth.account_id, CloseCode::SignedOut);
    }
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_lowercased_and_checked() {
        assert_eq!(normalize_handle("Ann_99").as_deref(), Some("ann_99"));
        assert_eq!(normalize_handle("ab"), None);
        assert_eq!(normalize_handle(&"a".repeat(21)), None);
        assert_eq!(normalize_handle("bob'; DROP TABLE accounts;--"), None);
        assert_eq!(normalize_handle("zoë"), None);
    }

    #[test]
    fn emails_need_a_dotted_domain() {
        assert!(valid_email("a@b.c"));
        assert!(!valid_email("a@b"));
        assert!(!valid_email("@b.c"));
        assert!(!valid_email("a b@c.d"));
        assert!(!valid_email("a@@b.c"));
    }
}
