//! `orca context`: the commands of the people who curate the context file. `check` parses it and
//! lists its entries, `refresh-schema` rewrites the schema overview between its markers from the
//! live database, and `suggest` asks a model for additions learned from recent failures and
//! writes them as a patch to review. None of them lets a model edit the file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use secrecy::ExposeSecret;

use super::databases::Databases;
use super::output::print;
use crate::config::{Config, LlmTool};
use crate::context;
use crate::llm::{Llm, Message, Role};
use crate::tracking::{self, ExportRange};

#[derive(Debug, Subcommand)]
pub(super) enum ContextCommand {
    /// Parse the context file and list its sections and entries; --watch reports each reload
    #[command(long_about = "Parse the context file and list its sections and entries, or say \
        what is wrong with it and where. With --watch, keep watching it as a running orca does \
        and print a line for each version that loads (a malformed save is logged and the previous \
        version stays), until interrupted.\n\n\
        Examples:\n  orca context check\n  orca context check --watch --file context/supabase-sql-context.md")]
    Check(CheckArgs),
    /// Rewrite the schema overview (between its markers) from the live database
    #[command(
        long_about = "Rewrite the \"Database Schema Overview\" of the context file from the \
        live database (DATABASE_URL, else the embedded Chinook database): one line per table or \
        view with its columns, keys and size, between the markers \
        <!-- orca:schema:start --> and <!-- orca:schema:end -->. Everything outside the markers \
        stays as it is; the markers are added under the section's heading when missing, and the \
        file is created from a template when it does not exist. A running orca reloads it.\n\n\
        Example:\n  orca context refresh-schema"
    )]
    RefreshSchema(FileArgs),
    /// Propose additions from recent failures and down-rated calls, as a patch to review
    #[command(long_about = "Read the SQL tools' calls of a time range that failed, needed \
        retries or were rated down (with the attempts that fixed them), ask the configured model \
        (llm.tools.context_suggest in orca.yaml) for patterns, fixes and insights worth adding, \
        and write the context file as it would be, as a unified diff, to --out or stdout. The \
        context file itself is never changed: review the patch, then apply it with \
        `patch FILE < PATCH` (or `git apply` when the file is below the working directory).\n\n\
        Examples:\n  orca context suggest --since 7d --out context.patch\n  \
        orca context suggest --since 2026-11-01 --until 2026-11-15")]
    Suggest(SuggestArgs),
}

#[derive(Debug, Args)]
pub(super) struct FileArgs {
    /// The context file [default: the database's context_file, else $ORCA_CONTEXT_FILE, llm.context_file, else context/supabase-sql-context.md]
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,

    /// The database whose context file this is, by its name in orca.yaml's `databases` (its own context_file, and its calls only)
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// The context file [default: the database's context_file, else $ORCA_CONTEXT_FILE, llm.context_file, else context/supabase-sql-context.md]
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,

    /// The database whose context file this is, by its name in orca.yaml's `databases` (its own context_file, and its calls only)
    #[arg(long, value_name = "NAME")]
    database: Option<String>,

    /// Keep watching the file and print a line for every version that loads
    #[arg(long)]
    watch: bool,
}

#[derive(Debug, Args)]
pub(super) struct SuggestArgs {
    /// Start of the range: a duration back from now (24h, 7d), a date or an RFC 3339 time
    #[arg(long, value_name = "WHEN", default_value = "7d")]
    since: String,

    /// End of the range (exclusive), in the same forms [default: now]
    #[arg(long, value_name = "WHEN")]
    until: Option<String>,

    /// Write the patch to this file instead of stdout
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,

    /// The context file [default: the database's context_file, else $ORCA_CONTEXT_FILE, llm.context_file, else context/supabase-sql-context.md]
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,

    /// The database whose context file this is, by its name in orca.yaml's `databases` (its own context_file, and its calls only)
    #[arg(long, value_name = "NAME")]
    database: Option<String>,

    /// How many recent calls to learn from, at most
    #[arg(long, default_value_t = 100, value_name = "N")]
    limit: u32,

    /// anthropic, openai or google [default: llm.tools.context_suggest]
    #[arg(long, value_name = "PROVIDER")]
    llm_provider: Option<String>,

    /// The model [default: the provider's configured model]
    #[arg(long, value_name = "MODEL")]
    llm_model: Option<String>,

    /// Learn from the calls of `orca eval` runs too (left out by default)
    #[arg(long)]
    include_eval: bool,
}

/// The file a new context file starts from.
const TEMPLATE: &str = "# Supabase SQL Context Learning\n\n## Database Schema Overview\n\n## Successful Query Patterns\n\n## Common Error Patterns & Fixes\n\n## Query Optimization Insights\n\n## Model Performance Notes\n";

pub(super) async fn run(config: Config, command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Check(args) if args.watch => {
            watch(&file(&config, args.file, args.database.as_deref())?).await
        }
        ContextCommand::Check(args) => check(&file(&config, args.file, args.database.as_deref())?),
        ContextCommand::RefreshSchema(args) => {
            let path = file(&config, args.file, args.database.as_deref())?;
            refresh_schema(&config, &path, args.database.as_deref()).await
        }
        ContextCommand::Suggest(args) => suggest(&config, args).await,
    }
}

/// The context file a command works on: `--file`, else the `--database`'s own, else the
/// configured one.
fn file(
    config: &Config,
    explicit: Option<PathBuf>,
    database: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let own = match database {
        None => None,
        Some(name) if config.databases.is_empty() => {
            anyhow::bail!("--database {name}: orca.yaml lists no `databases`")
        }
        Some(name) => {
            let entry =
                config.databases.iter().find(|entry| entry.name == name).with_context(|| {
                    let names: Vec<&str> =
                        config.databases.iter().map(|entry| entry.name.as_str()).collect();
                    format!(
                        "--database: no database named `{name}`; the databases are: {}",
                        names.join(", ")
                    )
                })?;
            entry.context_file.clone()
        }
    };
    Ok(explicit.or(own).unwrap_or_else(|| config.llm.context_file.clone()))
}

fn check(path: &Path) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the context file {}", path.display()))?;
    let doc = context::parse(&text).with_context(|| format!("{} is malformed", path.display()))?;
    print(&format!("{}: ok\n{}", path.display(), doc.outline()));
    Ok(ExitCode::SUCCESS)
}

/// Print a line for every version of the file that loads, until Ctrl-C.
async fn watch(path: &Path) -> anyhow::Result<ExitCode> {
    let store = context::ContextStore::open(path.to_path_buf());
    let _watch = store.watch().with_context(|| format!("cannot watch {}", path.display()))?;
    let mut versions = store.subscribe();
    let report = |loaded: &context::LoadedContext| {
        format!(
            "{} version {}: {} entries (loaded at {})",
            loaded.path.display(),
            loaded.version,
            loaded.doc.entries().len(),
            loaded.loaded_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )
    };
    print(&report(&versions.borrow_and_update()));
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            changed = versions.changed() => {
                if changed.is_err() {
                    break;
                }
                let loaded = versions.borrow_and_update().clone();
                print(&report(&loaded));
            }
            () = &mut shutdown => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn refresh_schema(
    config: &Config,
    path: &Path,
    database: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let databases = Databases::open(config, true).await?;
    let outcome = async {
        let target = databases.target(database)?;
        let pool = crate::sql::connect_target(target.url.expose_secret(), config.database.size())?;
        let schema = crate::sql::introspect(&pool).await.context("cannot read the schema")?;
        pool.close().await;
        anyhow::Ok(schema)
    }
    .await;
    databases.close().await?;
    let schema = outcome?;
    let (lines, shown, _) =
        crate::servers::postgres::prompt::compact_schema(&schema, "", usize::MAX);
    let overview = format!(
        "_Generated by `orca context refresh-schema` from database `{}` at {}; edits between the markers are replaced on the next refresh._\n\n```text\n{}```",
        schema.database,
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        lines.trim_start_matches("## Schema\n\n"),
    );
    let current = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => TEMPLATE.to_owned(),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    };
    let updated = context::replace_schema_overview(&current, &overview);
    context::parse(&updated).with_context(|| {
        format!("{} would be malformed after the refresh; it was left as it is", path.display())
    })?;
    write_atomically(path, &updated)?;
    print(&format!("{}: schema overview of {shown} relations written", path.display()));
    Ok(ExitCode::SUCCESS)
}

/// Whether two paths name the same file (the second one exists).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Write through a temporary file in the same directory and a rename, so a reader (or the
/// hot reload) never sees half a file.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let directory = path.parent().filter(|parent| !parent.as_os_str().is_empty());
    if let Some(directory) = directory {
        std::fs::create_dir_all(directory)
            .with_context(|| format!("cannot create {}", directory.display()))?;
    }
    let name = path.file_name().context("the context file needs a file name")?;
    // A name of its own, created new (never through a link someone placed there).
    let temporary = path.with_file_name(format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    let written = (|| {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        if let Ok(metadata) = std::fs::metadata(path) {
            std::fs::set_permissions(&temporary, metadata.permissions())?;
        }
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("cannot replace {}", path.display()))
}

async fn suggest(config: &Config, args: SuggestArgs) -> anyhow::Result<ExitCode> {
    let range = ExportRange::parse(&args.since, args.until.as_deref(), chrono::Utc::now())?;
    let path = file(config, args.file, args.database.as_deref())?;
    let current = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the context file {}", path.display()))?;
    let doc =
        context::parse(&current).with_context(|| format!("{} is malformed", path.display()))?;

    let databases = Databases::open(config, false).await?;
    let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    let lessons = tracking::recent_lessons(
        &pool,
        range,
        i64::from(args.limit.max(1)),
        args.include_eval,
        args.database.as_deref(),
    )
    .await;
    pool.close().await;
    databases.close().await?;
    let lessons = lessons.context("cannot read the recent executions")?;
    if lessons.is_empty() {
        print(&format!(
            "nothing to learn from: no failed, retried or down-rated SQL calls between {} and {}",
            range.since.to_rfc3339(),
            range.until.to_rfc3339()
        ));
        return Ok(ExitCode::SUCCESS);
    }

    let intelligence = crate::servers::postgres::Intelligence {
        llm: Llm::new(config.llm.endpoints.clone(), config.llm.client.clone()),
        config: std::sync::Arc::new(config.llm.clone()),
        context: context::ContextStore::open(path.clone()),
    };
    let choice = intelligence
        .choose(
            LlmTool::ContextSuggest,
            args.llm_provider.as_deref(),
            args.llm_model.as_deref(),
            None,
        )
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    let lessons_json = serde_json::to_value(&lessons)?;
    let request = context::suggest::prompt(&lessons_json, &doc.titles());
    let completion = intelligence
        .ask(
            &choice,
            context::suggest::SUGGEST_SYSTEM_PROMPT.to_owned(),
            vec![Message { role: Role::User, content: request }],
            0.2,
            4_096,
        )
        .await
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    let additions = context::suggest::parse_answer(&completion.text)?;
    let proposed = context::suggest::apply(&current, &additions);
    if proposed == context::suggest::apply(&current, &context::suggest::Additions::default()) {
        print(&format!(
            "{} ({}) proposed nothing new from {} calls",
            choice.model,
            choice.provider,
            lessons.len()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    // The patch must leave a file that loads; otherwise the running orca would keep the old one.
    context::parse(&proposed).context(
        "the proposed additions would make the context file malformed; nothing was written",
    )?;
    // Relative to the working directory when the file is below it (`git apply` wants that),
    // else the file name; `patch FILE < PATCH` applies it either way.
    let shown = std::env::current_dir()
        .ok()
        .and_then(|directory| path.strip_prefix(&directory).ok().map(Path::to_path_buf))
        .filter(|_| path.is_absolute())
        .unwrap_or_else(|| {
            if path.is_absolute() {
                PathBuf::from(path.file_name().unwrap_or_default())
            } else {
                path.clone()
            }
        });
    let shown = shown.display().to_string().trim_start_matches("./").to_owned();
    let patch = similar::TextDiff::from_lines(&current, &proposed)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    match &args.out {
        Some(out) => {
            if same_file(out, &path) {
                anyhow::bail!(
                    "--out {} is the context file itself; suggest never changes it, write the patch elsewhere",
                    out.display()
                );
            }
            std::fs::write(out, &patch)
                .with_context(|| format!("cannot write {}", out.display()))?;
            print(&format!(
                "wrote {} ({} additions proposed by {} from {} calls); review it, then apply it with `patch {} < {}`",
                out.display(),
                additions.len(),
                choice.model,
                lessons.len(),
                path.display(),
                out.display()
            ));
        }
        None => print(patch.trim_end()),
    }
    Ok(ExitCode::SUCCESS)
}
