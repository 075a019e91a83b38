//! The requests an external server makes during a call whose client cannot be asked directly (a
//! 2026-07-28 client keeps no back channel): each is held under a key until the client answers
//! it by retrying its request with `inputResponses` (SEP-2322's multi-round-trip requests), and
//! the server waits for that answer as it would for a client's. A request for a capability the
//! client did not declare is refused to the server with `-32021`, and remembered, so that a
//! call that then fails can be answered to the client as missing that capability.
//!
//! # Design notes
//!
//! `exchange.rs`: `Exchange`, what a server asks during a call whose client cannot be asked
//! directly (a 2026-07-28 client): `calls.rs` hands such a caller's sampling, elicitation and roots
//! requests to it instead of the client's stream; each waits under a key (the server's
//! `_meta["orca/inputKey"]`, else the kind and a number) until the client's answers arrive by
//! `answer`, and `requested` gives the gateway the requests waiting (those arriving within 50 ms of
//! one another together); a request for a capability the client did not declare is refused to the
//! server with `-32021` and remembered (`missing`). `calls::send_for` sends a request noted in
//! flight for its caller (`tools/call`, `prompts/get` and `resources/read`). `calls::answer_round`
//! answers a 2026-07-28 server's `InputRequiredResult` (an upstream entry's `protocol:`;
//! `Upstream::start` picks rmcp's lifecycle: `initialize`, `server/discover`, or discover falling
//! back): each request goes to the caller, by the exchange for a 2026-07-28 caller or as a request
//! on a 2025 caller's stream, and `upstream/call.rs`'s `send_rounds` calls the server again with
//! the answers and its `requestState`; `relay.rs`'s `request_for` does the same for `prompts/get`
//! and `resources/read`; `send_for` puts the caller's capabilities in such a server's request
//! `_meta` (`clientCapabilities`), so that it asks only what the caller can answer;
//! `handler::listen` hears such a server's list changes, and the updates of the URIs in
//! `Subscriptions` (which tells it when they change, to open the stream again), on a
//! `subscriptions/listen` stream.
#![expect(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577, but the protocol versions servers speak today have them"
)]

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, InputRequest, InputRequests,
    InputResponses, ListRootsResult,
};
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

/// The `_meta` key under which a server may name its request's key in `inputRequests`; without
/// it the key is the kind of request and a number (`elicitation-1`).
pub(crate) const INPUT_KEY: &str = "orca/inputKey";

/// Requests that arrive within this of one another are asked in the same round.
const GATHER: Duration = Duration::from_millis(50);
/// A round is asked at the latest this long after its first request arrived.
const GATHER_AT_MOST: Duration = Duration::from_millis(500);
/// At most this many requests of one call wait at once, and as many answers are kept ahead.
const MAX_WAITING: usize = 16;
/// The longest key a server may name.
const MAX_KEY: usize = 64;

/// What a server asks of the client during a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Elicitation,
    Sampling,
    Roots,
}

impl Kind {
    /// The client capability the request needs, as the protocol names it.
    fn capability(self) -> &'static str {
        match self {
            Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
            Kind::Roots => "roots",
        }
    }

    fn declared(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Kind::Elicitation => capabilities.elicitation.is_some(),
            Kind::Sampling => capabilities.sampling.is_some(),
            Kind::Roots => capabilities.roots.is_some(),
        }
    }

    /// Why `answer` is not an answer to this kind of request, if it is not.
    fn problem(self, answer: &Value) -> Option<String> {
        let parsed = match self {
            Kind::Elicitation => serde_json::from_value::<ElicitResult>(answer.clone()).err(),
            Kind::Sampling => serde_json::from_value::<CreateMessageResult>(answer.clone()).err(),
            Kind::Roots => serde_json::from_value::<ListRootsResult>(answer.clone()).err(),
        };
        parsed.map(|error| format!("not a {} result: {error}", self.capability()))
    }
}

struct Waiting {
    /// Tells this request from a later one under the same key.
    serial: u64,
    kind: Kind,
    request: InputRequest,
    answer: oneshot::Sender<Value>,
}

#[derive(Default)]
struct State {
    waiting: BTreeMap<String, Waiting>,
    /// Answers the client gave under keys no request waits for yet.
    offered: InputResponses,
    serial: u64,
    /// The capabilities the server asked for that the client had not declared.
    missing: BTreeMap<&'static str, Value>,
}

/// One call's requests to a client that answers them by retrying its request.
pub(crate) struct Exchange {
    state: Mutex<State>,
    /// Counts arrivals, so that a round can wait for requests arriving together.
    arrivals: watch::Sender<u64>,
    /// What the client declared; `None` when it is not known (nothing is refused then).
    capabilities: Option<ClientCapabilities>,
    /// Cancelled when the call is abandoned: the client went away or never came back.
    pub(crate) cancelled: CancellationToken,
    /// What the server last said of its own task for this call (`statusMessage`), for the
    /// caller's task to say too.
    status: watch::Sender<Option<String>>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Exchange").finish_non_exhaustive()
    }
}

/// Takes a request that nobody answered off the waiting list when its server stops waiting.
struct Unwait<'a> {
    exchange: &'a Exchange,
    key: String,
    serial: u64,
}

impl Drop for Unwait<'_> {
    fn drop(&mut self) {
        let mut state = self.exchange.lock();
        if state.waiting.get(&self.key).is_some_and(|waiting| waiting.serial == self.serial) {
            state.waiting.remove(&self.key);
        }
    }
}

impl Exchange {
    /// An exchange for a client that declared `capabilities` and sent `offered` with its first
    /// request (answers given ahead, under the keys the server will name).
    pub(crate) fn new(
        capabilities: Option<ClientCapabilities>,
        offered: InputResponses,
    ) -> Arc<Exchange> {
        let state =
            State { offered: offered.into_iter().take(MAX_WAITING).collect(), ..State::default() };
        Arc::new(Exchange {
            state: Mutex::new(state),
            arrivals: watch::channel(0).0,
            capabilities,
            cancelled: CancellationToken::new(),
            status: watch::channel(None).0,
        })
    }

    /// Note what the server says of its task for this call now.
    pub(crate) fn set_status(&self, message: Option<String>) {
        self.status.send_if_modified(|status| {
            let changed = *status != message;
            *status = message;
            changed
        });
    }

    /// What the server says of its task for this call, each time it says something new.
    pub(crate) fn status(&self) -> watch::Receiver<Option<String>> {
        self.status.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the client declared, when known.
    pub(crate) fn capabilities(&self) -> Option<&ClientCapabilities> {
        self.capabilities.as_ref()
    }

    /// Ask the client `request` (under the key the server named, if any) and wait for its
    /// answer; refused at once when the client lacks the capability it needs.
    ///
    /// # Errors
    ///
    /// `-32021` for a capability the client did not declare, else why no answer came.
    pub(crate) async fn ask(
        &self,
        kind: Kind,
        named: Option<&str>,
        request: InputRequest,
    ) -> Result<Value, McpError> {
        if let Some(capabilities) = &self.capabilities
            && !kind.declared(capabilities)
        {
            self.lock().missing.insert(kind.capability(), Value::Object(serde_json::Map::new()));
            let required = serde_json::from_value(serde_json::json!({ kind.capability(): {} }))
                .unwrap_or_default();
            return Err(McpError::missing_required_client_capability(required));
        }
        let (receiver, _unwait) = {
            let mut state = self.lock();
            state.serial += 1;
            let serial = state.serial;
            let named = named.filter(|key| !key.is_empty() && key.len() <= MAX_KEY);
            let mut key = named.map_or_else(
                || format!("{}-{serial}", kind.capability()),
                std::borrow::ToOwned::to_owned,
            );
            if state.waiting.contains_key(&key) {
                key = format!("{key}-{serial}");
            }
            if let Some(answer) = state.offered.remove(&key)
                && kind.problem(&answer).is_none()
            {
                return Ok(answer);
            }
            if state.waiting.len() >= MAX_WAITING {
                return Err(McpError::invalid_request(
                    format!("at most {MAX_WAITING} requests of one call may wait for the client"),
                    None,
                ));
            }
            let (answer, receiver) = oneshot::channel();
            state.waiting.insert(key.clone(), Waiting { serial, kind, request, answer });
            (receiver, Unwait { exchange: self, key, serial })
        };
        self.arrivals.send_modify(|count| *count += 1);
        tokio::select! {
            answer = receiver => answer.map_err(|_| {
                McpError::invalid_request("the client's call ended before it answered", None)
            }),
            () = self.cancelled.cancelled() => Err(McpError::invalid_request(
                "the client's call ended before it answered",
                None,
            )),
        }
    }

    /// The requests waiting for the client, once there are any: requests arriving together
    /// (within `GATHER` of one another) are asked together.
    pub(crate) async fn requested(&self) -> InputRequests {
        self.requested_beyond(&mut HashSet::new(), false).await
    }

    /// The requests waiting that are not in `seen` (which they join), once there are any, as
    /// `requested` gathers them: for a task, whose requests are asked one by one.
    pub(crate) async fn newly_requested(&self, seen: &mut HashSet<String>) -> InputRequests {
        self.requested_beyond(seen, true).await
    }

    async fn requested_beyond(&self, seen: &mut HashSet<String>, remember: bool) -> InputRequests {
        let mut arrivals = self.arrivals.subscribe();
        loop {
            arrivals.borrow_and_update();
            if self.lock().waiting.keys().any(|key| !seen.contains(key)) {
                break;
            }
            if arrivals.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        let deadline = tokio::time::Instant::now() + GATHER_AT_MOST;
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(GATHER, arrivals.changed()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        let state = self.lock();
        let requests: InputRequests = state
            .waiting
            .iter()
            .filter(|(key, _)| !seen.contains(*key))
            .map(|(key, waiting)| (key.clone(), waiting.request.clone()))
            .collect();
        if remember {
            seen.extend(requests.keys().cloned());
        }
        requests
    }

    /// Hand the client's `responses` to the requests waiting under their keys; the others are
    /// kept for a request still to come under that key.
    ///
    /// # Errors
    ///
    /// `-32602` when an answer is not of the kind its request asked for (nothing is handed
    /// over then).
    pub(crate) fn answer(&self, responses: InputResponses) -> Result<(), McpError> {
        let mut state = self.lock();
        for (key, answer) in &responses {
            if let Some(waiting) = state.waiting.get(key)
                && let Some(problem) = waiting.kind.problem(answer)
            {
                return Err(McpError::invalid_params(
                    format!("inputResponses.{key}: {problem}"),
                    None,
                ));
            }
        }
        state.offered.clear();
        for (key, answer) in responses {
            match state.waiting.remove(&key) {
                Some(waiting) => {
                    let _ = waiting.answer.send(answer);
                }
                None if state.offered.len() < MAX_WAITING => {
                    state.offered.insert(key, answer);
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The capabilities the server asked for that the client had not declared, if any.
    pub(crate) fn missing(&self) -> Option<ClientCapabilities> {
        let state = self.lock();
        if state.missing.is_empty() {
            return None;
        }
        let required: serde_json::Map<String, Value> =
            state.missing.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect();
        serde_json::from_value(Value::Object(required)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elicitation(message: &str) -> InputRequest {
        serde_json::from_value(serde_json::json!({
            "method": "elicitation/create",
            "params": {"message": message, "requestedSchema": {"type": "object", "properties": {}}},
        }))
        .unwrap()
    }

    fn accepted() -> Value {
        serde_json::json!({"action": "accept", "content": {"name": "Alice"}})
    }

    #[tokio::test]
    async fn a_request_waits_under_its_named_key_until_the_client_answers_it() {
        let exchange = Exchange::new(None, InputResponses::new());
        let asking = {
            let exchange = exchange.clone();
            tokio::spawn(async move {
                exchange.ask(Kind::Elicitation, Some("user_name"), elicitation("name?")).await
            })
        };
        let requested = exchange.requested().await;
        assert_eq!(requested.keys().collect::<Vec<_>>(), ["user_name"]);
        exchange.answer(InputResponses::from([("user_name".to_owned(), accepted())])).unwrap();
        assert_eq!(asking.await.unwrap().unwrap(), accepted());
    }

    #[tokio::test]
    async fn an_answer_given_ahead_answers_the_request_without_a_round() {
        let offered = InputResponses::from([("user_name".to_owned(), accepted())]);
        let exchange = Exchange::new(None, offered);
        let answer = exchange.ask(Kind::Elicitation, Some("user_name"), elicitation("name?")).await;
        assert_eq!(answer.unwrap(), accepted());
    }

    #[tokio::test]
    async fn an_answer_of_the_wrong_kind_is_refused_and_the_request_keeps_waiting() {
        let exchange = Exchange::new(None, InputResponses::new());
        let asking = {
            let exchange = exchange.clone();
            tokio::spawn(
                async move { exchange.ask(Kind::Elicitation, None, elicitation("?")).await },
            )
        };
        let key = exchange.requested().await.into_keys().next().unwrap();
        assert_eq!(key, "elicitation-1");
        let wrong = InputResponses::from([(key.clone(), Value::from(12345))]);
        assert_eq!(exchange.answer(wrong).unwrap_err().code.0, -32602);
        assert_eq!(exchange.requested().await.len(), 1);
        exchange.answer(InputResponses::from([(key, accepted())])).unwrap();
        assert!(asking.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_request_for_an_undeclared_capability_is_refused_and_remembered() {
        let declared: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {}})).unwrap();
        let exchange = Exchange::new(Some(declared), InputResponses::new());
        let roots: InputRequest =
            serde_json::from_value(serde_json::json!({"method": "roots/list"})).unwrap();
        let refused = exchange.ask(Kind::Roots, None, roots).await.unwrap_err();
        assert_eq!(refused.code.0, -32021);
        let missing = serde_json::to_value(exchange.missing().unwrap()).unwrap();
        assert_eq!(missing, serde_json::json!({"roots": {}}));
    }
}
