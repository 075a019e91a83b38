//! `orca config schema` and `orca config reference`: the JSON Schema of `orca.yaml` and
//! `external-mcps.yaml` (derived from the structs that read them, `config::ConfigFile`), and the
//! pages generated from the code where they would drift if written by hand: the schemas under
//! `docs/schema/`, the configuration reference rendered from them, and the tool reference
//! rendered from each built-in server's own tool list. `--check` is what the test suite runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value};

use super::output::print;
use crate::config::ConfigFile;
use crate::servers::ToolSpec;

#[derive(Debug, Subcommand)]
pub(super) enum ConfigCommand {
    /// Print the JSON Schema of orca.yaml or external-mcps.yaml
    #[command(long_about = "Print the JSON Schema (draft 2020-12) of orca.yaml (`orca`, the \
        default) or external-mcps.yaml (`external`), derived from the code that reads the file: \
        every key, its type, its default and its meaning. Editors that speak the YAML language \
        server complete and check a file whose first line names it:\n\n  \
        # yaml-language-server: $schema=docs/schema/orca.schema.json\n\n\
        Examples:\n  orca config schema > orca.schema.json\n  orca config schema external")]
    Schema {
        /// Which file's schema
        #[arg(value_enum, default_value = "orca")]
        file: Which,
    },
    /// Write the generated reference pages and schemas, or check that they are up to date
    #[command(
        long_about = "Write the files generated from the code: docs/schema/orca.schema.json \
        and docs/schema/external-mcps.schema.json (as `orca config schema` prints them), \
        docs/src/reference/configuration.md (every key of both files: path, type, default, \
        meaning) and docs/src/reference/tools.md (every built-in server's tools with their input \
        schemas, as tools/list shows them). With --check nothing is written: the command names \
        each file that differs from what it would write and exits 1 (the test suite runs this).\n\n\
        Examples:\n  orca config reference\n  orca config reference --check"
    )]
    Reference(ReferenceArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Which {
    /// orca.yaml
    Orca,
    /// external-mcps.yaml
    External,
}

#[derive(Debug, Args)]
pub(super) struct ReferenceArgs {
    /// Compare instead of writing: name each file that differs and exit 1
    #[arg(long)]
    check: bool,

    /// The directory that holds docs/ (the repository's root)
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

pub(super) fn run(command: ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Schema { file } => {
            let file = match file {
                Which::Orca => ConfigFile::Orca,
                Which::External => ConfigFile::External,
            };
            print(schema_text(file).trim_end());
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Reference(args) => reference(&args),
    }
}

fn reference(args: &ReferenceArgs) -> anyhow::Result<ExitCode> {
    let mut differ = Vec::new();
    for (path, text) in generated() {
        let at = args.dir.join(&path);
        if args.check {
            if std::fs::read_to_string(&at).ok().as_deref() != Some(text.as_str()) {
                differ.push(path.display().to_string());
            }
            continue;
        }
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&at, text).with_context(|| format!("cannot write {}", at.display()))?;
        print(&format!("wrote {}", at.display()));
    }
    if differ.is_empty() {
        if args.check {
            print("the generated reference is up to date");
        }
        return Ok(ExitCode::SUCCESS);
    }
    super::output::print_error(&format!(
        "these files differ from what `orca config reference` writes (run it and commit the result):\n  {}",
        differ.join("\n  ")
    ));
    Ok(ExitCode::FAILURE)
}

/// Every generated file: its path under the repository's root and its text.
fn generated() -> Vec<(PathBuf, String)> {
    let mut files: Vec<(PathBuf, String)> = ConfigFile::ALL
        .into_iter()
        .map(|file| (Path::new("docs/schema").join(file.schema_name()), schema_text(file)))
        .collect();
    files.push(("docs/src/reference/configuration.md".into(), configuration_page()));
    files.push(("docs/src/reference/tools.md".into(), tools_page()));
    files
}

fn schema_text(file: ConfigFile) -> String {
    let mut text = serde_json::to_string_pretty(&file.schema()).expect("a schema serializes");
    text.push('\n');
    text
}

/// `schema` itself, or the definition its `$ref` names in `root`.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let Some(reference) = schema.get("$ref").and_then(Value::as_str) else { return schema };
    let name = reference.rsplit('/').next().unwrap_or_default();
    ["$defs", "definitions"]
        .iter()
        .find_map(|defs| root.get(defs).and_then(|defs| defs.get(name)))
        .unwrap_or(schema)
}

/// A JSON value as it is written in YAML, in backticks.
fn code(value: &Value) -> String {
    match value {
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}

/// The type of `schema` as a person reads it: `integer (at least 1)`, `list of string`,
/// ``one of `model`, `human` ``.
fn type_text(root: &Value, schema: &Value) -> String {
    let schema = resolve(root, schema);
    if let Some(Value::Array(values)) = schema.get("enum") {
        return format!("one of {}", values.iter().map(code).collect::<Vec<_>>().join(", "));
    }
    if let Some(value) = schema.get("const") {
        return code(value);
    }
    if let Some(Value::Array(branches)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let types: Vec<String> = branches.iter().map(|branch| type_text(root, branch)).collect();
        return types.join(", or ");
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            return kinds.join(" or ");
        }
        _ => return if schema.get("properties").is_some() { "mapping" } else { "any" }.to_owned(),
    };
    match kind {
        "integer" | "number" => {
            let bound = |key: &str| schema.get(key).map(Value::to_string);
            match (bound("minimum"), bound("maximum")) {
                (Some(min), Some(max)) => format!("{kind} ({min} to {max})"),
                (Some(min), None) => format!("{kind} (at least {min})"),
                (None, Some(max)) => format!("{kind} (at most {max})"),
                (None, None) => kind.to_owned(),
            }
        }
        "array" => match schema.get("items") {
            Some(items) => format!("list of {}", type_text(root, items)),
            None => "list".to_owned(),
        },
        "object" => match schema.get("additionalProperties") {
            Some(values @ Value::Object(_)) => format!("map of {}", type_text(root, values)),
            _ => "mapping".to_owned(),
        },
        other => other.to_owned(),
    }
}

/// Text for one table cell: one line, no unescaped `|`.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

fn description(written: &Value, resolved: &Value) -> String {
    written
        .get("description")
        .or_else(|| resolved.get("description"))
        .and_then(Value::as_str)
        .map_or_else(String::new, cell)
}

/// What the key of a map is called in a path: `auth.roles.<role>`.
fn placeholder(path: &str) -> &'static str {
    let last = path.rsplit('.').next().unwrap_or_default();
    match last.trim_end_matches("[]") {
        "roles" => "<role>",
        "mcps" => "<key>",
        "models" => "<provider>",
        "aliases" => "<alias>",
        "headers" => "<header>",
        "env" => "<variable>",
        "credentials" => "<name>_env",
        "tool_verbs" => "<tool>",
        "masking" => "<policy>",
        "<policy>" => "<column>",
        _ => "<name>",
    }
}

/// One table row per key below `schema` (at `path`), depth first.
fn key_rows(root: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    let schema = resolve(root, schema);
    let visit = |at: String, written: &Value, out: &mut Vec<String>| {
        let resolved = resolve(root, written);
        let default = written.get("default").or_else(|| resolved.get("default"));
        out.push(format!(
            "| `{at}` | {} | {} | {} |",
            cell(&type_text(root, written)),
            default.map_or_else(String::new, |value| cell(&code(value))),
            description(written, resolved)
        ));
        key_rows(root, written, &at, out);
    };
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (key, property) in properties {
            let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            visit(at, property, out);
        }
    }
    if let Some(values @ Value::Object(_)) = schema.get("additionalProperties") {
        visit(format!("{path}.{}", placeholder(path)), values, out);
    }
    if schema.get("type").and_then(Value::as_str) == Some("array")
        && let Some(items) = schema.get("items")
    {
        key_rows(root, items, &format!("{path}[]"), out);
    }
}

const TABLE_HEAD: &str = "| key | type | default | meaning |\n|---|---|---|---|";

fn configuration_page() -> String {
    let mut page = String::from(
        "# Configuration reference\n\n\
         <!-- Generated by `orca config reference` from orca's code (src/config/). Do not edit it by hand: a test fails when it differs from what the command writes. -->\n\n\
         Every key of `orca.yaml` and of `external-mcps.yaml`, with its type, default and meaning, rendered from the JSON Schema that orca derives from the code that reads the files.\n\
         `orca config schema orca` and `orca config schema external` print the schemas, which the repository keeps as `docs/schema/orca.schema.json` and `docs/schema/external-mcps.schema.json`; a file whose first line is `# yaml-language-server: $schema=<path of the schema>` is completed and checked by editors that speak the YAML language server (VS Code's YAML extension, Neovim, Zed, Helix, JetBrains IDEs).\n\
         An unknown key is an error that names the closest known one.\n\
         The environment variables, and how the files are found, are on the [configuration](../configuration.md) page; `orca doctor` prints the effective value of each setting.\n\
         A key written `<name>` stands for any name (a map's key); `[]` for each entry of a list.\n",
    );
    for file in ConfigFile::ALL {
        let schema = file.schema();
        page.push_str(&format!("\n## `{}`\n\n", file.file_name()));
        if let Some(text) = schema.get("description").and_then(Value::as_str) {
            page.push_str(&format!("{}\n", cell(text)));
        }
        let Some(Value::Object(sections)) = schema.get("properties") else { continue };
        for (name, section) in sections {
            let resolved = resolve(&schema, section);
            page.push_str(&format!("\n### `{name}`\n\n{}\n\n", description(section, resolved)));
            let mut rows = Vec::new();
            let is_mapping = resolved.get("properties").is_some()
                && resolved.get("type").and_then(Value::as_str) == Some("object");
            if is_mapping {
                key_rows(&schema, section, name, &mut rows);
            } else {
                // A section that is one value (or a list or a map): its own row, then its keys.
                let mut root = Map::new();
                root.insert(name.clone(), section.clone());
                let wrapper = serde_json::json!({ "properties": root });
                key_rows(&schema, &wrapper, "", &mut rows);
            }
            page.push_str(TABLE_HEAD);
            page.push('\n');
            page.push_str(&rows.join("\n"));
            page.push('\n');
        }
    }
    page
}

/// What a tool's annotations say, in words.
fn annotations(spec: &ToolSpec) -> String {
    let Some(hints) = &spec.tool.annotations else { return "none".to_owned() };
    let mut said = Vec::new();
    match hints.read_only_hint {
        Some(true) => said.push("read-only"),
        _ => {
            if hints.destructive_hint == Some(true) {
                said.push("destructive");
            } else if hints.destructive_hint == Some(false) {
                said.push("not destructive");
            }
        }
    }
    if hints.idempotent_hint == Some(true) {
        said.push("idempotent");
    }
    match hints.open_world_hint {
        Some(true) => said.push("open world"),
        Some(false) => said.push("closed world"),
        None => {}
    }
    said.join(", ")
}

fn tool_section(spec: &ToolSpec) -> String {
    let tool = &spec.tool;
    let schema = Value::Object((*tool.input_schema).clone());
    let mut text = format!(
        "\n### `{}`\n\n{}\n\nVerb: `{}`. Annotations: {}.\n\n",
        tool.name,
        tool.description.as_deref().unwrap_or_default(),
        spec.verb.as_str(),
        annotations(spec)
    );
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match schema.get("properties").and_then(Value::as_object).filter(|map| !map.is_empty()) {
        None => text.push_str("No arguments.\n"),
        Some(properties) => {
            text.push_str(
                "| argument | type | required | default | meaning |\n|---|---|---|---|---|\n",
            );
            for (name, property) in properties {
                let resolved = resolve(&schema, property);
                let default = property.get("default").or_else(|| resolved.get("default"));
                text.push_str(&format!(
                    "| `{name}` | {} | {} | {} | {} |\n",
                    cell(&type_text(&schema, property)),
                    if required.contains(&name.as_str()) { "yes" } else { "no" },
                    default.map_or_else(String::new, |value| cell(&code(value))),
                    description(property, resolved)
                ));
            }
        }
    }
    let json = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push_str(&format!(
        "\n<details><summary>Input schema</summary>\n\n```json\n{json}\n```\n\n</details>\n"
    ));
    text
}

fn tools_page() -> String {
    let mut page = String::from(
        "# Tool reference\n\n\
         <!-- Generated by `orca config reference` from orca's code (each server's tool list). Do not edit it by hand: a test fails when it differs from what the command writes. -->\n\n\
         Every tool of every built-in server, with its verb, annotations and input schema as `tools/list` publishes it: with writes allowed and one database served.\n\
         With `read_only` (or a read-only database) the write tools are left out; with several databases, the SQL tools' `database` argument lists their names.\n\
         Tool search's `search_tools` and `call_tool`, offered instead of the full list to some callers, are on the [orca server's page](../servers/orca.md#search_tools-and-call_tool); each server's page says what its tools return and their errors ([servers and tools](../servers/overview.md)).\n",
    );
    for (kind, tools) in crate::servers::listed_tools() {
        page.push_str(&format!("\n## `{}`\n\n", kind.name()));
        page.push_str("| tool | verb | annotations |\n|---|---|---|\n");
        for spec in &tools {
            page.push_str(&format!(
                "| [`{name}`](#{name}) | `{}` | {} |\n",
                spec.verb.as_str(),
                annotations(spec),
                name = spec.name()
            ));
        }
        for spec in &tools {
            page.push_str(&tool_section(spec));
        }
    }
    page
}
