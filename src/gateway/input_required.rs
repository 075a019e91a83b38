//! Multi-round-trip requests (SEP-2322) for a client that cannot be asked during its call: a
//! 2026-07-28 client keeps no back channel, so when an external server asks for elicitation,
//! sampling or roots during its call, orca answers the client with an `InputRequiredResult`
//! (`inputRequests` under their keys, a sealed `requestState`) while the call stays in flight
//! in this replica's memory, and the client's retry with `inputResponses` and that
//! `requestState` answers the server and waits for what comes next: the call's result, or the
//! next round. The state is sealed with HMAC-SHA256 under a key of this process
//! (`RequestStateCodec`), bound to the caller and to the request (method and name), and names
//! the call and its round, so it cannot be forged, replayed, or resumed by anyone else; a call
//! not resumed within `RESUME_WITHIN` is cancelled at the server and forgotten.
//!
//! # Design notes
//!
//! `input_required.rs` holds multi-round-trip requests (SEP-2322) for 2026-07-28 clients:
//! `PendingCalls` runs a proxied `tools/call`, `prompts/get` or `resources/read` whose client takes
//! an `InputRequiredResult` on a task of its own (so that it outlives the request and is recorded
//! once, when it ends) with an `external::Exchange`, and answers each round with the call's result
//! or the requests waiting, under a `requestState` sealed by rmcp's `RequestStateCodec`
//! (HMAC-SHA256, a random key per process) over the call's id and round, bound to the principal and
//! to the method and name; a retry opens it, hands its `inputResponses` to the exchange and waits
//! again; a call is kept from its first round on (at most 1,024, 64 per principal), and one not
//! resumed within 5 minutes is cancelled; a failed call that asked for a capability the client
//! lacked becomes `-32021`.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    InputRequiredResult, InputResponses, ProtocolVersion, RequestStateCodec, SealOptions,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::Principal;
use crate::external::Exchange;

/// How long a call waits for its client to come back with the input it asked for.
const RESUME_WITHIN: Duration = Duration::from_secs(300);
/// At most this many calls wait for their clients' input at once, and this many of one
/// principal's.
const MAX_PENDING: usize = 1024;
const MAX_PENDING_PER_PRINCIPAL: usize = 64;

/// What one round of a call ends with.
pub(crate) enum Round<T> {
    /// The call's own answer.
    Done(T),
    /// The input the server asked for, and the state to come back with.
    Input(InputRequiredResult),
}

/// What a `requestState` says, under its seal.
#[derive(Serialize, Deserialize)]
struct Sealed {
    call: Uuid,
    round: u64,
}

/// A call's answer when it comes, waited for by one round at a time.
type Outcome<T> = tokio::sync::Mutex<oneshot::Receiver<Result<T, McpError>>>;

struct Entry {
    /// The principal whose call it is (`Principal::identity`).
    owner: String,
    exchange: Arc<Exchange>,
    /// Bumped by each retry, so that a state is good for one retry only.
    round: u64,
    /// An `Arc<Outcome<T>>` for the call's result type.
    outcome: Arc<dyn Any + Send + Sync>,
}

/// The calls waiting for their clients' input, in this process.
pub(crate) struct PendingCalls {
    codec: RequestStateCodec,
    /// This replica's id, in front of every state it hands out (`cluster::tag_state`): a
    /// retry another replica receives is forwarded here.
    replica: String,
    calls: Mutex<HashMap<Uuid, Entry>>,
}

impl std::fmt::Debug for PendingCalls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PendingCalls").finish_non_exhaustive()
    }
}

/// Whether the request's client cannot be asked during its call and takes an
/// `InputRequiredResult` instead: it speaks 2026-07-28 or later.
pub(crate) fn translates(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Refuse `inputResponses` that are not an object of objects, before anything runs.
///
/// # Errors
///
/// `-32602` naming the first answer that is not an object.
pub(crate) fn check_responses(responses: Option<&InputResponses>) -> Result<(), McpError> {
    let not_object = responses.and_then(|responses| {
        responses.iter().find(|(_, answer)| !answer.is_object()).map(|(key, _)| key)
    });
    match not_object {
        Some(key) => Err(McpError::invalid_params(
            format!("inputResponses.{key} must be an object, the result of its request"),
            None,
        )),
        None => Ok(()),
    }
}

/// Who may resume a call, and which request it answers.
pub(crate) struct Binding {
    owner: String,
    /// A state sealed with this opens only with the same.
    sealed_with: String,
}

pub(crate) fn binding(principal: &Principal, method: &str, name: &str) -> Binding {
    let client = principal.client.as_deref().unwrap_or_default();
    let owner = principal.identity();
    Binding { sealed_with: format!("{owner}\u{1f}{client}\u{1f}{method}\u{1f}{name}"), owner }
}

fn refused(why: &str) -> McpError {
    McpError::invalid_params(format!("requestState refused: {why}"), None)
}

impl PendingCalls {
    /// No calls, and a sealing key of this process's own; `replica` names this replica.
    pub(crate) fn new(replica: &str) -> PendingCalls {
        let key: [u8; 32] = rand::random();
        let codec =
            RequestStateCodec::try_new(key.to_vec()).expect("32 bytes make a long enough key");
        PendingCalls { codec, replica: replica.to_owned(), calls: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `call` (whose external server asks its questions through `exchange`) on a task of its
    /// own, and answer its first round. `failed` tells a failed answer: one that follows a
    /// request the client lacked the capability for becomes that capability's `-32021`.
    ///
    /// # Errors
    ///
    /// The call's own error, `-32021`, or too many calls waiting for input.
    pub(crate) async fn begin<T, F>(
        self: &Arc<Self>,
        call: F,
        exchange: Arc<Exchange>,
        bound_to: &Binding,
        client_gone: &CancellationToken,
        failed: fn(&Result<T, McpError>) -> bool,
    ) -> Result<Round<T>, McpError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, McpError>> + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        tokio::spawn(async move {
            let _ = sender.send(call.await);
        });
        let outcome: Arc<Outcome<T>> = Arc::new(tokio::sync::Mutex::new(receiver));
        // The call is kept only once it waits for input (`keep`).
        self.drive(Uuid::new_v4(), &exchange, &outcome, bound_to, client_gone, failed).await
    }

    /// A client's retry: open its `requestState`, hand its `responses` to the server's waiting
    /// requests, and answer the call's next round.
    ///
    /// # Errors
    ///
    /// `-32602` for a state that does not open (forged, altered, another caller's or request's,
    /// expired), that names no waiting call or an earlier round, or for answers of the wrong
    /// kind; else as `begin`.
    pub(crate) async fn resume<T: Send + 'static>(
        self: &Arc<Self>,
        state: &str,
        responses: Option<InputResponses>,
        bound_to: &Binding,
        client_gone: &CancellationToken,
        failed: fn(&Result<T, McpError>) -> bool,
    ) -> Result<Round<T>, McpError> {
        let state = match crate::cluster::untag_state(state) {
            Some((replica, sealed)) if replica == self.replica => sealed,
            // Another replica's, not forwarded to it: it has stopped, and the call with it.
            Some(_) => {
                return Err(refused(
                    "the replica that held this call has stopped, and the call with it; call again without requestState",
                ));
            }
            None => state,
        };
        let sealed: Sealed =
            self.codec.open_json_with(state, bound_to.sealed_with.as_bytes()).map_err(|_| {
                refused("it is not one orca issued for this caller and this request, or it expired")
            })?;
        let (exchange, outcome) = {
            let mut calls = self.lock();
            let Some(entry) = calls.get_mut(&sealed.call) else {
                return Err(refused("the call it names has ended or was abandoned"));
            };
            if entry.round != sealed.round || entry.owner != bound_to.owner {
                return Err(refused("it is from an earlier round of the call"));
            }
            let Ok(outcome) = entry.outcome.clone().downcast::<Outcome<T>>() else {
                return Err(refused("it names a call of another kind"));
            };
            let exchange = entry.exchange.clone();
            exchange.answer(responses.unwrap_or_default())?;
            entry.round += 1;
            (exchange, outcome)
        };
        self.drive(sealed.call, &exchange, &outcome, bound_to, client_gone, failed).await
    }

    /// Wait for the call's answer or its next requests, whichever comes first.
    async fn drive<T: Send + 'static>(
        self: &Arc<Self>,
        id: Uuid,
        exchange: &Arc<Exchange>,
        outcome: &Arc<Outcome<T>>,
        bound_to: &Binding,
        client_gone: &CancellationToken,
        failed: fn(&Result<T, McpError>) -> bool,
    ) -> Result<Round<T>, McpError> {
        let mut receiver = outcome.lock().await;
        loop {
            tokio::select! {
                done = &mut *receiver => {
                    self.lock().remove(&id);
                    let done = done.unwrap_or_else(|_| {
                        Err(McpError::internal_error("the call ended without an answer", None))
                    });
                    return match exchange.missing() {
                        Some(missing) if failed(&done) => {
                            Err(McpError::missing_required_client_capability(missing))
                        }
                        _ => done.map(Round::Done),
                    };
                }
                requests = exchange.requested() => {
                    // The requests went away with the call that made them: its answer follows.
                    if requests.is_empty() {
                        continue;
                    }
                    let round = self.keep(id, exchange, outcome, &bound_to.owner)?;
                    let options = SealOptions::new()
                        .associated_data(bound_to.sealed_with.as_bytes())
                        .ttl(RESUME_WITHIN);
                    let state = self
                        .codec
                        .seal_json_with(&Sealed { call: id, round }, &options)
                        .map_err(|error| McpError::internal_error(error.to_string(), None))?;
                    self.expire(id, round);
                    let state = crate::cluster::tag_state(&self.replica, &state);
                    return Ok(Round::Input(InputRequiredResult::new(Some(requests), Some(state))));
                }
                () = client_gone.cancelled() => {
                    self.abandon(id);
                    exchange.cancelled.cancel();
                    return Err(McpError::invalid_request("the client cancelled its call", None));
                }
            }
        }
    }

    /// The round of a call about to wait for its client's input, kept from its first round on.
    fn keep<T: Send + 'static>(
        &self,
        id: Uuid,
        exchange: &Arc<Exchange>,
        outcome: &Arc<Outcome<T>>,
        owner: &str,
    ) -> Result<u64, McpError> {
        let mut calls = self.lock();
        if let Some(entry) = calls.get(&id) {
            return Ok(entry.round);
        }
        let owners = calls.values().filter(|entry| entry.owner == owner).count();
        if calls.len() >= MAX_PENDING || owners >= MAX_PENDING_PER_PRINCIPAL {
            drop(calls);
            exchange.cancelled.cancel();
            return Err(McpError::internal_error(
                "too many calls are waiting for their clients' input; try again later",
                None,
            ));
        }
        let outcome: Arc<dyn Any + Send + Sync> = outcome.clone();
        let entry =
            Entry { owner: owner.to_owned(), exchange: exchange.clone(), round: 0, outcome };
        calls.insert(id, entry);
        Ok(0)
    }

    /// Abandon the call if round `round` is not resumed in time.
    fn expire(self: &Arc<Self>, id: Uuid, round: u64) {
        let pending = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(RESUME_WITHIN).await;
            let Some(pending) = pending.upgrade() else { return };
            let stale = pending.lock().get(&id).is_some_and(|entry| entry.round == round);
            if stale {
                tracing::debug!(%id, "a call waiting for its client's input was abandoned");
                pending.abandon(id);
            }
        });
    }

    /// Forget the call and cancel it at the server.
    fn abandon(&self, id: Uuid) {
        if let Some(entry) = self.lock().remove(&id) {
            entry.exchange.cancelled.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rmcp::model::InputRequest;

    use super::*;
    use crate::external::Kind;

    /// Begin a call for `who` whose server asks one elicitation and then answers its answer.
    async fn asking(pending: &Arc<PendingCalls>, who: &str) -> Result<Round<String>, McpError> {
        let exchange = Exchange::new(None, InputResponses::new());
        let asks = exchange.clone();
        let call = async move {
            let request: InputRequest = serde_json::from_value(serde_json::json!({
                "method": "elicitation/create",
                "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}},
            }))
            .unwrap();
            let answer = asks.ask(Kind::Elicitation, Some("name"), request).await?;
            Ok(answer.to_string())
        };
        let bound_to = binding(&Principal::new(who, BTreeSet::new()), "tools/call", "ask");
        pending.begin(call, exchange, &bound_to, &CancellationToken::new(), Result::is_err).await
    }

    #[tokio::test]
    async fn one_principal_may_keep_only_so_many_calls_waiting_for_input_and_others_still_may() {
        let pending = Arc::new(PendingCalls::new("0a1b2c3d4e5f"));
        for _ in 0..MAX_PENDING_PER_PRINCIPAL {
            assert!(matches!(asking(&pending, "alice").await, Ok(Round::Input(_))));
        }
        let refused = asking(&pending, "alice").await.err().expect("one call too many");
        assert!(refused.message.contains("too many calls"), "{refused:?}");
        assert!(matches!(asking(&pending, "bob").await, Ok(Round::Input(_))));
    }

    #[tokio::test]
    async fn a_token_user_named_like_an_api_key_cannot_resume_the_keys_call() {
        let pending = Arc::new(PendingCalls::new("0a1b2c3d4e5f"));
        let Ok(Round::Input(asked)) = asking(&pending, "bob").await else {
            panic!("the call asks for input");
        };
        let state = asked.request_state.clone().unwrap();
        // A token whose user is `bob`, carrying no client claim: only its identity tells it
        // from the API key `bob`.
        let mut token_user = Principal::new("bob", BTreeSet::new());
        token_user.kind = crate::config::PrincipalKind::Token;
        token_user.issuer = Some("https://login.example.com".to_owned());
        let client_gone = CancellationToken::new();
        let theirs = binding(&token_user, "tools/call", "ask");
        let refused =
            pending.resume::<String>(&state, None, &theirs, &client_gone, Result::is_err).await;
        let refused = refused.err().expect("the token user resumed the key's call");
        assert!(refused.message.contains("requestState refused"), "{refused:?}");
        let key = binding(&Principal::new("bob", BTreeSet::new()), "tools/call", "ask");
        let answers: InputResponses = serde_json::from_value(serde_json::json!({
            "name": {"action": "accept", "content": {"name": "Bob"}},
        }))
        .unwrap();
        let resumed =
            pending.resume::<String>(&state, Some(answers), &key, &client_gone, Result::is_err);
        assert!(matches!(resumed.await, Ok(Round::Done(_))), "the key resumes its own call");
    }

    #[tokio::test]
    async fn a_call_that_never_asks_is_answered_and_not_kept() {
        let pending = Arc::new(PendingCalls::new("0a1b2c3d4e5f"));
        let exchange = Exchange::new(None, InputResponses::new());
        let bound_to = binding(&Principal::new("alice", BTreeSet::new()), "tools/call", "quick");
        let call = async { Ok::<_, McpError>("done".to_owned()) };
        let client_gone = CancellationToken::new();
        let round = pending.begin(call, exchange, &bound_to, &client_gone, Result::is_err);
        assert!(matches!(round.await, Ok(Round::Done(answer)) if answer == "done"));
        assert!(pending.lock().is_empty());
    }
}
