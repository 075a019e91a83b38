//! The JSON Schema of `orca.yaml` and of `external-mcps.yaml`, derived with `schemars` from the
//! structs that read them (`raw.rs` and each section's module), so that it cannot drift from what
//! orca accepts: `orca config schema` prints it, editors complete and check the files with it
//! (the `# yaml-language-server: $schema=...` line), and `orca config reference` renders the
//! configuration reference from it.
//!
//! `orca.yaml` is read section by section (`Sections` in `mod.rs`), so its root is the
//! schema-only [`OrcaFile`]; the sections read without a struct (`servers`, `masking`) get
//! their schema from the names the code knows ([`ServerKind::ALL`], [`ValueKind::ALL`]).
//!
//! The schema describes what to write: a key that may be left out is not also offered as
//! `null` (which orca reads as left out), and Rust's integer formats are dropped.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde_json::{Map, Value, json};

use super::{LlmTool, ServerKind, catalog, cluster, databases, external, guard, llm, metabase};
use super::{pool, raw, weaviate};
use crate::privacy::results::ValueKind;
use crate::tool::Verb;

/// Which file a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum File {
    /// `orca.yaml`.
    Orca,
    /// `external-mcps.yaml`.
    External,
}

impl File {
    pub(crate) const ALL: [File; 2] = [File::Orca, File::External];

    /// The file's usual name.
    pub(crate) fn file_name(self) -> &'static str {
        match self {
            File::Orca => "orca.yaml",
            File::External => "external-mcps.yaml",
        }
    }

    /// The name of its schema under `docs/schema/`.
    pub(crate) fn schema_name(self) -> &'static str {
        match self {
            File::Orca => "orca.schema.json",
            File::External => "external-mcps.schema.json",
        }
    }

    /// The file's JSON Schema (draft 2020-12).
    pub(crate) fn schema(self) -> Value {
        let (generated, description) = match self {
            File::Orca => (generate::<OrcaFile>(), None),
            File::External => (
                generate::<external::RawFile>(),
                Some(
                    "`external-mcps.yaml`: the external MCP servers orca starts (stdio) or connects to (http, sse), namespaces and supervises (`ORCA_EXTERNAL_MCPS`, else `./external-mcps.yaml` when it exists). Unknown keys are errors.",
                ),
            ),
        };
        let Value::Object(mut generated) = generated else { unreachable!("a schema is an object") };
        // The root's own words first, as a person opening the file reads them.
        let mut root = Map::new();
        for key in ["$schema", "title", "description"] {
            if let Some(value) = generated.remove(key) {
                root.insert(key.to_owned(), value);
            }
        }
        root.insert("title".to_owned(), Value::String(self.file_name().to_owned()));
        if let Some(text) = description {
            root.insert("description".to_owned(), Value::String(text.to_owned()));
        }
        root.extend(generated);
        Value::Object(root)
    }
}

/// `orca.yaml`: the optional configuration file of orca (`--config`, `ORCA_CONFIG`, else
/// `./orca.yaml`). Every section may be left out; unknown keys are errors.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code, reason = "only its schema is used; the sections are read one by one")]
pub(crate) struct OrcaFile {
    /// The internal servers to serve (`--servers` overrides it); default: all of them.
    #[serde(default)]
    #[schemars(schema_with = "server_list")]
    servers: Option<Vec<String>>,
    /// The size of each of the two connection pools.
    database: Option<pool::RawDatabase>,
    /// The named target databases the SQL tools serve, each a catalog clients choose by name;
    /// default: `DATABASE_URL` alone, or the embedded sample database.
    #[schemars(length(min = 1))]
    databases: Option<Vec<databases::RawDatabase>>,
    /// Who may call orca and what they may do: API keys, the stdio and anonymous principals,
    /// OAuth and roles.
    auth: Option<raw::RawAuth>,
    /// The limits and checks of the Streamable HTTP edge.
    http: Option<raw::RawHttp>,
    /// The record of every call.
    tracking: Option<raw::RawTracking>,
    /// The limits and the write policy of the SQL tools.
    sql: Option<raw::RawSql>,
    /// `true`: no write tools, every write refused (the same as `--read-only`).
    #[schemars(extend("default" = false))]
    read_only: Option<bool>,
    /// The limits of the `data` server's metadata and profiling tools.
    data: Option<raw::RawData>,
    /// Masking policies by id, for `preview_masked` and `auth.roles.<role>.masking`.
    #[serde(default)]
    #[schemars(schema_with = "masking")]
    masking: Option<Value>,
    /// The model providers of the tools that ask a model.
    llm: Option<llm::RawLlm>,
    /// The `metabase` server.
    metabase: Option<metabase::RawMetabase>,
    /// The `weaviate` server's headers, timeout and result cap (with `WEAVIATE_URL` set).
    weaviate: Option<weaviate::RawWeaviate>,
    /// When `tools/list` offers tool search instead of every tool.
    catalog: Option<catalog::RawCatalog>,
    /// How replicas sharing one state database reach each other.
    cluster: Option<cluster::RawCluster>,
    /// What becomes of credentials in what servers send back.
    guard: Option<guard::RawGuard>,
}

/// The schema of `T` as its file's root, tidied (see the module's doc).
fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    tidy(&mut value);
    value
}

/// Drops the `null` that schemars offers for every `Option` (as a second type or a second
/// `anyOf` branch) and the integer formats, everywhere in `value`.
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|kind| kind != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".to_owned(), only);
                }
            }
            if let Some(Value::Array(branches)) = map.get("anyOf")
                && branches.len() == 2
                && branches[1] == json!({"type": "null"})
            {
                let Some(Value::Object(kept)) = branches.first().cloned() else { return };
                map.remove("anyOf");
                for (key, value) in kept {
                    map.entry(key).or_insert(value);
                }
            }
            if map.get("format").and_then(Value::as_str).is_some_and(|format| {
                matches!(format, "uint" | "uint8" | "uint16" | "uint32" | "uint64" | "double")
            }) {
                map.remove("format");
            }
            // An unsigned integer's `minimum: 0` says nothing a person needs to read.
            if map.get("type") == Some(&json!("integer")) && map.get("minimum") == Some(&json!(0)) {
                map.remove("minimum");
            }
            // `#[serde(default)]` on an `Option` (which makes it optional beside `schema_with`).
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            // Doc comments are wrapped at 100 columns; a description is one paragraph.
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn names(names: impl IntoIterator<Item = &'static str>) -> Value {
    Value::Array(names.into_iter().map(|name| Value::String(name.to_owned())).collect())
}

/// `servers:`: a list of the internal servers' names.
fn server_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"enum": names(ServerKind::ALL.map(ServerKind::name))},
        "uniqueItems": true,
    })
}

/// A list of verbs.
pub(super) fn verb_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"enum": names(Verb::ALL.map(Verb::as_str))},
    })
}

/// A map of tool names to verbs.
pub(super) fn verb_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"enum": names(Verb::ALL.map(Verb::as_str))},
    })
}

/// A duration: seconds as a number, or a number with `ms`, `s` or `m`.
pub(super) fn duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["number", "string"],
        "minimum": 0,
        "pattern": r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m)?\s*$",
    })
}

/// `llm.tools`: one entry per LLM-backed tool.
pub(super) fn llm_tools(generator: &mut SchemaGenerator) -> Schema {
    let model = generator.subschema_for::<llm::RawToolModel>().to_value();
    let properties: Map<String, Value> =
        LlmTool::ALL.iter().map(|tool| (tool.as_str().to_owned(), model.clone())).collect();
    json_schema!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// `masking:`: policies by id, each a map of column names to rules plus optional `kinds`.
fn masking(generator: &mut SchemaGenerator) -> Schema {
    let written = json!({
        "description": "redact, hash, null, keep_email_domain or keep_last:N (N from 1 to 64)",
        "anyOf": [
            {
                "type": "string",
                "pattern": "^(redact|hash|null|keep_email_domain|keep_last[:_][0-9]+)$",
            },
            {"const": null},
        ],
    });
    generator.definitions_mut().insert("MaskRule".to_owned(), written);
    let rule = json!({"$ref": "#/$defs/MaskRule"});
    let kinds = names(ValueKind::ALL.map(ValueKind::as_str));
    let kind_rules: BTreeMap<&str, Value> =
        ValueKind::ALL.iter().map(|kind| (kind.as_str(), rule.clone())).collect();
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "description": "Column (and, in other servers' results, JSON key) names to rules.",
            "minProperties": 1,
            "properties": {
                "kinds": {
                    "description": "Values of these kinds masked wherever they appear in results PostgreSQL does not mask: a list takes each kind's default rule, a map gives each its rule.",
                    "anyOf": [
                        {"type": "array", "items": {"enum": kinds}},
                        {"type": "object", "properties": kind_rules, "additionalProperties": false},
                    ],
                },
            },
            "additionalProperties": rule,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Env, load};

    fn validator(file: File) -> jsonschema::Validator {
        jsonschema::validator_for(&file.schema()).expect("the schema is a valid JSON Schema")
    }

    /// The problems `text` has against `file`'s schema, one line each.
    fn violations(file: File, text: &str) -> Vec<String> {
        let document: Value = serde_saphyr::from_str(text).expect("valid YAML");
        validator(file)
            .iter_errors(&document)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect()
    }

    /// The `orca.yaml` embedded in the Kubernetes manifest.
    fn configmap_orca_yaml() -> String {
        let manifest: Value =
            serde_saphyr::from_str(include_str!("../../deploy/kubernetes/configmap.yaml")).unwrap();
        manifest["data"]["orca.yaml"].as_str().unwrap().to_owned()
    }

    #[test]
    fn the_example_files_follow_their_schema() {
        let cases = [
            (File::Orca, include_str!("../../docs/orca.example.yaml").to_owned()),
            (File::Orca, configmap_orca_yaml()),
            (File::External, include_str!("../../external-mcps.yaml").to_owned()),
        ];
        for (file, text) in cases {
            assert_eq!(violations(file, &text), Vec::<String>::new(), "{}", file.file_name());
        }
    }

    #[test]
    fn the_schema_refuses_what_orca_refuses() {
        let cases = [
            (File::Orca, "colour: blue", "/"),
            (File::Orca, "tracking: {flush_every: 3}", "/tracking"),
            (File::Orca, "servers: [orca, metabass]", "/servers/1"),
            (File::Orca, "sql: {write_confirmation: person}", "/sql/write_confirmation"),
            (
                File::Orca,
                "auth: {api_keys: [{name: ci, sha256: x, verbs: [write]}]}",
                "/auth/api_keys/0/verbs/0",
            ),
            (File::Orca, "masking: {people: {email: scramble}}", "/masking/people/email"),
            (File::Orca, "llm: {tools: {write_sql: {provider: openai}}}", "/llm/tools"),
            (File::External, "mcps: {a: {command: x, retries: many}}", "/mcps/a/retries"),
            (File::External, "mcps: {a: {command: x, pin: always}}", "/mcps/a/pin"),
            (File::External, "servers: {}", "/"),
        ];
        for (file, text, at) in cases {
            let found = violations(file, text);
            assert!(
                found.iter().any(|line| line.starts_with(&format!("{at}:"))
                    || (at == "/" && line.starts_with(':'))),
                "{text}: expected a problem at {at}, found {found:?}"
            );
        }
    }

    /// Every leaf `(path, default)` under `schema` at `path` whose every parent is an object that
    /// requires nothing (so the leaf may be written alone).
    fn defaults(
        root: &Value,
        schema: &Value,
        path: &[String],
        out: &mut Vec<(Vec<String>, Value)>,
    ) {
        let schema = match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => &root["$defs"][reference.trim_start_matches("#/$defs/")],
            None => schema,
        };
        if let Some(default) = schema.get("default") {
            out.push((path.to_vec(), default.clone()));
            return;
        }
        let requires =
            schema.get("required").and_then(Value::as_array).is_some_and(|r| !r.is_empty());
        let Some(Value::Object(properties)) = schema.get("properties") else { return };
        if requires {
            return;
        }
        for (key, property) in properties {
            let mut at = path.to_vec();
            at.push(key.clone());
            defaults(root, property, &at, out);
        }
    }

    /// The configuration loaded from `yaml`, as text: two loads are alike when their texts are.
    fn loaded(yaml: &str, scratch: &Path) -> String {
        let file = scratch.join("orca.yaml");
        std::fs::write(&file, yaml).unwrap();
        let external = scratch.join("external-mcps.yaml");
        let home = scratch.display().to_string();
        let env = Env::from_pairs(&[
            ("ORCA_HOME", &home),
            ("ORCA_EXTERNAL_MCPS", &external.display().to_string()),
            ("METABASE_URL", "http://metabase.test"),
            ("METABASE_API_KEY", "key"),
            ("WEAVIATE_URL", "http://weaviate.test"),
        ]);
        let config = load(Some(&file), &env).unwrap_or_else(|errors| panic!("{yaml}: {errors}"));
        format!("{config:?}").replace(&file.display().to_string(), "FILE")
    }

    fn nested(path: &[String], leaf: Value) -> Value {
        path.iter().rev().fold(leaf, |inner, key| json!({ key: inner }))
    }

    #[test]
    fn every_default_the_schema_states_is_what_orca_uses() {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join("external-mcps.yaml"), "").unwrap();
        let baseline = loaded("", scratch.path());
        let schema = File::Orca.schema();
        let mut found = Vec::new();
        defaults(&schema, &schema, &[], &mut found);
        assert!(found.len() > 50, "{found:?}");
        for (path, default) in found {
            let yaml = nested(&path, default).to_string();
            assert_eq!(loaded(&yaml, scratch.path()), baseline, "{yaml} is not the default");
        }
    }

    #[test]
    fn every_default_of_an_external_server_is_what_orca_uses() {
        let schema = File::External.schema();
        let server = &schema["$defs"]["Server"];
        let parse = |entry: Value| {
            let text = json!({"mcps": {"tool": entry}}).to_string();
            let mut errors = Vec::new();
            let servers =
                external::parse(&text, "external-mcps.yaml", &Env::default(), &mut errors);
            assert_eq!(errors, Vec::<String>::new(), "{text}");
            format!("{servers:?}")
        };
        let baseline = parse(json!({"command": "tool"}));
        let mut checked = 0;
        for (key, property) in server["properties"].as_object().unwrap() {
            let Some(default) = property.get("default") else { continue };
            let entry = json!({"command": "tool", key: default});
            assert_eq!(parse(entry), baseline, "{key}: {default} is not the default");
            checked += 1;
        }
        assert!(checked >= 5, "{checked}");
    }
}
