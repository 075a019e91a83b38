//! Tracking: one execution record per tool call, its failures, and the feedback on it.
//!
//! Records leave the request path through a bounded channel to a background writer that
//! batches them into PostgreSQL. When the database is unreachable (or the channel is full),
//! records go to a JSONL spill file in `ORCA_HOME` and are replayed, without duplicates, when
//! the database is back. An orderly shutdown flushes everything.

mod copy;
mod export;
mod feedback;
mod lessons;
mod recent;
mod record;
mod spill;
mod store;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use crate::config::TrackingConfig;

pub(crate) use export::{ExportRange, export};
pub(crate) use feedback::{FeedbackError, FeedbackInput, submit_feedback};
pub(crate) use lessons::recent_lessons;
pub(crate) use recent::{MAX_RECENT, recent_executions};
pub(crate) use record::{
    Execution, ExecutionStatus, Failure, Origin, Source, cut_response, cut_text, redact_object,
    redact_response, stored_response,
};
pub(crate) use store::{connect, migrate};

use spill::Spill;
use writer::{Command, Writer};

/// Counters that `/metrics` and `list_servers` read.
#[derive(Debug, Default)]
pub(crate) struct TrackingStats {
    /// Records written to the spill file since start.
    pub(crate) spilled_total: AtomicU64,
    /// Records replayed from the spill file into the database since start.
    pub(crate) replayed_total: AtomicU64,
    /// Records written to the database since start.
    pub(crate) written_total: AtomicU64,
    /// Whether the last database write succeeded.
    pub(crate) database_healthy: AtomicBool,
}

/// A cheap handle to the tracking pipeline. Recording never fails a tool call and never waits
/// for the database.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    inner: Option<Arc<TrackerInner>>,
}

#[derive(Debug)]
struct TrackerInner {
    sender: mpsc::Sender<Command>,
    capacity: usize,
    spill: Arc<Spill>,
    stats: Arc<TrackingStats>,
    writer: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Tracker {
    /// Start the background writer. Leftover spilled records from an earlier run are replayed
    /// first.
    pub(crate) fn start(
        pool: PgPool,
        config: &TrackingConfig,
        spill_path: std::path::PathBuf,
    ) -> Tracker {
        if !config.enabled {
            return Tracker { inner: None };
        }
        let (sender, receiver) = mpsc::channel(config.queue_capacity);
        let spill = Arc::new(Spill::new(spill_path));
        let stats = Arc::new(TrackingStats::default());
        stats.database_healthy.store(true, Ordering::Relaxed);
        let writer = Writer::new(pool, receiver, spill.clone(), stats.clone(), config.clone());
        let handle = tokio::spawn(writer.run());
        Tracker {
            inner: Some(Arc::new(TrackerInner {
                sender,
                capacity: config.queue_capacity,
                spill,
                stats,
                writer: std::sync::Mutex::new(Some(handle)),
            })),
        }
    }

    /// A tracker that records nothing (`tracking.enabled: false`).
    pub(crate) fn disabled() -> Tracker {
        Tracker { inner: None }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Hand a record to the writer. When the queue is full or the writer has stopped, the
    /// record goes straight to the spill file, so it is never dropped.
    pub(crate) fn record(&self, execution: Execution) {
        let Some(inner) = &self.inner else { return };
        match inner.sender.try_send(Command::Record(Box::new(execution))) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Command::Record(execution)))
            | Err(mpsc::error::TrySendError::Closed(Command::Record(execution))) => {
                match inner.spill.append(std::slice::from_ref(&*execution)) {
                    Ok(()) => {
                        inner.stats.spilled_total.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => tracing::error!(
                        "tracking record lost: cannot write the spill file: {error}"
                    ),
                }
            }
            Err(_) => {}
        }
    }

    /// Wait until everything recorded so far has been written to the database or spilled.
    pub(crate) async fn flush(&self) {
        let Some(inner) = &self.inner else { return };
        let (ack, done) = oneshot::channel();
        if inner.sender.send(Command::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Flush, replay the spill file if the database is reachable, and stop the writer.
    pub(crate) async fn shutdown(&self) {
        let Some(inner) = &self.inner else { return };
        let (ack, done) = oneshot::channel();
        if inner.sender.send(Command::Shutdown(ack)).await.is_ok() {
            let _ = done.await;
        }
        let handle = inner.writer.lock().ok().and_then(|mut slot| slot.take());
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }

    /// Records waiting in the channel.
    pub(crate) fn queue_depth(&self) -> usize {
        self.inner.as_ref().map_or(0, |inner| inner.capacity - inner.sender.capacity())
    }

    pub(crate) fn stats(&self) -> Option<&TrackingStats> {
        self.inner.as_ref().map(|inner| &*inner.stats)
    }

    /// Records in the spill file still waiting for the database.
    pub(crate) fn spill_pending(&self) -> u64 {
        self.inner.as_ref().map_or(0, |inner| inner.spill.pending())
    }
}
