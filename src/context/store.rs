//! The context file in memory: loaded at start, and swapped in whole when the file changes on
//! disk (through a watch channel; a file that cannot be read or parsed keeps the previous
//! version and logs why). Cheap to clone and shared by every task that builds prompts.
//!
//! The watcher watches the file's parent directory, not the file: editors and
//! `orca context refresh-schema` replace the file by renaming a temporary one over it, which
//! would silently end a watch on the file itself.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;

use super::parse::{ContextDoc, parse};
use super::syntax::{ParseError, Section};

/// How long the file must stay quiet before it is reread. Short: a saved change must reach the
/// next call within 500 ms, and an editor's save is a burst of events well inside this.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// The longest a reload waits after the first event of a burst.
const MAX_DELAY: Duration = Duration::from_millis(400);

/// One successfully loaded version of the context file.
#[derive(Debug)]
pub(crate) struct LoadedContext {
    pub(crate) doc: ContextDoc,
    /// 0 for what was loaded at start (possibly an empty document), then one more for every
    /// reload that changed the document.
    pub(crate) version: u64,
    pub(crate) loaded_at: chrono::DateTime<chrono::Utc>,
    pub(crate) path: PathBuf,
    /// The first 16 hex digits of the SHA-256 of the text it was parsed from (of nothing for
    /// the empty document): the same on every replica that serves the same file.
    pub(crate) digest: String,
}

/// [`LoadedContext::digest`] of `text`.
fn digest(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..8])
}

/// Why the context file could not be reloaded; the previous version stays in use.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    #[error("cannot read the context file {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("the context file {} cannot be used: {error}", path.display())]
    Parse { path: PathBuf, error: ParseError },
}

/// The shared, hot-reloaded context file. Clones share one state.
#[derive(Debug, Clone)]
pub(crate) struct ContextStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    current: watch::Sender<Arc<LoadedContext>>,
    /// Serialises reloads, so an older read never replaces a newer one.
    reloading: Mutex<()>,
}

/// A running watch of the context file; dropping it stops the watching.
#[derive(Debug)]
pub(crate) struct ContextWatch {
    _watcher: RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Drop for ContextWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ContextStore {
    /// Load the context file at `path` now. A missing or malformed file is not fatal: the
    /// store starts with an empty document (version 0) and a warning is logged.
    pub(crate) fn open(path: PathBuf) -> ContextStore {
        let (doc, text) = match std::fs::read_to_string(&path) {
            Ok(text) => match parse(&text) {
                Ok(doc) => {
                    log_loaded(&path, 0, &doc);
                    (doc, text)
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "the context file cannot be used; starting with an empty context");
                    (ContextDoc::default(), String::new())
                }
            },
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the context file; starting with an empty context");
                (ContextDoc::default(), String::new())
            }
        };
        let loaded = LoadedContext {
            doc,
            version: 0,
            loaded_at: chrono::Utc::now(),
            path: path.clone(),
            digest: digest(&text),
        };
        ContextStore {
            shared: Arc::new(Shared {
                path,
                current: watch::Sender::new(Arc::new(loaded)),
                reloading: Mutex::new(()),
            }),
        }
    }

    /// The path of the context file.
    pub(crate) fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The version in use now.
    pub(crate) fn current(&self) -> Arc<LoadedContext> {
        self.shared.current.borrow().clone()
    }

    /// A receiver that sees every version swapped in from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<LoadedContext>> {
        self.shared.current.subscribe()
    }

    /// Reread and reparse the file now, and swap it in if it changed; returns the version in
    /// use afterwards (the same one when the file's document did not change).
    ///
    /// # Errors
    ///
    /// The file cannot be read or does not parse; the previous version stays in use.
    pub(crate) async fn reload_now(&self) -> Result<Arc<LoadedContext>, ReloadError> {
        let _reloading = self.shared.reloading.lock().await;
        let path = &self.shared.path;
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|error| ReloadError::Read { path: path.clone(), error })?;
        let doc = parse(&text).map_err(|error| ReloadError::Parse { path: path.clone(), error })?;
        let mut swapped = false;
        self.shared.current.send_if_modified(|current| {
            if current.doc == doc {
                return false;
            }
            *current = Arc::new(LoadedContext {
                doc,
                version: current.version + 1,
                loaded_at: chrono::Utc::now(),
                path: path.clone(),
                digest: digest(&text),
            });
            swapped = true;
            true
        });
        let current = self.current();
        if swapped {
            log_loaded(path, current.version, &current.doc);
        } else {
            tracing::debug!(path = %path.display(), version = current.version, "the context file is unchanged");
        }
        Ok(current)
    }

    /// Watch the file: every change (written in place, or renamed over it) is reread after
    /// [`DEBOUNCE`] of quiet and swapped in; a file that cannot be read or parsed keeps the
    /// previous version and logs a warning. Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// The parent directory cannot be watched (it does not exist, or the system's watch limit
    /// is reached), the path has no file name, or there is no tokio runtime.
    pub(crate) fn watch(&self) -> Result<ContextWatch, notify::Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            notify::Error::generic("watching the context file needs a tokio runtime")
        })?;
        let path = &self.shared.path;
        let Some(file_name) = path.file_name().map(OsStr::to_owned) else {
            return Err(notify::Error::generic("the context file path has no file name"));
        };
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        // The callback runs on notify's thread: it only forwards, never blocks.
        let (events, mut received) = mpsc::unbounded_channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                match event {
                    Ok(event) if concerns(&event, &file_name) => {
                        // The task is gone only when the watch is being dropped.
                        let _ = events.send(());
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "watching the context file failed"),
                }
            })?;
        watcher.watch(&directory, RecursiveMode::NonRecursive)?;
        tracing::debug!(path = %path.display(), "watching the context file");
        let store = self.clone();
        let task = runtime.spawn(async move {
            // A save made between the first read and the watch starting is read now.
            if let Err(error) = store.reload_now().await {
                tracing::debug!(%error, "the context file is not readable yet");
            }
            while received.recv().await.is_some() {
                // Quiet for DEBOUNCE, or at most MAX_DELAY after the first event, whichever
                // comes first: a writer that never pauses still gets its saves read.
                let deadline = tokio::time::Instant::now() + MAX_DELAY;
                loop {
                    let wait = DEBOUNCE
                        .min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                    match tokio::time::timeout(wait, received.recv()).await {
                        Ok(Some(())) if tokio::time::Instant::now() < deadline => {}
                        Ok(Some(())) => break,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
                if let Err(error) = store.reload_now().await {
                    let version = store.current().version;
                    tracing::warn!(%error, version, "keeping the previous context file");
                }
            }
        });
        Ok(ContextWatch { _watcher: watcher, task })
    }
}

/// Whether a notify event may have changed the file named `file_name`: any creation,
/// modification or removal naming it (a rename names both sides), a write being closed, or a
/// request to rescan. Opening and reading it (including our own reads) is not a change.
fn concerns(event: &notify::Event, file_name: &OsString) -> bool {
    if event.need_rescan() {
        return true;
    }
    let changes = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    changes && event.paths.iter().any(|path| path.file_name() == Some(file_name.as_os_str()))
}

/// Log a version that was swapped in, with its entry counts.
fn log_loaded(path: &Path, version: u64, doc: &ContextDoc) {
    let count = |section: Section| doc.entries_in(&section).count();
    tracing::info!(
        path = %path.display(),
        version,
        query_patterns = count(Section::QueryPatterns),
        error_fixes = count(Section::ErrorFixes),
        optimization_insights = count(Section::OptimizationInsights),
        model_notes = count(Section::ModelNotes),
        schema_overview = doc.schema_overview().is_some(),
        "loaded the context file"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid context file with one query pattern titled `title`.
    fn file_with(title: &str) -> String {
        format!("# Context\n\n## Successful Query Patterns\n### {title}\n```sql\nSELECT 1;\n```\n")
    }

    fn has_entry(loaded: &LoadedContext, title: &str) -> bool {
        loaded.doc.entries().iter().any(|entry| entry.title() == title)
    }

    /// Poll (up to 5 s) until the store holds a version newer than `after` with the entry
    /// `title`; returns that version.
    async fn wait_for(store: &ContextStore, after: u64, title: &str) -> u64 {
        for _ in 0..250 {
            let loaded = store.current();
            if loaded.version > after && has_entry(&loaded, title) {
                return loaded.version;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let loaded = store.current();
        panic!(
            "no version after {after} with {title:?}: version {}, {:?}",
            loaded.version, loaded.doc
        );
    }

    #[tokio::test]
    async fn saved_changes_are_swapped_in_and_malformed_ones_keep_the_previous_version() {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("supabase-sql-context.md");
        std::fs::write(&path, file_with("First")).expect("write");
        let store = ContextStore::open(path.clone());
        assert_eq!(store.current().version, 0);
        assert!(has_entry(&store.current(), "First"));
        assert_eq!(store.current().path, path);
        let watch = store.watch().expect("watch the directory");

        // Written in place.
        std::fs::write(&path, file_with("Second")).expect("write");
        let version = wait_for(&store, 0, "Second").await;

        // Written to a temporary file and renamed over it, as editors do.
        let temporary = directory.path().join(".supabase-sql-context.md.tmp");
        std::fs::write(&temporary, file_with("Third")).expect("write");
        std::fs::rename(&temporary, &path).expect("rename");
        let version = wait_for(&store, version, "Third").await;

        // Other files in the directory are not the context file.
        std::fs::write(directory.path().join("other.md"), "# Other\n").expect("write");

        // Malformed (an editor mid-save): the previous version stays.
        std::fs::write(&path, "").expect("write");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(store.current().version, version);
        assert!(has_entry(&store.current(), "Third"));

        // The watch survives the error.
        std::fs::write(&path, file_with("Fourth")).expect("write");
        let version = wait_for(&store, version, "Fourth").await;

        // Dropping the watch stops it.
        drop(watch);
        std::fs::write(&path, file_with("Fifth")).expect("write");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(store.current().version, version);
        assert!(has_entry(&store.current(), "Fourth"));
    }

    #[tokio::test]
    async fn a_missing_or_malformed_file_at_start_gives_an_empty_context_until_reloaded() {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("context.md");
        // (content at start, or None for no file; what reload_now then says)
        let cases: &[(Option<&str>, String)] = &[
            (None, format!("cannot read the context file {}: ", path.display())),
            (
                Some("   \n"),
                format!(
                    "the context file {} cannot be used: the context file is empty (an editor may be in the middle of saving it)",
                    path.display()
                ),
            ),
            (
                Some("# Only a title\n"),
                format!(
                    "the context file {} cannot be used: the context file has no known section",
                    path.display()
                ),
            ),
            (
                Some("## Database Schema Overview\n<!-- orca:schema:start -->\n"),
                format!(
                    "the context file {} cannot be used: line 2: `<!-- orca:schema:start -->`",
                    path.display()
                ),
            ),
        ];
        for (content, message) in cases {
            match content {
                Some(content) => std::fs::write(&path, content).expect("write"),
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
            let store = ContextStore::open(path.clone());
            assert_eq!(store.current().version, 0, "{content:?}");
            assert_eq!(store.current().doc, ContextDoc::default(), "{content:?}");
            let error =
                store.reload_now().await.err().map(|error| error.to_string()).unwrap_or_default();
            assert!(error.starts_with(message), "{content:?}: {error}");
            assert_eq!(store.current().version, 0, "{content:?}");
        }

        let store = ContextStore::open(path.clone());
        std::fs::write(&path, file_with("Loaded")).expect("write");
        let mut changes = store.subscribe();
        let loaded = store.reload_now().await.expect("reload");
        assert_eq!(loaded.version, 1);
        assert!(has_entry(&loaded, "Loaded"));
        assert!(changes.has_changed().unwrap_or(false));
        assert_eq!(changes.borrow_and_update().version, 1);

        // An unchanged file is not a new version.
        let again = store.reload_now().await.expect("reload");
        assert_eq!(again.version, 1);
        assert!(!changes.has_changed().unwrap_or(true));
        assert_eq!(store.path(), path);
    }

    #[test]
    fn watching_outside_a_runtime_is_an_error_not_a_panic() {
        let store = ContextStore::open(PathBuf::from("missing-context.md"));
        assert!(store.watch().is_err());
    }
}
