//! The spill file: JSONL records that could not reach the database, kept until they can.
//!
//! New records are appended to `tracking-spill.jsonl`. A replay first renames that file to
//! `tracking-spill.jsonl.replaying` (so appends during the replay go to a fresh file), inserts
//! its records, and deletes it only once every record is stored. A replay that fails leaves the
//! renamed file in place for the next attempt; inserts ignore records already stored, so a
//! record is never stored twice.
//!
//! # Design notes
//!
//! `spill.rs` keeps records the database could not take in a JSONL file and replays them (rename,
//! insert, delete) once it is back.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::record::Execution;

#[derive(Debug)]
pub(super) struct Spill {
    path: PathBuf,
    /// Serializes appends and the rename that starts a replay.
    lock: Mutex<()>,
    /// Records written to the spill files and not yet replayed.
    pending: AtomicU64,
}

impl Spill {
    pub(super) fn new(path: PathBuf) -> Spill {
        let pending = count_lines(&path) + count_lines(&replaying_path(&path));
        Spill { path, lock: Mutex::new(()), pending: AtomicU64::new(pending) }
    }

    pub(super) fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Append records, one JSON object per line, and sync them to disk.
    pub(super) fn append(&self, executions: &[Execution]) -> std::io::Result<()> {
        let mut buffer = Vec::new();
        for execution in executions {
            serde_json::to_writer(&mut buffer, execution)?;
            buffer.push(b'\n');
        }
        let _guard = self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(&buffer)?;
        file.sync_data()?;
        self.pending.fetch_add(executions.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The file to replay now, if any: a replay left over from an earlier attempt, or the
    /// current spill file renamed out of the way of new appends.
    pub(super) fn take_for_replay(&self) -> std::io::Result<Option<PathBuf>> {
        let replaying = replaying_path(&self.path);
        if replaying.exists() {
            return Ok(Some(replaying));
        }
        let _guard = self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !self.path.exists() {
            return Ok(None);
        }
        std::fs::rename(&self.path, &replaying)?;
        Ok(Some(replaying))
    }

    /// Read the records of a file taken for replay. Lines that cannot be parsed are moved to a
    /// `.rejected` file next to it rather than dropped.
    pub(super) fn read(&self, path: &Path) -> std::io::Result<Vec<Execution>> {
        let file = std::fs::File::open(path)?;
        let mut executions = Vec::new();
        let mut rejected = Vec::new();
        for line in BufReader::new(file).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Execution>(&line) {
                Ok(execution) => executions.push(execution),
                Err(error) => {
                    tracing::warn!("unreadable line in the tracking spill file: {error}");
                    rejected.push(line);
                }
            }
        }
        if !rejected.is_empty() {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path.with_extension("rejected"))?;
            for line in &rejected {
                writeln!(file, "{line}")?;
            }
            file.sync_data()?;
            self.pending
                .fetch_sub(rejected.len().min(self.pending() as usize) as u64, Ordering::Relaxed);
        }
        Ok(executions)
    }

    /// A replayed file is fully stored: remove it.
    pub(super) fn finish_replay(&self, path: &Path, replayed: usize) -> std::io::Result<()> {
        std::fs::remove_file(path)?;
        let replayed = (replayed as u64).min(self.pending());
        self.pending.fetch_sub(replayed, Ordering::Relaxed);
        Ok(())
    }
}

fn replaying_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".replaying");
    PathBuf::from(name)
}

fn count_lines(path: &Path) -> u64 {
    std::fs::File::open(path)
        .map(|file| {
            BufReader::new(file)
                .lines()
                .map_while(Result::ok)
                .filter(|line| !line.trim().is_empty())
                .count() as u64
        })
        .unwrap_or(0)
}
