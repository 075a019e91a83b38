//! `orca eval QUESTIONS`: execution accuracy of `generate_sql` on a question set, on the
//! configured database (the embedded Chinook one by default) and context file. A thin sequence:
//! check the arguments and the question file (before any model is called), open the databases
//! and tracking, run the set (twice with `--compare`) with progress on stderr, then print the
//! report and write its files.
//!
//! # Design notes
//!
//! `cli/eval.rs` holds `orca eval`: it checks the arguments and the question file, builds a
//! `PostgresServer` on the target database with the context file read once, runs the set (twice
//! with `--compare`) with progress on stderr, and prints or writes the report.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context as _;
use clap::Args;
use secrecy::ExposeSecret;

use super::databases::Databases;
use super::output::{print, print_error, progress};
use crate::config::{Config, LlmTool};
use crate::eval::{self, Comparison, Item, Outcome, Report, Runner};
use crate::llm::Llm;
use crate::servers::postgres::{Intelligence, PostgresServer};
use crate::tracking::{self, Tracker};

pub(super) const LONG_ABOUT: &str = "\
Measure how often generate_sql is right on a question set: each question goes through \
generate_sql (prompt, context selection, validation, retries), the generated SQL and the gold \
SQL run read-only, and the two results are compared (rows as multisets unless order_matters or \
the gold SQL has a top-level ORDER BY; column names ignored, columns in order or permuted; \
numbers within a relative 1e-6; NULL equals NULL; timestamps as instants).

The question file is YAML (a list) or JSON Lines of {id, question, gold_sql, tags?, \
order_matters?}; orca ships one for Chinook in context/eval/chinook.yaml. The database is \
the one --database names among orca.yaml's `databases` (optional when there is one), else \
DATABASE_URL (the embedded Chinook database by default); the context file is that database's \
own, else the configured one (or --context-file). Calls are recorded with the source `eval`, which export-feedback and \
`context suggest` leave out unless given --include-eval.

Exit status: 0 when the run completed (whatever the accuracy), 1 when --min-accuracy is not \
reached, 2 for usage and question-file errors.

Examples:
  orca eval context/eval/chinook.yaml
  orca eval context/eval/chinook.yaml --compare --out eval-report
  orca eval questions.jsonl --provider openai --model gpt-4o-mini --json
  orca eval context/eval/chinook.yaml --min-accuracy 0.8   (in CI, guarding a context file)
  orca eval films.yaml --database films                    (one of several databases)";

#[derive(Debug, Args)]
pub(super) struct EvalArgs {
    /// The question file: YAML (a list) or JSON Lines of {id, question, gold_sql, tags?, order_matters?}
    #[arg(value_name = "QUESTIONS")]
    questions: PathBuf,

    /// anthropic, openai or google [default: the configured default for generate_sql]
    #[arg(long, value_name = "PROVIDER")]
    provider: Option<String>,

    /// The model [default: the provider's configured model]
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,

    /// Run the set twice, with and without the context file, and report the lift
    #[arg(long)]
    compare: bool,

    /// Model answers per question, 1 to 10 (as generate_sql's max_retries)
    #[arg(long, default_value_t = 3, value_name = "N")]
    max_retries: u32,

    /// Questions in flight at once, 1 to 32
    #[arg(long, default_value_t = 4, value_name = "N")]
    concurrency: usize,

    /// Print the report as JSON on stdout instead of the table
    #[arg(long)]
    json: bool,

    /// Write report.json, report.md and accuracy.png into this directory (created if missing)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Exit with status 1 when the accuracy (with the context, under --compare) is below this fraction (0.8 for 80%)
    #[arg(long, value_name = "X")]
    min_accuracy: Option<f64>,

    /// The context file to measure [default: the database's context_file, else $ORCA_CONTEXT_FILE, llm.context_file, else context/supabase-sql-context.md]
    #[arg(long, value_name = "FILE")]
    context_file: Option<PathBuf>,

    /// The database to ask about, by its name in orca.yaml's `databases` [default: the only one]
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

/// A usage or question-file error: said on stderr, exit status 2.
fn usage_error(message: &str) -> ExitCode {
    print_error(&format!("error: {message}"));
    ExitCode::from(2)
}

pub(super) async fn run(config: Config, args: EvalArgs) -> anyhow::Result<ExitCode> {
    if !(1..=10).contains(&args.max_retries) {
        return Ok(usage_error("--max-retries must be between 1 and 10"));
    }
    if !(1..=32).contains(&args.concurrency) {
        return Ok(usage_error("--concurrency must be between 1 and 32"));
    }
    if let Some(minimum) = args.min_accuracy
        && !(0.0..=1.0).contains(&minimum)
    {
        return Ok(usage_error("--min-accuracy is a fraction between 0 and 1 (0.8 for 80%)"));
    }
    let questions = match eval::load(&args.questions) {
        Ok(questions) => questions,
        Err(error) => return Ok(usage_error(&error.to_string())),
    };
    let own_context = args.database.as_deref().and_then(|name| {
        config.databases.iter().find(|database| database.name == name)?.context_file.clone()
    });
    let context_file = args
        .context_file
        .clone()
        .or(own_context)
        .unwrap_or_else(|| config.llm.context_file.clone());
    if args.context_file.is_some() && !context_file.is_file() {
        return Ok(usage_error(&format!(
            "--context-file {} is not a file",
            context_file.display()
        )));
    }
    // On the embedded Chinook database, start from the shipped context file as `serve` does.
    let embedded = config.state_database_url.is_none()
        && config.database_url.is_none()
        && config.databases.is_empty();
    if embedded && args.context_file.is_none() {
        super::seed_chinook_context(&context_file);
    }
    let intelligence = Intelligence {
        llm: Llm::new(config.llm.endpoints.clone(), config.llm.client.clone()),
        config: std::sync::Arc::new(config.llm.clone()),
        context: crate::context::ContextStore::open(context_file.clone()),
    };
    // A provider or model that cannot be used is a usage error, found before any question runs.
    let choice = match intelligence.choose(
        LlmTool::GenerateSql,
        args.provider.as_deref(),
        args.model.as_deref(),
        None,
    ) {
        Ok(choice) => choice,
        Err(error) => {
            let hint = error.hint.map(|hint| format!(" ({hint})")).unwrap_or_default();
            return Ok(usage_error(&format!("{}{hint}", error.message)));
        }
    };

    let databases = Databases::open(&config, true).await?;
    let outcome = async {
        let target = databases.target(args.database.as_deref())?;
        if !context_file.is_file() {
            tracing::warn!(
                "the context file {} does not exist: every question runs without context",
                context_file.display()
            );
        }
        let state_pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
        tracking::migrate(&state_pool).await?;
        let tracker = if config.tracking.enabled {
            Tracker::start(state_pool.clone(), &config.tracking, config.spill_file())
        } else {
            Tracker::disabled()
        };
        // The question set measures the context file chosen above.
        let mut target = target.clone();
        if let Some(entry) = target.config.as_mut() {
            entry.context_file = None;
        }
        let (targets, _watches) = super::databases::connect_targets(
            &config,
            std::slice::from_ref(&target),
            &intelligence.context,
        )?;
        let secret = crate::sql::Secret::load(config.secret.as_ref(), &config.home)?;
        let server = PostgresServer::new(targets.clone(), state_pool.clone(), secret, intelligence);
        let runner = Runner {
            server,
            tracker: tracker.clone(),
            principal: config.auth.stdio.clone(),
            provider: args.provider.clone(),
            model: args.model.clone(),
            max_retries: args.max_retries,
            concurrency: args.concurrency,
            max_response_bytes: config.tracking.max_response_bytes,
            run_id: uuid::Uuid::now_v7(),
        };
        let measured =
            measure(&runner, &questions, &args, choice.provider.as_str(), &choice.model).await;
        tracker.shutdown().await;
        for database in targets.iter() {
            database.target.pool.close().await;
        }
        state_pool.close().await;
        anyhow::Ok(measured)
    }
    .await;
    databases.close().await?;
    let measured = outcome?;
    report(&args, &measured)
}

/// The result of `orca eval`: one run, or the two of `--compare`.
enum Measured {
    One(Report),
    Two(Box<Comparison>),
}

async fn measure(
    runner: &Runner,
    questions: &[eval::Question],
    args: &EvalArgs,
    provider: &str,
    model: &str,
) -> Measured {
    let golds = runner.gold_results(questions).await;
    let gold_errors = golds.iter().filter(|gold| gold.is_err()).count();
    if gold_errors > 0 {
        tracing::warn!(
            "{gold_errors} question(s) have a gold SQL that is not a read or fails; they do not count"
        );
    }
    let mut reports = Vec::new();
    let passes: &[bool] = if args.compare { &[true, false] } else { &[true] };
    for &use_context in passes {
        let label = match (args.compare, use_context) {
            (false, _) => "eval",
            (true, true) => "with context",
            (true, false) => "without context",
        };
        let progress = Progress::new(label, questions.len());
        let items = runner.run(questions, &golds, use_context, &|item| progress.done(item)).await;
        progress.finish();
        reports.push(Report::new(items, provider, model, use_context));
    }
    match (reports.pop(), reports.pop()) {
        (Some(without), Some(with)) => Measured::Two(Box::new(Comparison::new(with, without))),
        (Some(only), None) => Measured::One(only),
        _ => unreachable!("at least one pass ran"),
    }
}

fn report(args: &EvalArgs, measured: &Measured) -> anyhow::Result<ExitCode> {
    let (json, markdown, checked) = match measured {
        Measured::One(report) => (serde_json::to_value(report)?, report.markdown(), report),
        Measured::Two(comparison) => {
            (serde_json::to_value(comparison)?, comparison.markdown(), &comparison.with_context)
        }
    };
    if let Some(out) = &args.out {
        write_files(out, &json, &markdown, measured)?;
    }
    if args.json {
        print(&serde_json::to_string_pretty(&json)?);
    } else {
        print(markdown.trim_end());
        if let Some(out) = &args.out {
            print(&format!(
                "\nwrote report.json, report.md and accuracy.png into {}",
                out.display()
            ));
        }
    }
    if let Some(minimum) = args.min_accuracy
        && checked.accuracy < minimum
    {
        print_error(&format!(
            "accuracy {} is below --min-accuracy {}",
            eval::percent(checked.accuracy),
            eval::percent(minimum)
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_files(
    out: &Path,
    json: &serde_json::Value,
    markdown: &str,
    measured: &Measured,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write("report.json", serde_json::to_string_pretty(json)?.as_bytes())?;
    write("report.md", format!("# orca eval\n\n{markdown}").as_bytes())?;
    let png = match measured {
        Measured::One(report) => eval::accuracy_chart(report, None),
        Measured::Two(comparison) => {
            eval::accuracy_chart(&comparison.with_context, Some(&comparison.without_context))
        }
    };
    let png = png.map_err(|reason| anyhow::anyhow!("cannot draw accuracy.png: {reason}"))?;
    write("accuracy.png", &png)
}

/// Progress on stderr: a bar redrawn in place on a terminal, one line per question otherwise.
struct Progress {
    label: &'static str,
    total: usize,
    done: AtomicUsize,
    correct: AtomicUsize,
    terminal: bool,
}

impl Progress {
    fn new(label: &'static str, total: usize) -> Progress {
        Progress {
            label,
            total,
            done: AtomicUsize::new(0),
            correct: AtomicUsize::new(0),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn done(&self, item: &Item) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let correct = self
            .correct
            .fetch_add(usize::from(item.outcome == Outcome::Correct), Ordering::Relaxed)
            + usize::from(item.outcome == Outcome::Correct);
        if self.terminal {
            const WIDTH: usize = 30;
            let filled = done * WIDTH / self.total.max(1);
            progress(
                &format!(
                    "\r{} [{}{}] {done}/{} questions, {correct} correct ",
                    self.label,
                    "#".repeat(filled),
                    "-".repeat(WIDTH - filled),
                    self.total
                ),
                false,
            );
        } else {
            progress(
                &format!(
                    "{} {done}/{} {}: {} (attempts {})",
                    self.label,
                    self.total,
                    item.id,
                    item.outcome.as_str(),
                    item.attempts
                ),
                true,
            );
        }
    }

    fn finish(&self) {
        if self.terminal {
            progress("", true);
        }
    }
}
