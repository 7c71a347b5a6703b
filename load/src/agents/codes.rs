//! Sign-in codes for load agents, which may run where the cloud's mail log is out of reach:
//! an agent asks the coordinator over NATS, and the coordinator answers from its own
//! [`CodeSource`] (the mail log it was given).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::agents::protocol::{self, CodeReply, CodeRequest};
use crate::error::LoadError;
use crate::target::CodeSource;

/// How long an agent waits for the coordinator's answer: longer than the coordinator's own
/// wait for the code, so that a missing code is reported as such.
const ASK_WAIT: Duration = Duration::from_secs(45);

/// The agent's [`CodeSource`]: the coordinator of `run`.
pub struct NatsCodes {
    client: async_nats::Client,
    subject: String,
}

impl NatsCodes {
    pub fn new(client: async_nats::Client, run: &str) -> Self {
        NatsCodes {
            client,
            subject: protocol::codes(run),
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
            let request = async_nats::Request::new()
                .payload(
                    protocol::encode(&CodeRequest {
                        email: email.to_string(),
                    })
                    .into(),
                )
                .timeout(Some(ASK_WAIT));
            let answer = self
                .client
                .send_request(self.subject.clone(), request)
                .await
                .map_err(|e| fail(format!("asking the coordinator for a code: {e}")))?;
            let reply: CodeReply =
                protocol::decode(&answer.payload).map_err(|e| fail(e.to_string()))?;
            reply.map_err(|reason| fail(format!("no code for {email}: {reason}")))
        })
    }
}

/// Answers the agents of `run` from `codes` until the task is aborted.
pub async fn serve(
    client: async_nats::Client,
    run: &str,
    codes: Arc<dyn CodeSource>,
) -> Result<JoinHandle<()>, async_nats::SubscribeError> {
    let mut requests = client.subscribe(protocol::codes(run)).await?;
    Ok(tokio::spawn(async move {
        while let Some(message) = requests.next().await {
            let (client, codes) = (client.clone(), codes.clone());
            tokio::spawn(async move {
                let Some(reply) = message.reply else { return };
                let answer: CodeReply = match protocol::decode::<CodeRequest>(&message.payload) {
                    Ok(request) => codes
                        .code_for(&request.email)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = client
                    .publish(reply, protocol::encode(&answer).into())
                    .await
                {
                    tracing::warn!("answering an agent's code request: {e}");
                }
            });
        }
    }))
}
