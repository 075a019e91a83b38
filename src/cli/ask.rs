//! `orca ask`: an agent loop on the OpenAI Chat Completions API (any compatible server through
//! `OPENAI_BASE_URL`) over an MCP server's tools. The tools go out converted by the client SDK;
//! each call the model asks for runs through the SDK's executor (cleaned names mapped back,
//! arguments validated against the original schema) and its result goes back as a `tool`
//! message, until the model answers without tool calls or the step limit is reached. A call
//! that carries a confirmation token (a write confirmed after its dry run) runs only when the
//! person at the terminal agrees; without a terminal it is refused.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent, ChatCompletionTools,
    CreateChatCompletionRequest,
};
use clap::Args;
use serde_json::{Value, json};

use super::output::{print, print_error};
use super::tools::{Filters, Target, connect};
use crate::client::{Executor, McpError, Provider};
use crate::config::Env;

const OPENAI_BASE: &str = "https://api.openai.com/v1";

const SYSTEM_PROMPT: &str = "You answer the user's question. Use the tools when they help; \
    call them with arguments that match their schemas. When a tool result is an error, read it \
    and fix the call. Answer in plain text once you know the answer.";

#[derive(Debug, Args)]
pub(super) struct AskArgs {
    /// The question
    #[arg(value_name = "QUESTION")]
    question: String,

    #[command(flatten)]
    target: Target,

    /// The API that asks the model: OpenAI Chat Completions (any compatible server), or
    /// Anthropic's Messages API through orca's own provider settings (ANTHROPIC_API_KEY,
    /// ANTHROPIC_BASE_URL, the `llm:` section of orca.yaml)
    #[arg(long, value_enum, default_value = "openai")]
    provider: AskProvider,

    /// The model to ask [default: gpt-4.1-mini for openai; for anthropic, orca's configured
    /// Anthropic model]
    #[arg(long, value_name = "MODEL", env = "ORCA_ASK_MODEL")]
    model: Option<String>,

    /// Requests to the model before giving up
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    max_steps: u32,

    #[command(flatten)]
    filters: Filters,

    /// Write one JSON line per step (request, tool calls, results, usage) to this file
    #[arg(long, value_name = "FILE")]
    transcript: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AskProvider {
    Openai,
    Anthropic,
}

/// The model's API, ready to ask.
enum Model {
    OpenAi { client: Client<OpenAIConfig>, model: String },
    Anthropic { llm: crate::llm::Llm, model: String },
}

/// The model API for `provider`, from the environment (OpenAI) or orca's configuration
/// (Anthropic).
fn model_for(args: &AskArgs, config_path: Option<&Path>, env: &Env) -> anyhow::Result<Model> {
    match args.provider {
        AskProvider::Openai => {
            let base =
                env.get("OPENAI_BASE_URL").unwrap_or(OPENAI_BASE).trim_end_matches('/').to_owned();
            let key = env.get("OPENAI_API_KEY").unwrap_or_default().to_owned();
            anyhow::ensure!(
                !key.is_empty() || base != OPENAI_BASE,
                "OPENAI_API_KEY is not set (or set OPENAI_BASE_URL to a compatible server that needs no key)"
            );
            let config = OpenAIConfig::new()
                .with_api_base(&base)
                .with_api_key(&key)
                .with_org_id("")
                .with_project_id("");
            let model = args.model.clone().unwrap_or_else(|| "gpt-4.1-mini".to_owned());
            Ok(Model::OpenAi { client: Client::with_config(config), model })
        }
        AskProvider::Anthropic => {
            let config = crate::config::load(config_path, env)?;
            let provider = crate::llm::Provider::Anthropic;
            let llm = crate::llm::Llm::new(config.llm.endpoints.clone(), config.llm.client.clone());
            anyhow::ensure!(llm.is_configured(provider), "ANTHROPIC_API_KEY is not set");
            let model = args
                .model
                .clone()
                .or_else(|| config.llm.provider_models.get(&provider).cloned())
                .unwrap_or_else(|| "claude-sonnet-4-5".to_owned());
            Ok(Model::Anthropic { llm, model })
        }
    }
}

pub(super) async fn ask(
    args: AskArgs,
    config_path: Option<&Path>,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(!args.question.trim().is_empty(), "the question is empty");
    let model = model_for(&args, config_path, env)?;
    let mut transcript = match &args.transcript {
        Some(path) => Some(
            std::fs::File::create(path)
                .with_context(|| format!("cannot write the transcript {}", path.display()))?,
        ),
        None => None,
    };
    let connection = connect(&args.target, config_path, env).await?;
    let outcome = async {
        let provider = match model {
            Model::OpenAi { .. } => Provider::OpenAi,
            Model::Anthropic { .. } => Provider::Anthropic,
        };
        let converted = connection.client.convert(provider, &args.filters.filter()).await?;
        let executor = Executor::new(connection.client.clone(), &converted).await?;
        let mut agent =
            Agent { executor, dry_runs: HashMap::new(), transcript: transcript.as_mut() };
        match &model {
            Model::OpenAi { client, model } => {
                let tools = converted.openai();
                agent.run_openai(client, model, tools, &args.question, args.max_steps).await
            }
            Model::Anthropic { llm, model } => {
                let tools = converted.to_json();
                agent.run_anthropic(llm, model, tools, &args.question, args.max_steps).await
            }
        }
    }
    .await;
    connection.close().await?;
    match outcome? {
        Some(answer) => {
            print(&answer);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            print_error(&format!(
                "error: no answer after {} steps: the model kept calling tools; raise --max-steps or narrow the question",
                args.max_steps
            ));
            Ok(ExitCode::from(1))
        }
    }
}

struct Agent<'a> {
    executor: Executor,
    /// Confirmation token -> the dry run that minted it, to show a person before a write.
    dry_runs: HashMap<String, Value>,
    transcript: Option<&'a mut std::fs::File>,
}

impl Agent<'_> {
    /// The answer, or `None` when `max_steps` requests brought none.
    async fn run_openai(
        &mut self,
        client: &Client<OpenAIConfig>,
        model: &str,
        tools: Vec<ChatCompletionTools>,
        question: &str,
        max_steps: u32,
    ) -> anyhow::Result<Option<String>> {
        let mut messages = vec![
            ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(SYSTEM_PROMPT.to_owned()),
                name: None,
            }),
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(question.to_owned()),
                name: None,
            }),
        ];
        for step in 1..=max_steps {
            let request = CreateChatCompletionRequest {
                model: model.to_owned(),
                messages: messages.clone(),
                tools: (!tools.is_empty()).then(|| tools.clone()),
                ..CreateChatCompletionRequest::default()
            };
            let request_json = serde_json::to_value(&request).unwrap_or(Value::Null);
            let response = client
                .chat()
                .create(request)
                .await
                .map_err(|error| anyhow::anyhow!("the model request failed: {error}"))?;
            let usage = response.usage.as_ref().map(|usage| {
                json!({
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total_tokens,
                })
            });
            let message = response
                .choices
                .into_iter()
                .next()
                .context("the model's answer has no choices")?
                .message;
            let calls: Vec<(String, String, String)> = message
                .tool_calls
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|call| match call {
                    ChatCompletionMessageToolCalls::Function(call) => {
                        Some((call.id, call.function.name, call.function.arguments))
                    }
                    ChatCompletionMessageToolCalls::Custom(_) => None,
                })
                .collect();
            if calls.is_empty() {
                let answer = message.content.unwrap_or_default();
                self.record(json!({
                    "step": step, "request": request_json, "tool_calls": [], "results": [],
                    "usage": usage, "answer": answer,
                }))?;
                return Ok(Some(answer));
            }
            messages.push(ChatCompletionRequestMessage::Assistant(
                ChatCompletionRequestAssistantMessage {
                    content: message
                        .content
                        .map(ChatCompletionRequestAssistantMessageContent::Text),
                    tool_calls: message.tool_calls,
                    ..ChatCompletionRequestAssistantMessage::default()
                },
            ));
            let mut recorded_calls = Vec::new();
            let mut results = Vec::new();
            for (id, name, arguments) in calls {
                let result = self.execute(&name, &arguments).await?;
                recorded_calls.push(json!({
                    "id": id,
                    "name": name,
                    "tool": self.executor.names().original(&name),
                    "arguments": arguments,
                }));
                results.push(json!({"tool_call_id": id, "result": result}));
                messages.push(ChatCompletionRequestMessage::Tool(
                    ChatCompletionRequestToolMessage {
                        content: ChatCompletionRequestToolMessageContent::Text(result.to_string()),
                        tool_call_id: id,
                    },
                ));
            }
            self.record(json!({
                "step": step, "request": request_json, "tool_calls": recorded_calls,
                "results": results, "usage": usage,
            }))?;
        }
        Ok(None)
    }

    /// The same loop on Anthropic's Messages API: `tool_use` blocks in the model's turn,
    /// `tool_result` blocks in the next user turn.
    async fn run_anthropic(
        &mut self,
        llm: &crate::llm::Llm,
        model: &str,
        tools: Value,
        question: &str,
        max_steps: u32,
    ) -> anyhow::Result<Option<String>> {
        let mut messages = vec![json!({"role": "user", "content": question})];
        for step in 1..=max_steps {
            let mut request = json!({
                "model": model,
                "max_tokens": 4096,
                "system": SYSTEM_PROMPT,
                "messages": messages,
            });
            if tools.as_array().is_some_and(|tools| !tools.is_empty()) {
                request["tools"] = tools.clone();
            }
            let answer = llm
                .anthropic_messages(&request)
                .await
                .map_err(|error| anyhow::anyhow!("the model request failed: {error}"))?;
            let usage = answer.get("usage").cloned();
            let content: Vec<Value> =
                answer.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
            let calls: Vec<(String, String, Value)> = content
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
                .map(|block| {
                    let text = |key: &str| {
                        block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
                    };
                    (text("id"), text("name"), block.get("input").cloned().unwrap_or(json!({})))
                })
                .collect();
            if calls.is_empty() {
                let answer: String = content
                    .iter()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|block| block.get("text").and_then(Value::as_str))
                    .collect();
                self.record(json!({
                    "step": step, "request": request, "tool_calls": [], "results": [],
                    "usage": usage, "answer": answer,
                }))?;
                return Ok(Some(answer));
            }
            messages.push(json!({"role": "assistant", "content": content}));
            let mut recorded_calls = Vec::new();
            let mut results = Vec::new();
            let mut blocks = Vec::new();
            for (id, name, input) in calls {
                let result = self.execute(&name, &input.to_string()).await?;
                recorded_calls.push(json!({
                    "id": id,
                    "name": name,
                    "tool": self.executor.names().original(&name),
                    "arguments": input,
                }));
                results.push(json!({"tool_call_id": id, "result": result}));
                let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": result.to_string()});
                if result.get("error").is_some() {
                    block["is_error"] = Value::Bool(true);
                }
                blocks.push(block);
            }
            messages.push(json!({"role": "user", "content": blocks}));
            self.record(json!({
                "step": step, "request": request, "tool_calls": recorded_calls,
                "results": results, "usage": usage,
            }))?;
        }
        Ok(None)
    }

    /// One tool call; a call that confirms a write needs the person at the terminal.
    async fn execute(&mut self, name: &str, arguments: &str) -> anyhow::Result<Value> {
        let parsed: Option<Value> = serde_json::from_str(arguments).ok();
        let token = parsed
            .as_ref()
            .and_then(|arguments| arguments.get("confirmation_token"))
            .and_then(Value::as_str)
            .filter(|token| !token.is_empty())
            .map(str::to_owned);
        if let Some(token) = token {
            let tool = self.executor.names().original(name).unwrap_or(name).to_owned();
            let dry_run = self.dry_runs.get(&token).cloned();
            if !confirm_with_person(&tool, dry_run.as_ref()).await? {
                return Ok(json!({
                    "error": "refused: this write needs the confirmation of the person running `orca ask`, who did not give it; do not retry it, tell the user what the write would do instead"
                }));
            }
        }
        let result = match self.executor.execute(name, arguments).await {
            Ok(result) => result,
            Err(error @ (McpError::Transport(_) | McpError::Timeout { .. })) => {
                let tool = self.executor.names().original(name).unwrap_or(name).to_owned();
                return Err(anyhow::anyhow!("calling `{tool}`: {error}"));
            }
            Err(error) => json!({"error": error.to_string()}),
        };
        if let Some(token) = result.get("confirmation_token").and_then(Value::as_str) {
            self.dry_runs.insert(token.to_owned(), result.clone());
        }
        Ok(result)
    }

    fn record(&mut self, line: Value) -> anyhow::Result<()> {
        if let Some(file) = self.transcript.as_mut() {
            writeln!(file, "{line}").context("cannot write the transcript")?;
        }
        Ok(())
    }
}

/// Show the dry run of a write and ask the person at the terminal; `false` without one.
async fn confirm_with_person(tool: &str, dry_run: Option<&Value>) -> anyhow::Result<bool> {
    use std::io::IsTerminal;
    let shown = dry_run.map_or_else(
        || "(no dry run of this write was seen in this session)".to_owned(),
        |dry_run| serde_json::to_string_pretty(dry_run).unwrap_or_default(),
    );
    print_error(&format!(
        "the model wants to run a confirmed write with `{tool}`; its dry run:\n{shown}"
    ));
    if !std::io::stdin().is_terminal() {
        print_error(
            "refused: there is no terminal to ask for confirmation (writes are never confirmed on their own)",
        );
        return Ok(false);
    }
    print_error("run this write? [y/N]");
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .context("cannot read the answer")?
    .context("cannot read the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}
