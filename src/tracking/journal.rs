//! The journal: every record is written to a file in `ORCA_HOME/tracking-journal/` before the
//! call's answer leaves, and forgotten once the writer stored it (or spilled it). A process
//! killed with records still in the queue (SIGKILL, the OOM killer, a container stopped hard)
//! leaves them there, and the next run with the same `ORCA_HOME` replays them, like the spill
//! file, without duplicates (inserts skip records already stored).
//!
//! The records go to numbered segments, JSON Lines in the spill file's format. A segment is
//! closed after [`SEGMENT_RECORDS`] records or [`SEGMENT_AGE`], and removed once every record
//! in it is settled. Writing is one `write` to the page cache, no `fsync`: it survives the
//! process's death, not the machine's (the spill file, which holds what the database did not
//! take, is synced).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::record::Execution;

/// The most records in one segment.
const SEGMENT_RECORDS: u64 = 4096;
/// How long a segment takes records.
const SEGMENT_AGE: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(super) struct Journal {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The open segment, its number, when it was opened and how many records it took.
    file: Option<File>,
    segment: u64,
    opened: Instant,
    written: u64,
    /// Records not settled yet, by segment.
    unsettled: BTreeMap<u64, u64>,
}

impl Journal {
    /// The journal in `dir`, and the segments an earlier run left there (to replay).
    pub(super) fn open(dir: PathBuf) -> (Journal, Vec<PathBuf>) {
        let mut left = Vec::new();
        let mut last = 0;
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if let Some(number) = segment_number(&path) {
                    last = last.max(number);
                    left.push(path);
                }
            }
        }
        left.sort();
        let state = State {
            file: None,
            segment: last,
            opened: Instant::now(),
            written: 0,
            unsettled: BTreeMap::new(),
        };
        (Journal { dir, state: Mutex::new(state) }, left)
    }

    /// Write `execution` to the journal; the segment to settle it in once stored.
    ///
    /// # Errors
    ///
    /// When the file cannot be written (the record still goes on to the database).
    pub(super) fn append(&self, execution: &Execution) -> std::io::Result<u64> {
        let mut line = Vec::with_capacity(1024);
        serde_json::to_writer(&mut line, execution)?;
        line.push(b'\n');
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let stale = state.written >= SEGMENT_RECORDS || state.opened.elapsed() >= SEGMENT_AGE;
        if state.file.is_none() || stale {
            self.rotate(&mut state)?;
        }
        let segment = state.segment;
        state.file.as_mut().expect("a segment is open").write_all(&line)?;
        state.written += 1;
        *state.unsettled.entry(segment).or_default() += 1;
        Ok(segment)
    }

    /// Open the next segment; the one closed goes when it holds nothing unsettled.
    fn rotate(&self, state: &mut State) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let closed = state.segment;
        state.segment += 1;
        state.file = Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(segment_path(&self.dir, state.segment))?,
        );
        state.opened = Instant::now();
        state.written = 0;
        if !state.unsettled.contains_key(&closed) {
            let _ = std::fs::remove_file(segment_path(&self.dir, closed));
        }
        Ok(())
    }

    /// The records of `segments` (one entry per record) are stored or spilled: a closed segment
    /// whose records are all settled is removed.
    pub(super) fn settle(&self, segments: impl IntoIterator<Item = u64>) {
        let mut segments = segments.into_iter().peekable();
        if segments.peek().is_none() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for segment in segments {
            let Some(count) = state.unsettled.get_mut(&segment) else { continue };
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.unsettled.remove(&segment);
                if segment != state.segment {
                    let _ = std::fs::remove_file(segment_path(&self.dir, segment));
                }
            }
        }
    }

    /// After an orderly shutdown flushed everything: the open segment goes too, when settled.
    pub(super) fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.unsettled.is_empty() {
            state.file = None;
            let _ = std::fs::remove_file(segment_path(&self.dir, state.segment));
        }
    }
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("segment-{number:012}.jsonl"))
}

fn segment_number(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_prefix("segment-")?.strip_suffix(".jsonl")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution() -> Execution {
        Execution::of(
            super::super::Origin::default(),
            "orca".to_owned(),
            "list_servers".to_owned(),
            "trace".to_owned(),
        )
    }

    #[test]
    fn a_settled_segment_is_removed_and_an_unsettled_one_is_left_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, left) = Journal::open(dir.path().join("journal"));
        assert!(left.is_empty());
        let first = journal.append(&execution()).unwrap();
        let second = journal.append(&execution()).unwrap();
        assert_eq!(first, second);
        journal.settle([first]);
        // One of two settled: the segment stays.
        let (_, left) = Journal::open(dir.path().join("journal"));
        assert_eq!(left.len(), 1);
        journal.settle([second]);
        journal.close();
        let (_, left) = Journal::open(dir.path().join("journal"));
        assert!(left.is_empty(), "{left:?}");
        // A record never settled is there for the next run.
        journal.append(&execution()).unwrap();
        let (_, left) = Journal::open(dir.path().join("journal"));
        assert_eq!(left.len(), 1);
        let text = std::fs::read_to_string(&left[0]).unwrap();
        let back: Execution = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(back.tool, "list_servers");
    }
}
