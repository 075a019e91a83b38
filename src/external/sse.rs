//! The older HTTP+SSE transport (MCP 2024-11-05), which many deployed servers still speak: a GET
//! opens an event stream whose first `endpoint` event names the URL to POST messages to; the
//! server's messages arrive as `message` events on the stream.

use std::time::Duration;

use futures::StreamExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub(crate) struct SseTransport {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
}

impl SseTransport {
    /// Open the event stream at `url` and wait for its `endpoint` event.
    pub(crate) async fn connect(
        url: &str,
        headers: &[(String, SecretString)],
        bearer: Option<&SecretString>,
        timeout: Duration,
        max_event_bytes: usize,
    ) -> Result<SseTransport, String> {
        let mut header_map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::try_from(name.as_str())
                .map_err(|_| format!("invalid header name `{name}`"))?;
            let value = reqwest::header::HeaderValue::try_from(value.expose_secret())
                .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
            header_map.insert(name, value);
        }
        if let Some(token) = bearer {
            let value =
                reqwest::header::HeaderValue::try_from(format!("Bearer {}", token.expose_secret()))
                    .map_err(|_| "the bearer token is not a valid header value".to_owned())?;
            header_map.insert(reqwest::header::AUTHORIZATION, value);
        }
        let base = reqwest::Url::parse(url).map_err(|error| format!("invalid url: {error}"))?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
        let response = tokio::time::timeout(
            timeout,
            client
                .get(base.clone())
                .headers(header_map.clone())
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| format!("no answer to GET within {}s", timeout.as_secs()))?
        .map_err(|error| format!("cannot connect: {}", without_url(&error)))?;
        let status = response.status();
        if !status.is_success() {
            let hint = if status.as_u16() == 401 || status.as_u16() == 403 {
                " (check the server's credentials)"
            } else {
                ""
            };
            return Err(format!("GET of the event stream answered HTTP {status}{hint}"));
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        let endpoint = tokio::time::timeout(timeout, async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|error| format!("the event stream failed: {error}"))?;
                if event.event.as_deref() == Some("endpoint") {
                    let data = event.data.unwrap_or_default();
                    return base
                        .join(data.trim())
                        .map_err(|error| format!("the endpoint event is not a URL: {error}"));
                }
            }
            Err("the event stream ended before its endpoint event".to_owned())
        })
        .await
        .map_err(|_| format!("no endpoint event within {}s", timeout.as_secs()))??;
        if endpoint.origin() != base.origin() {
            return Err(
                "the endpoint event points to another origin; refusing to send messages there"
                    .to_owned(),
            );
        }
        let (sender, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                if data.len() > max_event_bytes.saturating_add(64 * 1024) {
                    tracing::warn!(bytes = data.len(), "dropping an oversized SSE message");
                    continue;
                }
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(message) => {
                        if sender.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::debug!("ignoring an SSE message that is not JSON-RPC: {error}")
                    }
                }
            }
        });
        Ok(SseTransport { client, endpoint, headers: header_map, incoming, reader })
    }
}

/// reqwest's errors name the URL, which may carry a token in its query.
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text.chars().take(300).collect()
}

impl rmcp::transport::Transport<RoleClient> for SseTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request =
            self.client.post(self.endpoint.clone()).headers(self.headers.clone()).json(&item);
        async move {
            let response =
                request.send().await.map_err(|error| std::io::Error::other(without_url(&error)))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "POST of a message answered HTTP {}",
                    response.status()
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
