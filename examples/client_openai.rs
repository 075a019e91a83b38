//! The client SDK in a few lines: connect to an MCP server over stdio, convert its tools for
//! OpenAI, ask a model once (any OpenAI-compatible server: `OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `OPENAI_MODEL`), and run the tool call from the model's answer through
//! the executor, which maps the cleaned name back and validates the arguments first.
//!
//! `cargo run --example client_openai -- "QUESTION" COMMAND [ARGS...]`, for example
//! `cargo run --example client_openai -- "Echo hello" npx -y @modelcontextprotocol/server-everything`.

#![allow(clippy::print_stdout, reason = "the example shows its results")]

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, ChatCompletionRequestMessage, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, CreateChatCompletionRequest,
};
use orca::client::{Executor, McpClient, ToolFilter};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [question, command, server_args @ ..] = args.as_slice() else {
        anyhow::bail!("usage: client_openai QUESTION COMMAND [ARGS...]");
    };

    // One session with the server; its tools, filtered and converted for OpenAI.
    let client = McpClient::stdio(command, server_args).await?;
    let filter = ToolFilter::new().exclude(["*delete*"]);
    let converted = client.as_openai_tools(&filter).await?;
    for tool in &converted.set_aside {
        println!("not offered: {} ({})", tool.name, tool.reason);
    }
    println!("offering {} tools", converted.tools.len());

    // One request to the model with the tools.
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let key = std::env::var("OPENAI_API_KEY").unwrap_or_default();
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4.1-mini".into());
    let openai = Client::with_config(OpenAIConfig::new().with_api_base(base).with_api_key(key));
    let request = CreateChatCompletionRequest {
        model,
        messages: vec![ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(question.clone()),
            name: None,
        })],
        tools: Some(converted.openai()),
        ..CreateChatCompletionRequest::default()
    };
    let response = openai.chat().create(request).await?;
    let Some(choice) = response.choices.into_iter().next() else {
        anyhow::bail!("the model answered no choices");
    };

    // The tool calls of the answer, run through MCP.
    let executor = Executor::new(client.clone(), &converted).await?;
    let calls = choice.message.tool_calls.unwrap_or_default();
    if calls.is_empty() {
        println!(
            "the model answered without tools: {}",
            choice.message.content.unwrap_or_default()
        );
    }
    for call in calls {
        let ChatCompletionMessageToolCalls::Function(call) = call else { continue };
        let original = executor.names().original(&call.function.name).unwrap_or("?");
        let result = executor.execute(&call.function.name, &call.function.arguments).await?;
        println!("{} (`{original}` on the server) -> {result}", call.function.name);
    }
    client.close().await;
    Ok(())
}
