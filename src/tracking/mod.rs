//! Tracking: one execution record per tool call, its failures, and the feedback on it.
//!
//! Records leave the request path through a bounded channel to a background writer that
//! batches them into PostgreSQL. When the database is unreachable (or the channel is full),
//! records go to a JSONL spill file in `ORCA_HOME` and are replayed, without duplicates, when
//! the database is back. An orderly shutdown flushes everything. The tables are partitioned by
//! day (`partitions.rs`): made ahead, and dropped past `tracking.retention_days` once exported.
//!
//! # Design notes
//!
//! `Tracker` is a cheap handle around a bounded channel to a background `Writer`, which drains it
//! in batches into `orca.mcp_executions` and `orca.mcp_failures` (one `COPY ... FROM STDIN (FORMAT
//! binary)` per table per batch, in one transaction; the writer waits up to 100 ms to fill a batch
//! of up to `tracking.batch_size` records, looking at the queue every 5 ms rather than waking for
//! each record). Replays of the spill file use `INSERT ... SELECT FROM UNNEST(...) ON CONFLICT DO
//! NOTHING` instead, which skips records already stored; so does a fresh batch that meets a unique
//! violation.

mod copy;
mod export;
mod feedback;
mod journal;
mod lessons;
pub(crate) mod partitions;
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
    Execution, ExecutionStatus, Failure, Origin, Payload, Source, cut_response, cut_text,
    redact_object, redact_response, stored_response,
};
pub(crate) use store::{connect, migrate};

use journal::Journal;
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
    journal: Arc<Journal>,
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
        let journal_dir = spill_path.with_file_name("tracking-journal");
        let spill = Arc::new(Spill::new(spill_path));
        // What an earlier run wrote to its journal and did not live to store goes to the
        // spill file first, which the writer replays before anything else.
        let (journal, left) = Journal::open(journal_dir);
        recover(&spill, &left);
        let journal = Arc::new(journal);
        let stats = Arc::new(TrackingStats::default());
        stats.database_healthy.store(true, Ordering::Relaxed);
        let writer = Writer::new(
            pool.clone(),
            receiver,
            spill.clone(),
            journal.clone(),
            stats.clone(),
            config.clone(),
        );
        let handle = tokio::spawn(writer.run());
        tokio::spawn(maintain_partitions(pool, config.retention_days));
        Tracker {
            inner: Some(Arc::new(TrackerInner {
                sender,
                capacity: config.queue_capacity,
                spill,
                journal,
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
    ///
    /// The record is in the journal (on this machine's disk) when this returns, so a process
    /// killed before the writer stored it loses nothing: the next run replays it.
    pub(crate) fn record(&self, execution: Execution) {
        let Some(inner) = &self.inner else { return };
        let segment = match inner.journal.append(&execution) {
            Ok(segment) => Some(segment),
            Err(error) => {
                tracing::warn!("tracking record not journaled (it still goes on): {error}");
                None
            }
        };
        match inner.sender.try_send(Command::Record(Box::new(execution), segment)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Command::Record(execution, segment)))
            | Err(mpsc::error::TrySendError::Closed(Command::Record(execution, segment))) => {
                match inner.spill.append(std::slice::from_ref(&*execution)) {
                    Ok(()) => {
                        inner.stats.spilled_total.fetch_add(1, Ordering::Relaxed);
                        inner.journal.settle(segment);
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
        inner.journal.close();
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

/// How often the partitions are looked after while orca runs.
const MAINTENANCE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Create the coming days' partitions and drop those past the retention, at start and then
/// every hour, for as long as orca runs (a database that is down is tried at the next round;
/// a record of a missing day gets its partition when it is stored).
async fn maintain_partitions(pool: PgPool, retention_days: u32) {
    loop {
        if let Err(error) = partitions::maintain(&pool, retention_days, chrono::Utc::now()).await {
            tracing::debug!(%error, "tracking partitions not looked after this round");
        }
        tokio::time::sleep(MAINTENANCE_INTERVAL).await;
    }
}

/// Move the records of an earlier run's journal segments to the spill file (the writer replays
/// it at start; records already stored are skipped), then remove the segments.
fn recover(spill: &Spill, segments: &[std::path::PathBuf]) {
    for segment in segments {
        let records = match spill.read(segment) {
            Ok(records) => records,
            Err(error) => {
                tracing::error!(path = %segment.display(), "cannot read a tracking journal segment: {error}");
                continue;
            }
        };
        if !records.is_empty() {
            if let Err(error) = spill.append(&records) {
                tracing::error!(
                    "cannot move journaled tracking records to the spill file: {error}"
                );
                continue;
            }
            tracing::info!(
                records = records.len(),
                "tracking records of an earlier run found in the journal; replaying them"
            );
        }
        let _ = std::fs::remove_file(segment);
    }
}
