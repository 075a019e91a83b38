//! The `weaviate` server's configuration: `WEAVIATE_URL` enables it, `WEAVIATE_API_KEY` is sent
//! as a bearer token, and `weaviate:` in `orca.yaml` adds headers for vectorizer keys (values may
//! name environment variables as `${VAR}`), a timeout and the result size cap.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::Env;

/// `weaviate:` in `orca.yaml`, as written; read when `WEAVIATE_URL` is set.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Weaviate")]
pub(super) struct RawWeaviate {
    /// Extra headers on every request to Weaviate, such as vectorizer keys
    /// (`X-OpenAI-Api-Key: ${OPENAI_API_KEY}`); `${VAR}` reads the environment.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Each request to Weaviate (milliseconds).
    #[schemars(extend("default" = 30_000), range(min = 1))]
    timeout_ms: Option<u64>,
    /// Larger results are cut (`truncated: true`), in bytes of JSON.
    #[schemars(extend("default" = 1_048_576), range(min = 1))]
    max_results_bytes: Option<u64>,
    /// How often (milliseconds) readiness and version are checked for `list_servers`.
    #[schemars(extend("default" = 15_000), range(min = 1))]
    probe_interval_ms: Option<u64>,
}

/// A validated Weaviate endpoint.
#[derive(Debug, Clone)]
pub(crate) struct WeaviateConfig {
    /// `scheme://host[:port]` and an optional path prefix, without a trailing slash.
    pub(crate) url: String,
    pub(crate) api_key: Option<SecretString>,
    /// Extra headers, values kept secret (they are usually vectorizer API keys).
    pub(crate) headers: Vec<(String, SecretString)>,
    pub(crate) timeout: Duration,
    /// Results larger than this (as JSON) are cut, and say so with `truncated`.
    pub(crate) max_results_bytes: usize,
    /// How often readiness and version are checked for `list_servers`.
    pub(crate) probe_interval: Duration,
}

impl WeaviateConfig {
    pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    pub(crate) const DEFAULT_MAX_RESULTS_BYTES: usize = 1024 * 1024;

    /// The URL as a person may read it: no user info, query or fragment.
    pub(crate) fn display_url(&self) -> String {
        super::mask_url(&self.url)
    }
}

/// Read `WEAVIATE_URL`, `WEAVIATE_API_KEY` and the `weaviate:` section; `None` when the URL is
/// unset (the server is then disabled).
pub(super) fn load(
    section: Option<&Value>,
    env: &Env,
    file: &str,
    errors: &mut Vec<String>,
) -> Option<WeaviateConfig> {
    let raw: RawWeaviate = section
        .and_then(|value| super::section(value, "weaviate", file, errors))
        .unwrap_or_default();
    let url = env.get("WEAVIATE_URL")?.trim().trim_end_matches('/').to_owned();
    let valid_url = reqwest::Url::parse(&url)
        .ok()
        .filter(|parsed| matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some());
    if valid_url.is_none() {
        errors.push(
            "environment: WEAVIATE_URL: expected an http:// or https:// URL such as http://localhost:8080"
                .to_owned(),
        );
    }
    let api_key = env.get("WEAVIATE_API_KEY").map(|key| SecretString::from(key.to_owned()));
    let mut headers = Vec::new();
    for (name, template) in raw.headers {
        let key = format!("weaviate.headers.{name}");
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            errors.push(format!("{file}: {key}: not a valid HTTP header name"));
            continue;
        }
        if name.eq_ignore_ascii_case("authorization") {
            errors.push(format!(
                "{file}: {key}: set WEAVIATE_API_KEY for the Authorization header instead"
            ));
            continue;
        }
        let mut missing = Vec::new();
        let expanded = super::external::expand(&template, |variable| {
            let value = env.get(variable).map(|value| SecretString::from(value.to_owned()));
            if value.is_none() {
                missing.push(variable.to_owned());
            }
            value
        });
        match expanded {
            Err(message) => errors.push(format!("{file}: {key}: {message}")),
            Ok(None) => errors.push(format!(
                "{file}: {key}: environment variable {} is not set",
                missing.join(", ")
            )),
            Ok(Some(value)) if http::HeaderValue::from_str(&value).is_err() => {
                errors.push(format!("{file}: {key}: the value is not a valid header value"));
            }
            Ok(Some(value)) => headers.push((name, SecretString::from(value))),
        }
    }
    let mut positive = |value: Option<u64>, default: u64, name: &str| match value {
        Some(0) => {
            errors.push(format!("{file}: weaviate.{name}: must be greater than zero"));
            default
        }
        Some(value) => value,
        None => default,
    };
    let default_timeout = WeaviateConfig::DEFAULT_TIMEOUT.as_millis() as u64;
    let timeout = Duration::from_millis(positive(raw.timeout_ms, default_timeout, "timeout_ms"));
    let default_bytes = WeaviateConfig::DEFAULT_MAX_RESULTS_BYTES as u64;
    let max_results_bytes =
        positive(raw.max_results_bytes, default_bytes, "max_results_bytes") as usize;
    let probe_interval =
        Duration::from_millis(positive(raw.probe_interval_ms, 15_000, "probe_interval_ms"));
    Some(WeaviateConfig { url, api_key, headers, timeout, max_results_bytes, probe_interval })
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    fn load_with(yaml: &str, env: &[(&str, &str)]) -> (Option<WeaviateConfig>, Vec<String>) {
        let document: Value = serde_saphyr::from_str(yaml).unwrap();
        let mut errors = Vec::new();
        let config =
            load(document.get("weaviate"), &Env::from_pairs(env), "orca.yaml", &mut errors);
        (config, errors)
    }

    #[test]
    fn without_a_url_the_server_is_disabled() {
        let (config, errors) = load_with("weaviate: {timeout_ms: 5}", &[]);
        assert!(config.is_none() && errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn headers_take_their_values_from_the_environment() {
        let (config, errors) = load_with(
            "weaviate:\n  headers:\n    X-OpenAI-Api-Key: ${OPENAI_KEY}\n  max_results_bytes: 100\n",
            &[
                ("WEAVIATE_URL", "http://w:8080/"),
                ("OPENAI_KEY", "sk-1"),
                ("WEAVIATE_API_KEY", "k"),
            ],
        );
        assert!(errors.is_empty(), "{errors:?}");
        let config = config.unwrap();
        assert_eq!(config.url, "http://w:8080");
        assert_eq!(config.headers[0].0, "X-OpenAI-Api-Key");
        assert_eq!(config.headers[0].1.expose_secret(), "sk-1");
        assert_eq!(config.api_key.unwrap().expose_secret(), "k");
        assert_eq!(config.max_results_bytes, 100);
        assert_eq!(config.timeout, WeaviateConfig::DEFAULT_TIMEOUT);
    }

    #[test]
    fn every_problem_is_reported() {
        let (_, errors) = load_with(
            "weaviate:\n  headers:\n    Authorization: x\n    'bad header': x\n    X-Key: ${NOPE}\n  timeout_ms: 0\n",
            &[("WEAVIATE_URL", "ftp://w")],
        );
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(errors[0].contains("WEAVIATE_URL"));
        assert!(errors.iter().any(|error| error.contains("WEAVIATE_API_KEY")));
        assert!(errors.iter().any(|error| error.contains("NOPE is not set")));
        assert!(errors.iter().any(|error| error.contains("timeout_ms")));
    }
}
