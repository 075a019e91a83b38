//! The background writer: drains the channel in batches into PostgreSQL, spills a batch to the
//! spill file when the database fails, and replays the spill file once the database is back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::TrackingStats;
use super::journal::Journal;
use super::record::Execution;
use super::spill::Spill;
use super::store::{insert_batch, store_batch};
use crate::config::TrackingConfig;

/// How long the writer waits for more records before writing a batch that is not full. Each
/// transaction costs the database about as much as a few dozen records, so a busy gateway
/// writes few large transactions rather than many small ones.
const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// How often the writer looks at the queue while it gathers a batch: it takes what arrived in
/// one go rather than waking up for every record.
const GATHER_TICK: std::time::Duration = std::time::Duration::from_millis(5);

#[derive(Debug)]
pub(super) enum Command {
    /// A record, and the journal segment to settle it in once it is stored or spilled.
    Record(Box<Execution>, Option<u64>),
    /// Acknowledge once every record sent before this one is stored or spilled.
    Flush(oneshot::Sender<()>),
    /// Flush, try a last replay, acknowledge and stop.
    Shutdown(oneshot::Sender<()>),
}

pub(super) struct Writer {
    pool: PgPool,
    receiver: mpsc::Receiver<Command>,
    spill: Arc<Spill>,
    journal: Arc<Journal>,
    stats: Arc<TrackingStats>,
    config: TrackingConfig,
    /// The journal segment of each record taken and not written yet, in the records' order
    /// (`None`: a record the journal could not take), settled once the record is written.
    segments: std::collections::VecDeque<Option<u64>>,
}

impl Writer {
    pub(super) fn new(
        pool: PgPool,
        receiver: mpsc::Receiver<Command>,
        spill: Arc<Spill>,
        journal: Arc<Journal>,
        stats: Arc<TrackingStats>,
        config: TrackingConfig,
    ) -> Writer {
        Writer { pool, receiver, spill, journal, stats, config, segments: Default::default() }
    }

    pub(super) async fn run(mut self) {
        self.replay().await;
        let mut batch: Vec<Execution> = Vec::with_capacity(self.config.batch_size);
        let mut replay_tick = tokio::time::interval(self.config.replay_interval);
        replay_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let command = tokio::select! {
                command = self.receiver.recv() => command,
                _ = replay_tick.tick() => {
                    if self.spill.pending() > 0 {
                        self.replay().await;
                    }
                    continue;
                }
            };
            let mut acks = Vec::new();
            let mut shutdown = None;
            match command {
                None => break,
                Some(command) => self.take(command, &mut batch, &mut acks, &mut shutdown),
            }
            self.gather(&mut batch, &mut acks, &mut shutdown).await;
            self.write(&mut batch).await;
            for ack in acks {
                let _ = ack.send(());
            }
            if let Some(ack) = shutdown {
                self.drain_and_stop(ack).await;
                return;
            }
        }
        // Every sender is gone: nothing more can arrive.
        self.write(&mut batch).await;
    }

    /// Gather up to one batch: what is waiting, then whatever arrives within [`LINGER`]. A
    /// flush or shutdown request ends the wait (within a [`GATHER_TICK`]).
    async fn gather(
        &mut self,
        batch: &mut Vec<Execution>,
        acks: &mut Vec<oneshot::Sender<()>>,
        shutdown: &mut Option<oneshot::Sender<()>>,
    ) {
        let linger_until = tokio::time::Instant::now() + LINGER;
        let mut commands = Vec::new();
        while batch.len() < self.config.batch_size && shutdown.is_none() && acks.is_empty() {
            if self.receiver.is_empty() {
                let now = tokio::time::Instant::now();
                if now >= linger_until || self.receiver.is_closed() {
                    return;
                }
                tokio::time::sleep_until(linger_until.min(now + GATHER_TICK)).await;
                continue;
            }
            let room = self.config.batch_size - batch.len();
            if self.receiver.recv_many(&mut commands, room).await == 0 {
                return;
            }
            for command in commands.drain(..) {
                self.take(command, batch, acks, shutdown);
            }
        }
    }

    fn take(
        &mut self,
        command: Command,
        batch: &mut Vec<Execution>,
        acks: &mut Vec<oneshot::Sender<()>>,
        shutdown: &mut Option<oneshot::Sender<()>>,
    ) {
        match command {
            Command::Record(execution, segment) => {
                batch.push(*execution);
                self.segments.push_back(segment);
            }
            Command::Flush(ack) => acks.push(ack),
            Command::Shutdown(ack) => *shutdown = Some(ack),
        }
    }

    async fn drain_and_stop(mut self, ack: oneshot::Sender<()>) {
        self.receiver.close();
        let mut batch = Vec::new();
        while let Ok(command) = self.receiver.try_recv() {
            match command {
                Command::Record(execution, segment) => {
                    batch.push(*execution);
                    self.segments.push_back(segment);
                }
                Command::Flush(other) | Command::Shutdown(other) => {
                    let _ = other.send(());
                }
            }
        }
        for chunk in batch.chunks(self.config.batch_size.max(1)) {
            let mut chunk = chunk.to_vec();
            self.write(&mut chunk).await;
        }
        if self.spill.pending() > 0 {
            self.replay().await;
        }
        let _ = ack.send(());
    }

    /// Store a batch, or spill it when the database is unhealthy or the insert fails.
    async fn write(&mut self, batch: &mut Vec<Execution>) {
        if batch.is_empty() {
            return;
        }
        let started = std::time::SystemTime::now();
        let healthy = self.stats.database_healthy.load(Ordering::Relaxed);
        let stored = healthy && self.try_insert(batch).await;
        trace_write(batch, started, stored);
        let kept = if stored {
            self.stats.written_total.fetch_add(batch.len() as u64, Ordering::Relaxed);
            true
        } else {
            match self.spill.append(batch) {
                Ok(()) => {
                    self.stats.spilled_total.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    true
                }
                Err(error) => {
                    tracing::error!(
                        records = batch.len(),
                        "tracking records not written: cannot write the spill file (they stay in the journal): {error}"
                    );
                    false
                }
            }
        };
        // Stored or spilled, the batch's records are settled in the journal; records that
        // could be neither stay there for the next run.
        let taken: Vec<Option<u64>> =
            self.segments.drain(..batch.len().min(self.segments.len())).collect();
        if kept {
            self.journal.settle(taken.into_iter().flatten());
        }
        batch.clear();
    }

    async fn try_insert(&self, batch: &[Execution]) -> bool {
        match store_batch(&self.pool, batch).await {
            Ok(()) => true,
            Err(error) => {
                if self.stats.database_healthy.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        "tracking database unavailable, spilling records to disk: {}",
                        describe(&error)
                    );
                }
                false
            }
        }
    }

    /// Replay spilled records; on success the database is marked healthy again.
    async fn replay(&self) {
        loop {
            let path = match self.spill.take_for_replay() {
                Ok(Some(path)) => path,
                Ok(None) => {
                    self.mark_healthy_if_reachable().await;
                    return;
                }
                Err(error) => {
                    tracing::error!("cannot open the tracking spill file: {error}");
                    return;
                }
            };
            let executions = match self.spill.read(&path) {
                Ok(executions) => executions,
                Err(error) => {
                    tracing::error!("cannot read the tracking spill file: {error}");
                    return;
                }
            };
            for chunk in executions.chunks(self.config.batch_size.max(1)) {
                if let Err(error) = insert_batch(&self.pool, chunk).await {
                    self.stats.database_healthy.store(false, Ordering::Relaxed);
                    tracing::debug!("tracking replay postponed: {}", describe(&error));
                    return;
                }
            }
            if let Err(error) = self.spill.finish_replay(&path, executions.len()) {
                tracing::error!("cannot remove the replayed spill file: {error}");
                return;
            }
            self.stats.replayed_total.fetch_add(executions.len() as u64, Ordering::Relaxed);
            if !self.stats.database_healthy.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    records = executions.len(),
                    "tracking database back, spilled records replayed"
                );
            }
        }
    }

    async fn mark_healthy_if_reachable(&self) {
        if self.stats.database_healthy.load(Ordering::Relaxed) {
            return;
        }
        if sqlx::query("SELECT 1").execute(&self.pool).await.is_ok() {
            self.stats.database_healthy.store(true, Ordering::Relaxed);
            tracing::info!("tracking database reachable again");
        }
    }
}

/// A database error without connection details.
/// Tracking's write as a child span of each traced call in the batch (one `COPY` writes
/// several calls, so each gets a span of the same write, with the batch's size).
fn trace_write(batch: &[Execution], started: std::time::SystemTime, stored: bool) {
    use opentelemetry::KeyValue;
    let size = i64::try_from(batch.len()).unwrap_or(i64::MAX);
    for parent in batch.iter().filter_map(|execution| execution.span.as_ref()) {
        let mut attributes = crate::telemetry::statement_attributes("COPY", "COPY mcp_executions");
        attributes.push(KeyValue::new("db.operation.batch.size", size));
        attributes.push(KeyValue::new(
            "orca.tracking.outcome",
            if stored { "stored" } else { "spilled" },
        ));
        let failure =
            (!stored).then_some("the tracking database did not take the batch; it was spilled");
        crate::telemetry::finished_child(parent, "tracking write", started, attributes, failure);
    }
}

fn describe(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(database) => database.message().to_owned(),
        sqlx::Error::PoolTimedOut => "timed out waiting for a connection".to_owned(),
        sqlx::Error::Io(io) => io.kind().to_string(),
        other => other.to_string(),
    }
}
