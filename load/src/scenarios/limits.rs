//! Bursts past the cloud's per-address limits (`--rate-limits`): now and then, from an address
//! that no player uses, a player's calls go past the call limit (`GET /v1/me` with its token),
//! or one fresh email's sign-ins past the email limit (`POST /v1/auth/email`), spread over the
//! nodes in turn, so that a limit counted per node and not across the cloud lets too many by.
//! Every call past a limit must be answered 429 with `Retry-After`: how the cloud answered is
//! one fact per burst ([`Fact::LimitBurst`]), a refusal and not an error, which the chaos check
//! `rate_limits` judges. A burst starts early in a wall-clock minute, so that it ends in the
//! window it began in (the cloud's windows follow the wall clock's minutes, or start at an
//! address's first call).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::stream::{self, StreamExt};
use reqwest::header::RETRY_AFTER;
use reqwest::{RequestBuilder, Response};
use serde_json::json;

use crate::api::client::http_client;
use crate::api::net::{burst_address, BURSTS_PER_FLEET};
use crate::measure::facts::{BurstAnswers, Fact, RateLimit};
use crate::players::player::Player;
use crate::scenarios::Ctx;
use crate::settings::RateLimits;

/// When the first burst goes, and how often the next.
const FIRST: Duration = Duration::from_secs(2);
const EVERY: Duration = Duration::from_secs(10);
/// Calls past the call limit each burst makes, and past the email limit.
const PAST_CALLS: u32 = 20;
const PAST_EMAILS: u32 = 4;
/// Calls of a burst in flight at once.
const IN_FLIGHT: usize = 8;
/// A calls burst starts only this early in a wall-clock minute, so that it ends in that minute.
const LATEST_START_S: u64 = 45;

/// Runs a burst every [`EVERY`] for `duration`, the two limits in turn (the email limit
/// first); how many ran.
pub async fn bursts(ctx: &Ctx, limits: Option<RateLimits>, duration: Duration) -> usize {
    let Some(limits) = limits else {
        return 0;
    };
    let start = tokio::time::Instant::now();
    let mut ran = 0;
    for k in 0..BURSTS_PER_FLEET {
        let calls = k % 2 == 1;
        tokio::time::sleep_until(start + FIRST + EVERY * k as u32).await;
        if calls {
            // The email limit's window slides; the call limit's may follow the clock's minutes.
            tokio::time::sleep(until_early_in_a_minute()).await;
        }
        if start.elapsed() >= duration {
            break;
        }
        let players = ctx.fleet.players();
        // A player signed in now, its place in the fleet moving on with each burst.
        let Some(player) = (0..players.len())
            .map(|i| &players[(k as usize * 7919 + i) % players.len()])
            .find(|p| p.is_online())
        else {
            continue;
        };
        let source = burst_address(ctx.fleet.first(), k);
        let burst = if calls {
            Burst::calls(player, limits.calls_per_minute + PAST_CALLS).await
        } else {
            let email = format!("burst{k}.{}", player.email);
            Some(Burst::emails(
                email,
                limits.auth_email_per_15m + PAST_EMAILS,
            ))
        };
        if let Some(burst) = burst {
            ran += usize::from(burst.run(player, source).await);
        }
    }
    ran
}

/// How long until the wall clock is at most [`LATEST_START_S`] into a minute.
fn until_early_in_a_minute() -> Duration {
    let now = wall_ms();
    let into = now % 60_000;
    if into <= LATEST_START_S * 1000 {
        Duration::ZERO
    } else {
        // One second into the next minute, clear of its edge.
        Duration::from_millis(60_000 - into + 1000)
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One burst: which limit, its calls, and what each call is.
struct Burst {
    limit: RateLimit,
    calls: u32,
    call: Call,
}

enum Call {
    /// `GET /v1/me` with this access token.
    Me(String),
    /// `POST /v1/auth/email` for this email.
    Email(String),
}

impl Burst {
    /// `calls` calls past the call limit with `player`'s token; `None` when it has none now.
    async fn calls(player: &Player, calls: u32) -> Option<Burst> {
        let token = player.access_token().await.ok()?;
        Some(Burst {
            limit: RateLimit::Calls,
            calls,
            call: Call::Me(token),
        })
    }

    fn emails(email: String, calls: u32) -> Burst {
        Burst {
            limit: RateLimit::AuthEmail,
            calls,
            call: Call::Email(email),
        }
    }

    /// Sends the burst from `source`, the nodes in turn, and records it as `player`'s fact;
    /// false when no client could be bound to the address.
    async fn run(&self, player: &Player, source: Ipv4Addr) -> bool {
        let Ok(http) = http_client(Some(IpAddr::V4(source))) else {
            return false;
        };
        let nodes = &player.shared().nodes;
        let (sent, wall_sent) = (Instant::now(), wall_ms());
        let answers = stream::iter(0..self.calls)
            .map(|i| {
                let base = &nodes[i as usize % nodes.len()].endpoint.api;
                let request = match &self.call {
                    Call::Me(token) => http.get(format!("{base}/v1/me")).bearer_auth(token),
                    Call::Email(email) => http
                        .post(format!("{base}/v1/auth/email"))
                        .json(&json!({ "email": email })),
                };
                answer(request)
            })
            .buffer_unordered(IN_FLIGHT)
            .fold(BurstAnswers::default(), |mut answers, answer| async move {
                answers.calls += 1;
                match answer {
                    Answer::Ok => answers.ok += 1,
                    Answer::Limited => answers.limited += 1,
                    Answer::NoRetryAfter => answers.no_retry_after += 1,
                    Answer::Failed => answers.failed += 1,
                }
                answers
            })
            .await;
        player.emit(Fact::LimitBurst {
            limit: self.limit,
            source: IpAddr::V4(source),
            sent,
            wall_ms: (wall_sent, wall_ms()),
            answers,
        });
        true
    }
}

/// How one call of a burst was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    Limited,
    NoRetryAfter,
    Failed,
}

async fn answer(request: RequestBuilder) -> Answer {
    match request.send().await {
        Ok(response) => classify(&response),
        Err(_) => Answer::Failed,
    }
}

fn classify(response: &Response) -> Answer {
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok());
    answer_of(response.status().as_u16(), retry_after)
}

/// A call past the limit is any the call itself answered: a success, or a refusal of its own
/// (a 401 of a token a logout revoked meanwhile, say), since the limit is counted first.
fn answer_of(status: u16, retry_after: Option<&str>) -> Answer {
    match status {
        // The contract gives the wait in whole seconds.
        429 if retry_after.is_some_and(|v| v.trim().parse::<u64>().is_ok()) => Answer::Limited,
        429 => Answer::NoRetryAfter,
        200..=499 => Answer::Ok,
        _ => Answer::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_counts_as_limited_only_with_whole_seconds_to_wait() {
        assert_eq!(answer_of(200, None), Answer::Ok);
        assert_eq!(answer_of(202, None), Answer::Ok);
        assert_eq!(answer_of(429, Some("12")), Answer::Limited);
        assert_eq!(answer_of(429, None), Answer::NoRetryAfter);
        assert_eq!(answer_of(429, Some("soon")), Answer::NoRetryAfter);
        assert_eq!(answer_of(401, None), Answer::Ok);
        assert_eq!(answer_of(503, Some("1")), Answer::Failed);
        assert_eq!(answer_of(500, None), Answer::Failed);
    }
}
