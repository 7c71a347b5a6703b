//! Sign-in codes for load agents, which may run where the cloud's mail log is out of reach:
//! an agent asks the coordinator over NATS, and the coordinator answers from its own
//! [`CodeSource`] (the mail log it was given): sealed both ways, and only for the addresses
//! of that agent's own players.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::agents::agent::AgentSession;
use crate::agents::coordinator::Sessions;
use crate::agents::protocol::{self, CodeReply, CodeRequest};
use crate::error::LoadError;
use crate::seal::Channel;
use crate::target::CodeSource;

/// How long an agent waits for the coordinator's answer: longer than the coordinator's own
/// wait for the code, so that a missing code is reported as such.
const ASK_WAIT: Duration = Duration::from_secs(45);

/// The agent's [`CodeSource`]: the coordinator of `run`.
pub(crate) struct NatsCodes {
    client: async_nats::Client,
    subject: String,
    session: Arc<AgentSession>,
}

impl NatsCodes {
    pub(crate) fn new(
        client: async_nats::Client,
        run: &str,
        name: &str,
        session: Arc<AgentSession>,
    ) -> Self {
        NatsCodes {
            client,
            subject: protocol::codes(run, name),
            session,
        }
    }
}

impl CodeSource for NatsCodes {
    fn code_for<'a>(&'a self, email: &'a str) -> BoxFuture<'a, Result<String, LoadError>> {
        Box::pin(async move {
            let fail = |detail: String| LoadError::Node {
                url: format!("nats subject {}", self.subject),
                detail,
            };
            let seq = self.session.codes.next();
            let body = protocol::encode(&CodeRequest {
                email: email.to_string(),
            });
            let request = async_nats::Request::new()
                .payload(
                    self.session
                        .key
                        .seal(Channel::CodeRequest, seq, &body)
                        .into(),
                )
                .timeout(Some(ASK_WAIT));
            let answer = self
                .client
                .send_request(self.subject.clone(), request)
                .await
                .map_err(|e| fail(format!("asking the coordinator for a code: {e}")))?;
            let (answered, body) = self
                .session
                .key
                .open(Channel::CodeReply, &answer.payload)
                .map_err(|e| fail(e.to_string()))?;
            if answered != seq {
                return Err(fail(format!("an answer to request {answered}, not {seq}")));
            }
            let reply: CodeReply = protocol::decode(body).map_err(|e| fail(e.to_string()))?;
            reply.map_err(|reason| fail(format!("no code for {email}: {reason}")))
        })
    }
}

/// The number of the player a load email of the run's `tag` belongs to:
/// `[burstK.]TAG.N@load.anyplay.test`; `None` for any other address.
fn player_of(email: &str, tag: &str) -> Option<usize> {
    let local = email.strip_suffix("@load.anyplay.test")?;
    let local = match local.strip_prefix("burst") {
        Some(burst) => {
            let (k, rest) = burst.split_once('.')?;
            k.bytes().all(|b| b.is_ascii_digit()).then_some(rest)?
        }
        None => local,
    };
    let number = local.strip_prefix(tag)?.strip_prefix('.')?;
    // The canonical spelling only (`7`, not `07` or `+7`), as the players write it.
    let n: usize = number.parse().ok()?;
    (n.to_string() == number).then_some(n)
}

/// Answers the agents of `run` from `codes` until the task is aborted: each agent (by its
/// session in `sessions`) only for the emails of the players in its share (`players`) of the
/// run's `tag`.
pub(crate) async fn serve(
    client: async_nats::Client,
    run: &str,
    sessions: Sessions,
    players: Arc<std::collections::HashMap<String, std::ops::Range<usize>>>,
    tag: String,
    codes: Arc<dyn CodeSource>,
) -> Result<JoinHandle<()>, async_nats::SubscribeError> {
    let mut requests = client.subscribe(protocol::any_codes(run)).await?;
    Ok(tokio::spawn(async move {
        while let Some(message) = requests.next().await {
            let (client, codes, tag) = (client.clone(), codes.clone(), tag.clone());
            let Some(name) = protocol::last_token(message.subject.as_str()) else {
                continue;
            };
            let Some(session) = crate::sync::lock(&sessions).get(name).cloned() else {
                continue;
            };
            let opened = session
                .key
                .open(Channel::CodeRequest, &message.payload)
                .and_then(|(seq, body)| session.codes.take(seq).map(|()| (seq, body)));
            let (seq, request) = match opened {
                Ok((seq, body)) => (seq, protocol::decode::<CodeRequest>(body)),
                Err(e) => {
                    tracing::warn!("agent {name:?}: ignored a code request: {e}");
                    continue;
                }
            };
            let theirs = players.get(name).cloned().unwrap_or(0..0);
            tokio::spawn(async move {
                let Some(reply) = message.reply else { return };
                let answer: CodeReply = match request {
                    Ok(request)
                        if player_of(&request.email, &tag).is_some_and(|p| theirs.contains(&p)) =>
                    {
                        codes
                            .code_for(&request.email)
                            .await
                            .map_err(|e| e.to_string())
                    }
                    Ok(request) => Err(format!(
                        "{} is not the address of one of this agent's players",
                        request.email
                    )),
                    Err(e) => Err(e.to_string()),
                };
                let sealed = session
                    .key
                    .seal(Channel::CodeReply, seq, &protocol::encode(&answer));
                if let Err(e) = client.publish(reply, sealed.into()).await {
                    tracing::warn!("answering an agent's code request: {e}");
                }
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_runs_load_addresses_name_a_player() {
        let tag = "abcde";
        assert_eq!(player_of("abcde.17@load.anyplay.test", tag), Some(17));
        assert_eq!(
            player_of("burst3.abcde.17@load.anyplay.test", tag),
            Some(17)
        );
        for other in [
            "ceo@example.com",
            "abcde.x@load.anyplay.test",
            // Another run's player, and tags the run never had.
            "k06gr.5@load.anyplay.test",
            "invented.0@load.anyplay.test",
            "burst9.invented.0@load.anyplay.test",
            "A.B.C.0@load.anyplay.test",
            "abcde.+0@load.anyplay.test",
            "abcde.00@load.anyplay.test",
            "abcdef.1@load.anyplay.test",
            "burstx.abcde.1@load.anyplay.test",
            "abcde.1@LOAD.anyplay.test",
        ] {
            assert_eq!(player_of(other, tag), None, "{other}");
        }
    }
}
