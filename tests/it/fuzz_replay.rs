//! The fuzz targets on the stable toolchain: every saved input of `fuzz/corpus/<target>/` (what
//! `scripts/fuzz` found and minimized) and of `fuzz/regressions/<target>/` (inputs that once
//! broke a promise) replayed through the same bodies the cargo-fuzz binaries run
//! (`orca::fuzzing`), plus random inputs from proptest.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use orca::fuzzing::{TARGETS, Target, target};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The saved inputs of `target`, sorted by path.
fn saved_inputs(target: &str) -> Vec<PathBuf> {
    let mut inputs = Vec::new();
    for folder in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(folder).join(target)) else {
            continue;
        };
        inputs.extend(entries.map(|entry| entry.expect("a readable corpus entry").path()));
    }
    inputs.sort();
    inputs
}

/// Run every saved input of the target `name`, naming the input that breaks a promise.
fn replay(name: &str) {
    let target = target(name).expect("orca has this target");
    let inputs = saved_inputs(name);
    assert!(!inputs.is_empty(), "fuzz/corpus/{name}/ holds no input");
    let mut failures = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).expect("a readable corpus file");
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (target.run)(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{}: {message}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} inputs failed:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    for target in TARGETS {
        assert!(
            fuzz_dir().join("corpus").join(target.name).is_dir(),
            "no corpus for {}",
            target.name
        );
        let binary = fuzz_dir().join("fuzz_targets").join(format!("{}.rs", target.name));
        assert!(binary.is_file(), "no cargo-fuzz binary for {}", target.name);
    }
    for folder in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(folder)) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(target(&name).is_some(), "fuzz/{folder}/{name} belongs to no target");
        }
    }
}

#[test]
fn the_http_body_corpus_replays_without_a_finding() {
    replay("http_body");
}

#[test]
fn the_stdio_lines_corpus_replays_without_a_finding() {
    replay("stdio_lines");
}

#[test]
fn the_context_file_corpus_replays_without_a_finding() {
    replay("context_file");
}

#[test]
fn the_orca_yaml_corpus_replays_without_a_finding() {
    replay("orca_yaml");
}

#[test]
fn the_external_yaml_corpus_replays_without_a_finding() {
    replay("external_yaml");
}

#[test]
fn the_page_token_corpus_replays_without_a_finding() {
    replay("page_token");
}

#[test]
fn the_confirmation_token_corpus_replays_without_a_finding() {
    replay("confirmation_token");
}

#[test]
fn the_tool_arguments_corpus_replays_without_a_finding() {
    replay("tool_arguments");
}

#[test]
fn the_classify_corpus_replays_without_a_finding() {
    replay("classify");
}

/// A target and random bytes for it.
fn target_and_bytes() -> impl Strategy<Value = (Target, Vec<u8>)> {
    (0..TARGETS.len(), proptest::collection::vec(any::<u8>(), 0..512))
        .prop_map(|(index, bytes)| (TARGETS[index], bytes))
}

/// Every target's saved inputs, read once.
fn corpora() -> &'static [(Target, Vec<Vec<u8>>)] {
    static CORPORA: OnceLock<Vec<(Target, Vec<Vec<u8>>)>> = OnceLock::new();
    CORPORA.get_or_init(|| {
        TARGETS
            .iter()
            .map(|target| {
                let inputs = saved_inputs(target.name)
                    .iter()
                    .map(|path| std::fs::read(path).expect("a readable corpus file"))
                    .collect();
                (*target, inputs)
            })
            .collect()
    })
}

/// One edit of a byte string: flip a byte, insert one, remove one, or repeat a slice.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Repeat(usize, usize),
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    let at = |position: usize, length: usize| if length == 0 { 0 } else { position % length };
    match *edit {
        Edit::Flip(position, mask) if !bytes.is_empty() => {
            let index = at(position, bytes.len());
            bytes[index] ^= mask.max(1);
        }
        Edit::Insert(position, byte) => bytes.insert(at(position, bytes.len() + 1), byte),
        Edit::Remove(position) if !bytes.is_empty() => {
            bytes.remove(at(position, bytes.len()));
        }
        Edit::Repeat(position, length) if !bytes.is_empty() => {
            let start = at(position, bytes.len());
            let end = (start + length % 64 + 1).min(bytes.len());
            let copy = bytes[start..end].to_vec();
            bytes.splice(end..end, copy);
        }
        _ => {}
    }
}

/// A target and one of its saved inputs changed by a few edits, as libFuzzer's mutations do.
fn target_and_mutated_input() -> impl Strategy<Value = (Target, Vec<u8>)> {
    let edit = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(position, mask)| Edit::Flip(position, mask)),
        (any::<usize>(), any::<u8>()).prop_map(|(position, byte)| Edit::Insert(position, byte)),
        any::<usize>().prop_map(Edit::Remove),
        (any::<usize>(), any::<usize>())
            .prop_map(|(position, length)| Edit::Repeat(position, length)),
    ];
    (0..TARGETS.len(), any::<usize>(), proptest::collection::vec(edit, 1..8)).prop_map(
        |(index, pick, edits)| {
            let (target, inputs) = &corpora()[index];
            let mut bytes = inputs.get(pick % inputs.len().max(1)).cloned().unwrap_or_default();
            for edit in &edits {
                apply(&mut bytes, edit);
            }
            (*target, bytes)
        },
    )
}

/// Cases per property: 512, or `ORCA_FUZZ_CASES` to explore longer on stable.
fn cases() -> u32 {
    std::env::var("ORCA_FUZZ_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(512)
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn random_bytes_break_no_target((target, bytes) in target_and_bytes()) {
        (target.run)(&bytes);
    }

    #[test]
    fn mutated_corpus_inputs_break_no_target((target, bytes) in target_and_mutated_input()) {
        (target.run)(&bytes);
    }
}
