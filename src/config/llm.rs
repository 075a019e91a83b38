//! The `llm:` section of `orca.yaml` and the provider variables of the environment: which
//! provider and model each LLM-backed tool uses by default, which providers it supports, the
//! provider endpoints and keys, timeouts and retries, and where the context file is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::Env;
use crate::llm::{ClientSettings, Endpoint, Provider, default_base_url};

/// The tools that ask a model something. A closed list, like the providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum LlmTool {
    GenerateSql,
    GenerateSchema,
    FormatResults,
    ContextSuggest,
}

impl LlmTool {
    pub(crate) const ALL: [LlmTool; 4] = [
        LlmTool::GenerateSql,
        LlmTool::GenerateSchema,
        LlmTool::FormatResults,
        LlmTool::ContextSuggest,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LlmTool::GenerateSql => "generate_sql",
            LlmTool::GenerateSchema => "generate_schema",
            LlmTool::FormatResults => "format_results",
            LlmTool::ContextSuggest => "context_suggest",
        }
    }

    /// The specification's TOOL_LLM_DEFAULTS: which providers a tool accepts.
    pub(crate) fn supported(self) -> &'static [Provider] {
        match self {
            LlmTool::GenerateSql => {
                &[Provider::Anthropic, Provider::OpenAi, Provider::Google, Provider::Client]
            }
            LlmTool::ContextSuggest => &[Provider::Anthropic, Provider::OpenAi, Provider::Google],
            LlmTool::GenerateSchema => &[Provider::Anthropic, Provider::OpenAi, Provider::Client],
            LlmTool::FormatResults => &[Provider::OpenAi, Provider::Anthropic, Provider::Client],
        }
    }

    /// The default provider and model when `orca.yaml` names none (the specification's choice
    /// of provider; current model names, since the specification's older ones are retired).
    fn built_in_default(self) -> ToolModel {
        let (provider, model) = match self {
            LlmTool::GenerateSql | LlmTool::ContextSuggest => {
                (Provider::Anthropic, "claude-sonnet-4-5")
            }
            LlmTool::GenerateSchema => (Provider::Anthropic, "claude-haiku-4-5"),
            LlmTool::FormatResults => (Provider::OpenAi, "gpt-4o-mini"),
        };
        ToolModel { provider, model: model.to_owned() }
    }
}

/// A provider and one of its models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolModel {
    pub(crate) provider: Provider,
    pub(crate) model: String,
}

/// The validated `llm:` section.
#[derive(Debug, Clone)]
pub(crate) struct LlmConfig {
    /// One endpoint per provider, configured or not.
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) client: ClientSettings,
    /// Each tool's default provider and model.
    pub(crate) tools: BTreeMap<LlmTool, ToolModel>,
    /// Tools whose model calls are turned off (`llm.tools.<tool>.enabled: false`): nothing they
    /// see is sent to a provider.
    pub(crate) disabled: std::collections::BTreeSet<LlmTool>,
    /// The model used for a provider when a tool falls back to it.
    pub(crate) provider_models: BTreeMap<Provider, String>,
    /// Short names a caller may use for a model (`sonnet: claude-sonnet-4-5`).
    pub(crate) aliases: BTreeMap<String, String>,
    /// The context file (`ORCA_CONTEXT_FILE`, `llm.context_file`, else
    /// `context/supabase-sql-context.md` in the working directory when it exists, else in
    /// `ORCA_HOME`).
    pub(crate) context_file: PathBuf,
    /// How much of the context file a prompt may hold, in estimated tokens.
    pub(crate) context_budget_tokens: usize,
    /// How much of the schema a prompt may hold, in estimated tokens.
    pub(crate) schema_budget_tokens: usize,
}

impl LlmConfig {
    #[cfg(test)]
    fn endpoint(&self, provider: Provider) -> Option<&Endpoint> {
        self.endpoints.iter().find(|endpoint| endpoint.provider == provider)
    }
}

/// The context file's name, in `./context/` or `$ORCA_HOME/context/`.
const CONTEXT_FILE_NAME: &str = "supabase-sql-context.md";

/// `llm:` as written: the model providers of the tools that ask a model.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Llm")]
pub(super) struct RawLlm {
    /// Each request to a model provider (milliseconds).
    #[schemars(extend("default" = 60_000), range(min = 1))]
    timeout_ms: Option<u64>,
    /// Further attempts after a 429, a 5xx or a refused connection.
    #[schemars(extend("default" = 2))]
    max_retries: Option<u32>,
    /// The longest wait between attempts (milliseconds); a longer `Retry-After` gives up.
    #[schemars(extend("default" = 10_000), range(min = 1))]
    max_backoff_ms: Option<u64>,
    /// The learned context file of `generate_sql` (`ORCA_CONTEXT_FILE` wins). Default:
    /// `context/supabase-sql-context.md` in the working directory when it exists, else in
    /// `ORCA_HOME`.
    context_file: Option<PathBuf>,
    /// How much of the context file a prompt may hold, in estimated tokens.
    #[schemars(extend("default" = 1500), range(min = 1))]
    context_budget_tokens: Option<u64>,
    /// How much of the schema a prompt may hold, in estimated tokens.
    #[schemars(extend("default" = 6000), range(min = 1))]
    schema_budget_tokens: Option<u64>,
    /// Each LLM-backed tool's default provider and model, by tool (`generate_sql`,
    /// `generate_schema`, `format_results`, `context_suggest`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::llm_tools")]
    tools: BTreeMap<String, RawToolModel>,
    /// The model used when a tool falls back to a provider, by provider (`openai`,
    /// `anthropic`, `google`, `client`; for `client` only a hint to the calling client).
    #[serde(default)]
    models: BTreeMap<String, String>,
    /// Short names callers may pass as `llm_model` (`sonnet: claude-sonnet-4-5`).
    #[serde(default)]
    aliases: BTreeMap<String, String>,
}

/// `llm.tools.<tool>` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ToolModel")]
pub(super) struct RawToolModel {
    /// The provider: `anthropic`, `openai`, `google` or `client` (the calling client's model,
    /// through MCP sampling); each tool accepts some of them.
    #[schemars(extend("enum" = ["anthropic", "openai", "google", "gemini", "client"]))]
    provider: Option<String>,
    /// The provider's model, or an alias of `llm.aliases`.
    model: Option<String>,
    /// `false` turns the tool's model calls off: nothing it sees is sent to a provider.
    #[schemars(extend("default" = true))]
    enabled: Option<bool>,
}

/// Parse `llm:` (if present) and the provider variables, reporting every problem.
pub(super) fn load(
    section: Option<&Value>,
    env: &Env,
    file: &str,
    home: &Path,
    errors: &mut Vec<String>,
) -> LlmConfig {
    let raw: RawLlm =
        section.and_then(|value| super::section(value, "llm", file, errors)).unwrap_or_default();

    let endpoints = endpoints(env, errors);

    let positive =
        |value: Option<u64>, default: u64, key: &str, errors: &mut Vec<String>| match value {
            Some(0) => {
                errors.push(format!("{file}: llm.{key}: must be greater than zero"));
                default
            }
            Some(value) => value,
            None => default,
        };
    let client = ClientSettings {
        timeout: Duration::from_millis(positive(raw.timeout_ms, 60_000, "timeout_ms", errors)),
        max_retries: raw.max_retries.unwrap_or(2),
        max_backoff: Duration::from_millis(positive(
            raw.max_backoff_ms,
            10_000,
            "max_backoff_ms",
            errors,
        )),
    };

    let provider_models = provider_models(raw.models, file, errors);
    let (tools, disabled) = tool_models(raw.tools, &provider_models, file, errors);

    let in_working_directory = Path::new("context").join(CONTEXT_FILE_NAME);
    let context_file =
        env.get("ORCA_CONTEXT_FILE").map(PathBuf::from).or(raw.context_file).unwrap_or_else(|| {
            if in_working_directory.is_file() {
                in_working_directory
            } else {
                home.join("context").join(CONTEXT_FILE_NAME)
            }
        });
    let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    LlmConfig {
        endpoints,
        client,
        tools,
        disabled,
        provider_models,
        aliases: raw.aliases,
        context_file,
        context_budget_tokens: to_usize(positive(
            raw.context_budget_tokens,
            1_500,
            "context_budget_tokens",
            errors,
        )),
        schema_budget_tokens: to_usize(positive(
            raw.schema_budget_tokens,
            6_000,
            "schema_budget_tokens",
            errors,
        )),
    }
}

/// One endpoint per provider: its key and base URL from the environment.
fn endpoints(env: &Env, errors: &mut Vec<String>) -> Vec<Endpoint> {
    let key = |names: &[&str]| names.iter().find_map(|name| env.get(name)).map(SecretString::from);
    let url = |name: &str, default: &str, errors: &mut Vec<String>| match env.get(name) {
        None => default.to_owned(),
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            url.trim_end_matches('/').to_owned()
        }
        Some(_) => {
            errors.push(format!("environment: {name}: expected an http:// or https:// URL"));
            default.to_owned()
        }
    };
    vec![
        Endpoint {
            provider: Provider::OpenAi,
            api_key: key(&["OPENAI_API_KEY"]),
            base_url: url("OPENAI_BASE_URL", default_base_url(Provider::OpenAi), errors),
        },
        Endpoint {
            provider: Provider::Anthropic,
            api_key: key(&["ANTHROPIC_API_KEY"]),
            base_url: url("ANTHROPIC_BASE_URL", default_base_url(Provider::Anthropic), errors),
        },
        Endpoint {
            provider: Provider::Google,
            api_key: key(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
            base_url: url("GEMINI_BASE_URL", default_base_url(Provider::Google), errors),
        },
    ]
}

/// The model each provider uses when a tool falls back to it: `llm.models` over the built-in ones.
fn provider_models(
    models: BTreeMap<String, String>,
    file: &str,
    errors: &mut Vec<String>,
) -> BTreeMap<Provider, String> {
    let mut provider_models: BTreeMap<Provider, String> = [
        (Provider::OpenAi, "gpt-4o-mini".to_owned()),
        (Provider::Anthropic, "claude-sonnet-4-5".to_owned()),
        (Provider::Google, "gemini-2.5-flash".to_owned()),
    ]
    .into_iter()
    .collect();
    for (name, model) in models {
        match Provider::parse(&name) {
            Some(_) if model.trim().is_empty() => {
                errors.push(format!("{file}: llm.models.{name}: must not be empty"));
            }
            Some(provider) => {
                provider_models.insert(provider, model);
            }
            None => errors.push(format!(
                "{file}: llm.models.{name}: unknown provider; known providers: {}",
                provider_names(&Provider::ALL)
            )),
        }
    }
    provider_models
}

/// Each tool's provider and model (`llm.tools` over the built-in defaults) and the tools whose
/// model calls are turned off.
fn tool_models(
    raw_tools: BTreeMap<String, RawToolModel>,
    provider_models: &BTreeMap<Provider, String>,
    file: &str,
    errors: &mut Vec<String>,
) -> (BTreeMap<LlmTool, ToolModel>, std::collections::BTreeSet<LlmTool>) {
    let mut tools: BTreeMap<LlmTool, ToolModel> =
        LlmTool::ALL.into_iter().map(|tool| (tool, tool.built_in_default())).collect();
    let mut disabled = std::collections::BTreeSet::new();
    for (name, raw_tool) in raw_tools {
        let Some(tool) = LlmTool::ALL.into_iter().find(|tool| tool.as_str() == name) else {
            errors.push(format!(
                "{file}: llm.tools.{name}: unknown tool; tools that use a model: {}",
                LlmTool::ALL.map(LlmTool::as_str).join(", ")
            ));
            continue;
        };
        if raw_tool.enabled == Some(false) {
            disabled.insert(tool);
        }
        let provider = match raw_tool.provider.as_deref().map(|text| (text, Provider::parse(text)))
        {
            None => tool.built_in_default().provider,
            Some((_, Some(provider))) if tool.supported().contains(&provider) => provider,
            Some((text, _)) => {
                errors.push(format!(
                    "{file}: llm.tools.{name}.provider: `{text}` is not supported by {name}; supported: {}",
                    provider_names(tool.supported())
                ));
                continue;
            }
        };
        let model = match raw_tool.model {
            Some(model) if model.trim().is_empty() => {
                errors.push(format!("{file}: llm.tools.{name}.model: must not be empty"));
                continue;
            }
            Some(model) => model,
            None if provider == tool.built_in_default().provider => tool.built_in_default().model,
            // The client's model name is only a hint; without one, the tool's usual model.
            None => provider_models
                .get(&provider)
                .cloned()
                .unwrap_or_else(|| tool.built_in_default().model),
        };
        tools.insert(tool, ToolModel { provider, model });
    }
    (tools, disabled)
}

/// `anthropic, openai` for messages.
pub(crate) fn provider_names(providers: &[Provider]) -> String {
    providers.iter().map(|provider| provider.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn load_with(yaml: Value, vars: &[(&str, &str)]) -> (LlmConfig, Vec<String>) {
        let mut errors = Vec::new();
        let home = Path::new("/nonexistent/orca-home");
        let config = load(Some(&yaml), &Env::from_pairs(vars), "orca.yaml", home, &mut errors);
        (config, errors)
    }

    #[test]
    fn defaults_follow_the_specification_and_nothing_is_configured_without_keys() {
        let (config, errors) = load_with(Value::Null, &[]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config.tools[&LlmTool::GenerateSql].provider, Provider::Anthropic);
        assert_eq!(config.tools[&LlmTool::GenerateSchema].provider, Provider::Anthropic);
        assert_eq!(config.tools[&LlmTool::FormatResults].provider, Provider::OpenAi);
        for provider in Provider::ALL {
            let endpoint = config.endpoint(provider).unwrap();
            assert!(endpoint.api_key.is_none(), "{provider}");
            assert_eq!(endpoint.base_url, default_base_url(provider));
        }
        assert_eq!(config.client.timeout, Duration::from_secs(60));
        // The working directory's file when there is one (as in this repository), else ORCA_HOME's.
        let expected = if Path::new("context/supabase-sql-context.md").is_file() {
            PathBuf::from("context/supabase-sql-context.md")
        } else {
            PathBuf::from("/nonexistent/orca-home/context/supabase-sql-context.md")
        };
        assert_eq!(config.context_file, expected);
    }

    #[test]
    fn keys_and_urls_come_from_the_environment() {
        let (config, errors) = load_with(
            Value::Null,
            &[
                ("GOOGLE_API_KEY", "g"),
                ("ANTHROPIC_API_KEY", "a"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
                ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
                ("ORCA_CONTEXT_FILE", "/tmp/ctx.md"),
            ],
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert!(config.endpoint(Provider::Google).unwrap().api_key.is_some());
        assert!(config.endpoint(Provider::Anthropic).unwrap().api_key.is_some());
        assert_eq!(
            config.endpoint(Provider::OpenAi).map(|e| e.base_url.as_str()),
            Some("http://localhost:11434/v1")
        );
        assert_eq!(
            config.endpoint(Provider::Anthropic).map(|e| e.base_url.as_str()),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(config.context_file, Path::new("/tmp/ctx.md"));
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut section = json!({
            "timeout_ms": 0,
            "tools": {
                "format_results": {"provider": "google"},
                "generate_everything": {"provider": "openai"},
                "generate_sql": {"model": ""}
            },
            "models": {"mistral": "x"}
        });
        let vars = [("OPENAI_BASE_URL", "localhost:1234")];
        let (_, errors) = load_with(section.clone(), &vars);
        let text = errors.join("\n");
        for expected in [
            "environment: OPENAI_BASE_URL: expected an http:// or https:// URL",
            "llm.timeout_ms: must be greater than zero",
            "llm.tools.format_results.provider: `google` is not supported by format_results; supported: openai, anthropic",
            "llm.tools.generate_everything: unknown tool",
            "llm.tools.generate_sql.model: must not be empty",
            "llm.models.mistral: unknown provider",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        // An unknown key stops the section from being read, and is named.
        section["colour"] = json!("blue");
        let (_, errors) = load_with(section, &vars);
        assert!(errors.join("\n").contains("llm.colour"), "{errors:?}");
    }

    #[test]
    fn a_tool_moved_to_another_provider_takes_that_providers_model() {
        let (config, errors) = load_with(
            json!({
                "tools": {"generate_sql": {"provider": "openai"}, "format_results": {"provider": "anthropic", "model": "claude-haiku-4-5"}},
                "models": {"openai": "gpt-4.1"}
            }),
            &[],
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            config.tools[&LlmTool::GenerateSql],
            ToolModel { provider: Provider::OpenAi, model: "gpt-4.1".to_owned() }
        );
        assert_eq!(config.tools[&LlmTool::FormatResults].model, "claude-haiku-4-5");
        let (config, errors) =
            load_with(json!({"tools": {"format_results": {"enabled": false}}}), &[]);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(config.disabled.contains(&LlmTool::FormatResults));
        assert_eq!(config.tools[&LlmTool::FormatResults].provider, Provider::OpenAi);
    }
}
