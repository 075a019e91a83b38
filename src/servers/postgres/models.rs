//! The model side of the postgres server: which provider and model a call uses (the caller's
//! choice, else the tool's default from `orca.yaml`, else another configured provider the tool
//! supports), asking it, and turning provider failures into the error taxonomy.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::config::{LlmConfig, LlmTool, provider_names};
use crate::context::{ContextStore, ContextWatch};
use crate::llm::{self, ClientModel, Completion, Llm, Provider};
use crate::tool::{ErrorCode, LlmUsage, ToolError};

/// The providers, their configuration and the context file, shared by the LLM-backed tools.
#[derive(Debug, Clone)]
pub(crate) struct Intelligence {
    pub(crate) llm: Llm,
    pub(crate) config: Arc<LlmConfig>,
    pub(crate) context: ContextStore,
}

/// The provider and model one call uses.
#[derive(Debug, Clone)]
pub(crate) struct ModelChoice {
    pub(crate) provider: Provider,
    /// For the client: the model name sent as its hint.
    pub(crate) model: String,
    /// The calling client, when the provider is [`Provider::Client`].
    pub(crate) client: Option<Arc<dyn ClientModel>>,
}

/// Whether `client` may be asked: it declared sampling, or (`unknown_counts`) it may have.
fn offers(client: Option<&Arc<dyn ClientModel>>, unknown_counts: bool) -> bool {
    client.is_some_and(|client| client.offers_sampling().unwrap_or(unknown_counts))
}

/// Token counts summed over the requests of one call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: Option<i64>,
    pub(crate) completion_tokens: Option<i64>,
    /// Answers received (one per model turn).
    pub(crate) requests: u32,
    /// HTTP attempts made for them (more than `requests` when a 429 or 5xx was retried).
    pub(crate) http_attempts: u32,
    /// The model as the provider names it in its answer (often with a version suffix).
    pub(crate) reported_model: Option<String>,
    /// Time spent waiting for the provider's answers.
    pub(crate) latency: std::time::Duration,
}

impl Usage {
    pub(crate) fn add(&mut self, completion: &Completion) {
        let sum = |total: Option<i64>, more: Option<i64>| match (total, more) {
            (None, None) => None,
            (total, more) => Some(total.unwrap_or(0) + more.unwrap_or(0)),
        };
        self.prompt_tokens = sum(self.prompt_tokens, completion.prompt_tokens);
        self.completion_tokens = sum(self.completion_tokens, completion.completion_tokens);
        self.requests += 1;
        self.http_attempts += completion.http_attempts;
        self.reported_model = Some(completion.model.clone());
        self.latency += completion.latency;
    }

    /// The execution record's LLM columns: for the client, the model it reported.
    pub(crate) fn record(&self, choice: &ModelChoice) -> LlmUsage {
        let model = match (&self.reported_model, choice.provider) {
            (Some(reported), Provider::Client) => reported.clone(),
            _ => choice.model.clone(),
        };
        LlmUsage {
            provider: choice.provider.as_str().to_owned(),
            model,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            latency_ms: Some(i32::try_from(self.latency.as_millis()).unwrap_or(i32::MAX)),
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "requests": self.requests,
            "http_attempts": self.http_attempts,
            "reported_model": self.reported_model,
            "latency_ms": u64::try_from(self.latency.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

impl Intelligence {
    /// The clients of the configured providers and the context file, watched for changes (the
    /// watch lives as long as the returned guard; without it the file is read once).
    pub(crate) fn start(config: &LlmConfig) -> (Intelligence, Option<ContextWatch>) {
        let context = ContextStore::open(config.context_file.clone());
        let watch = match context.watch() {
            Ok(watch) => Some(watch),
            Err(error) => {
                tracing::warn!(
                    "cannot watch the context file {} for changes ({error}); it is read once",
                    config.context_file.display()
                );
                None
            }
        };
        let intelligence = Intelligence {
            llm: Llm::new(config.endpoints.clone(), config.client.clone()),
            config: Arc::new(config.clone()),
            context,
        };
        (intelligence, watch)
    }

    /// The provider and model for a call of `tool` that needs a model.
    ///
    /// # Errors
    ///
    /// `INVALID_INPUT` for an unknown or unsupported provider (listing the supported ones), a
    /// provider without a key (naming the variable to set), or no configured provider at all.
    pub(crate) fn choose(
        &self,
        tool: LlmTool,
        provider: Option<&str>,
        model: Option<&str>,
        client: Option<&Arc<dyn ClientModel>>,
    ) -> Result<ModelChoice, ToolError> {
        match self.choose_optional(tool, provider, model, client)? {
            Ok(choice) => Ok(choice),
            Err(reason) => Err(ToolError::invalid_input(reason).with_hint(NO_PROVIDER_HINT)),
        }
    }

    /// Like [`Intelligence::choose`], but having no configured provider at all (when the caller
    /// named none) is not an error: it is `Ok(Err(reason))`, for tools whose model is optional.
    ///
    /// # Errors
    ///
    /// `INVALID_INPUT` as for [`Intelligence::choose`] when the caller named a provider.
    pub(crate) fn choose_optional(
        &self,
        tool: LlmTool,
        provider: Option<&str>,
        model: Option<&str>,
        client: Option<&Arc<dyn ClientModel>>,
    ) -> Result<Result<ModelChoice, String>, ToolError> {
        if self.config.disabled.contains(&tool) {
            return Ok(Err(format!(
                "{}'s model calls are turned off (llm.tools.{}.enabled: false in orca.yaml)",
                tool.as_str(),
                tool.as_str()
            )));
        }
        let supported = tool.supported();
        let model = model.map(str::trim).filter(|model| !model.is_empty());
        let model = model.map(|model| self.config.aliases.get(model).map_or(model, String::as_str));
        let provider = provider.map(str::trim).filter(|provider| !provider.is_empty());
        let provider = match provider {
            Some(name) => {
                let parsed = Provider::parse(name).filter(|parsed| supported.contains(parsed));
                let Some(parsed) = parsed else {
                    return Err(ToolError::invalid_input(format!(
                        "llm_provider `{}` is not supported by {}; supported providers: {}",
                        name.chars().take(40).collect::<String>(),
                        tool.as_str(),
                        provider_names(supported)
                    )));
                };
                if parsed == Provider::Client {
                    // Named by the caller: a client whose capabilities orca cannot see is asked.
                    if !offers(client, true) {
                        return Err(no_client_model(tool));
                    }
                    return Ok(Ok(self.client_choice(tool, model, client)));
                }
                if !self.llm.is_configured(parsed) {
                    return Err(ToolError::invalid_input(format!(
                        "the {parsed} provider is not configured: set {} in orca's environment",
                        parsed.key_variables()
                    ))
                    .with_hint(self.configured_hint(tool)));
                }
                parsed
            }
            None => {
                let default = &self.config.tools[&tool];
                let inferred = model.and_then(provider_of_model);
                if let Some(inferred) = inferred.filter(|p| !supported.contains(p)) {
                    return Err(ToolError::invalid_input(format!(
                        "llm_model looks like a {inferred} model, and {} does not support {inferred}; supported providers: {}",
                        tool.as_str(),
                        provider_names(supported)
                    )));
                }
                // The client when it is the tool's default: named in orca.yaml, it is asked even
                // when its capabilities are unknown.
                if inferred.is_none() && default.provider == Provider::Client {
                    if offers(client, true) {
                        return Ok(Ok(self.client_choice(tool, model, client)));
                    }
                    if !supported.iter().any(|candidate| self.llm.is_configured(*candidate)) {
                        return Ok(Err(no_client_reason(tool)));
                    }
                }
                let preferred = inferred.unwrap_or(default.provider);
                let candidates = std::iter::once(preferred).chain(supported.iter().copied());
                let configured = candidates
                    .filter(|candidate| inferred.is_none() || Some(*candidate) == inferred)
                    .find(|candidate| self.llm.is_configured(*candidate));
                match configured {
                    Some(provider) => provider,
                    None if inferred.is_some() => {
                        let provider = preferred;
                        return Err(ToolError::invalid_input(format!(
                            "the model looks like a {provider} model, and the {provider} provider is not configured: set {} in orca's environment",
                            provider.key_variables()
                        )));
                    }
                    // No key at all, and a client that declared sampling: its model.
                    None if offers(client, false) && supported.contains(&Provider::Client) => {
                        return Ok(Ok(self.client_choice(tool, model, client)));
                    }
                    None => {
                        let variables: Vec<&str> = supported
                            .iter()
                            .filter(|provider| **provider != Provider::Client)
                            .map(|provider| provider.key_variables())
                            .collect();
                        return Ok(Err(format!(
                            "no LLM provider is configured for {}: set {}",
                            tool.as_str(),
                            variables.join(" or ")
                        )));
                    }
                }
            }
        };
        let model = match model {
            Some(model) => model.to_owned(),
            None => {
                let default = &self.config.tools[&tool];
                if default.provider == provider {
                    default.model.clone()
                } else {
                    self.config.provider_models[&provider].clone()
                }
            }
        };
        Ok(Ok(ModelChoice { provider, model, client: None }))
    }

    /// The client as the call's model; the model named (or configured) is its hint.
    fn client_choice(
        &self,
        tool: LlmTool,
        model: Option<&str>,
        client: Option<&Arc<dyn ClientModel>>,
    ) -> ModelChoice {
        let default = &self.config.tools[&tool];
        let model = match model {
            Some(model) => model.to_owned(),
            None if default.provider == Provider::Client => default.model.clone(),
            None => self
                .config
                .provider_models
                .get(&Provider::Client)
                .cloned()
                .unwrap_or_else(|| default.model.clone()),
        };
        ModelChoice { provider: Provider::Client, model, client: client.cloned() }
    }

    fn configured_hint(&self, tool: LlmTool) -> String {
        let configured: Vec<Provider> = tool
            .supported()
            .iter()
            .copied()
            .filter(|provider| self.llm.is_configured(*provider))
            .collect();
        if configured.is_empty() {
            "no provider is configured; set a provider's key in orca's environment".to_owned()
        } else {
            format!("configured providers for {}: {}", tool.as_str(), provider_names(&configured))
        }
    }

    /// Ask the chosen model.
    ///
    /// # Errors
    ///
    /// The provider's failure in the taxonomy (see [`llm_error`]).
    pub(crate) async fn ask(
        &self,
        choice: &ModelChoice,
        system: String,
        messages: Vec<llm::Message>,
        temperature: f32,
        max_tokens: u32,
    ) -> Result<Completion, ToolError> {
        let request =
            llm::Request { model: choice.model.clone(), system, messages, temperature, max_tokens };
        let client = choice.client.as_deref();
        self.llm
            .complete_through(choice.provider, &request, client)
            .await
            .map_err(|error| llm_error(&error))
    }

    /// Ask for something the call can do without (the schema analysis, a written summary):
    /// the whole exchange, retries included, gets one `llm.timeout_ms`, so a slow provider
    /// costs the call at most that.
    ///
    /// # Errors
    ///
    /// As [`Intelligence::ask`], and `TIMEOUT` when the time is up.
    pub(crate) async fn ask_optional(
        &self,
        choice: &ModelChoice,
        system: String,
        messages: Vec<llm::Message>,
        temperature: f32,
        max_tokens: u32,
    ) -> Result<Completion, ToolError> {
        let limit = self.config.client.timeout;
        let asked = self.ask(choice, system, messages, temperature, max_tokens);
        match tokio::time::timeout(limit, asked).await {
            Ok(outcome) => outcome,
            Err(_) => {
                Err(llm_error(&llm::Error::Timeout { provider: choice.provider, after: limit }))
            }
        }
    }
}

const NO_PROVIDER_HINT: &str = "set the key of a provider in orca's environment (or OPENAI_BASE_URL for a local OpenAI-compatible server) and restart orca, or call from an MCP client that offers its model (sampling)";

/// Why the client's model cannot answer `tool`, and the keys that would do instead.
fn no_client_reason(tool: LlmTool) -> String {
    format!(
        "the client provider needs an MCP client that offers its model (sampling), and this one does not; or set {} in orca's environment for {}",
        Provider::Client.key_variables(),
        tool.as_str()
    )
}

fn no_client_model(tool: LlmTool) -> ToolError {
    ToolError::invalid_input(no_client_reason(tool)).with_hint(NO_PROVIDER_HINT)
}

/// The provider a model name plainly belongs to, if any.
fn provider_of_model(model: &str) -> Option<Provider> {
    let model = model.to_ascii_lowercase();
    let model = model.strip_prefix("models/").unwrap_or(&model);
    if model.starts_with("claude") {
        Some(Provider::Anthropic)
    } else if model.starts_with("gemini") {
        Some(Provider::Google)
    } else if model.starts_with("gpt-")
        || model.starts_with("chatgpt")
        || model.starts_with("o1")
        || model.starts_with("o3")
        || model.starts_with("o4")
    {
        Some(Provider::OpenAi)
    } else {
        None
    }
}

/// A provider failure as a tool error. The provider's own message is kept (it names the model
/// or the limit); keys and URLs never appear in it.
pub(crate) fn llm_error(error: &llm::Error) -> ToolError {
    let mut tool_error = provider_error(error);
    // Failure rows tell a model's failures apart from the database's.
    tool_error.error_type =
        Some(if matches!(error, llm::Error::Timeout { .. }) { "llm_timeout" } else { "llm_error" });
    tool_error
}

fn provider_error(error: &llm::Error) -> ToolError {
    let message = error.to_string();
    match error {
        llm::Error::MissingKey { provider } => ToolError::invalid_input(message)
            .with_hint(format!("set {} in orca's environment", provider.key_variables())),
        llm::Error::Unauthorized { provider, .. } => {
            ToolError::upstream_unavailable(message).not_retryable().with_hint(format!(
                "check the key in {} (orca's environment)",
                provider.key_variables()
            ))
        }
        // A 429 that waiting does not cure: the account's quota or spend limit.
        llm::Error::Rejected { status: 429, .. } => ToolError::new(ErrorCode::RateLimited, message)
            .not_retryable()
            .with_hint("the provider's quota or spend limit for orca's key is used up"),
        llm::Error::Rejected { .. } => ToolError::invalid_input(message).with_hint(
            "the provider did not accept the request: check llm_model, and whether the prompt fits the model",
        ),
        llm::Error::RateLimited { retry_after, .. } => {
            let mut tool_error = ToolError::new(ErrorCode::RateLimited, message);
            if let Some(after) = retry_after {
                tool_error = tool_error
                    .with_hint(format!("the provider asks to wait {} s", after.as_secs().max(1)));
            }
            tool_error
        }
        llm::Error::Unavailable { .. } => ToolError::upstream_unavailable(message),
        llm::Error::Timeout { .. } => ToolError::new(ErrorCode::Timeout, message).with_hint(
            "the model took longer than llm.timeout_ms; try again, a smaller model, or a longer timeout",
        ),
        llm::Error::Malformed { .. } => ToolError::upstream_unavailable(message).not_retryable(),
        llm::Error::ClientDeclined { .. } | llm::Error::ClientUnavailable { .. } => {
            ToolError::invalid_input(format!(
                "{message}; or set {} in orca's environment",
                Provider::Client.key_variables()
            ))
            .not_retryable()
            .with_hint(NO_PROVIDER_HINT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_point_to_their_provider() {
        let cases = [
            ("claude-sonnet-4-5", Some(Provider::Anthropic)),
            ("gpt-4o-mini", Some(Provider::OpenAi)),
            ("o3-mini", Some(Provider::OpenAi)),
            ("models/gemini-2.5-pro", Some(Provider::Google)),
            ("llama3.1:8b", None),
        ];
        for (model, expected) in cases {
            assert_eq!(provider_of_model(model), expected, "{model}");
        }
    }
}
