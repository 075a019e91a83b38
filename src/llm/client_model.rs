//! The calling client's own model as a provider (`llm_provider: client`): the same [`Request`]
//! any provider gets, asked of whoever called the tool. How the question reaches the client
//! (MCP `sampling/createMessage` on its session, on its request's answer stream, or in an input
//! round) is the gateway's business: it hands the call a [`ClientModel`] and this module bounds
//! the exchange by `llm.timeout_ms` and turns what comes back into a [`Completion`]-shaped answer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::{Answer, Error, Provider, Request};

/// What the client answered: the text and the model it says produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sampled {
    pub(crate) text: String,
    pub(crate) model: String,
}

/// Why the client gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client (or the person at it) said no, or answered with an error.
    Declined(String),
    /// The client does not answer sampling requests.
    NotOffered,
    /// The client went away or cancelled its call.
    Gone,
}

/// A future a [`ClientModel`] answers with.
pub(crate) type Sampling<'a> = Pin<Box<dyn Future<Output = Result<Sampled, Refusal>> + Send + 'a>>;

/// The client that made the call, as a model to ask. Implemented by the gateway.
pub(crate) trait ClientModel: Send + Sync + std::fmt::Debug {
    /// Whether the client declared that it answers sampling requests; `None` when orca cannot
    /// know (a stateless request of a 2025 revision without a valid session token).
    fn offers_sampling(&self) -> Option<bool>;

    /// Ask the client's model `request`, with `hints` as the model names orca would prefer.
    fn sample<'a>(&'a self, request: &'a Request, hints: &'a [String]) -> Sampling<'a>;
}

/// Ask `client`'s model, for at most `timeout`.
///
/// # Errors
///
/// [`Error::ClientDeclined`], [`Error::ClientUnavailable`], or [`Error::Timeout`] when the
/// client does not answer in time.
pub(super) async fn complete(
    client: &dyn ClientModel,
    request: &Request,
    timeout: Duration,
) -> Result<Answer, Error> {
    let provider = Provider::Client;
    let hints: Vec<String> = Some(request.model.trim())
        .filter(|model| !model.is_empty())
        .map(str::to_owned)
        .into_iter()
        .collect();
    let sampled = match tokio::time::timeout(timeout, client.sample(request, &hints)).await {
        Err(_) => return Err(Error::Timeout { provider, after: timeout }),
        Ok(Err(Refusal::Declined(message))) => {
            return Err(Error::ClientDeclined { message: cut(&message) });
        }
        Ok(Err(Refusal::NotOffered)) => {
            return Err(Error::ClientUnavailable {
                reason: "the calling client does not offer its model (no sampling capability)"
                    .to_owned(),
            });
        }
        Ok(Err(Refusal::Gone)) => {
            return Err(Error::ClientUnavailable {
                reason: "the calling client went away before its model answered".to_owned(),
            });
        }
        Ok(Ok(sampled)) => sampled,
    };
    if sampled.text.trim().is_empty() {
        return Err(Error::Malformed {
            provider,
            message: "the client's model answered with no text".to_owned(),
        });
    }
    let model = Some(cut(sampled.model.trim())).filter(|model| !model.is_empty());
    Ok(Answer {
        text: sampled.text,
        model: model.unwrap_or_else(|| "unknown".to_owned()),
        prompt_tokens: None,
        completion_tokens: None,
    })
}

/// At most 200 characters of what a client said, for messages and records.
fn cut(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Scripted(Result<Sampled, Refusal>, Option<Duration>);

    impl ClientModel for Scripted {
        fn offers_sampling(&self) -> Option<bool> {
            Some(true)
        }

        fn sample<'a>(&'a self, request: &'a Request, hints: &'a [String]) -> Sampling<'a> {
            assert_eq!(hints, std::slice::from_ref(&request.model));
            Box::pin(async move {
                if let Some(wait) = self.1 {
                    tokio::time::sleep(wait).await;
                }
                self.0.clone()
            })
        }
    }

    #[tokio::test]
    async fn a_clients_answer_declines_and_silence_become_answers_and_errors() {
        let request = super::super::sample_request();
        let answered =
            |text: &str, model: &str| Ok(Sampled { text: text.into(), model: model.into() });
        // (client, the answer's text and model, or a part of the error)
        type Expected = Result<(&'static str, &'static str), &'static str>;
        let cases: Vec<(Scripted, Expected)> = vec![
            (Scripted(answered("SELECT 1", "claude-x"), None), Ok(("SELECT 1", "claude-x"))),
            (Scripted(answered("SELECT 1", " "), None), Ok(("SELECT 1", "unknown"))),
            (Scripted(answered("  ", "m"), None), Err("answered with no text")),
            (
                Scripted(Err(Refusal::Declined("user said no".into())), None),
                Err("the client declined to answer through its model: user said no"),
            ),
            (Scripted(Err(Refusal::NotOffered), None), Err("no sampling capability")),
            (
                Scripted(answered("late", "m"), Some(Duration::from_secs(5))),
                Err("did not answer within 50 ms"),
            ),
        ];
        for (client, expected) in cases {
            let got = complete(&client, &request, Duration::from_millis(50)).await;
            match (got, expected) {
                (Ok(answer), Ok((text, model))) => {
                    assert_eq!((answer.text.as_str(), answer.model.as_str()), (text, model));
                }
                (Err(error), Err(part)) => {
                    assert!(error.to_string().contains(part), "{error} lacks {part:?}");
                }
                (got, expected) => panic!("{got:?} instead of {expected:?}"),
            }
        }
    }
}
