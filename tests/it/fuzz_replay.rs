//! The fuzz targets on the stable toolchain: every saved input of `fuzz/corpus/<target>/` (what
//! `scripts/fuzz` found and minimized) and of `fuzz/regressions/<target>/` (inputs that once
//! broke a promise) replayed through the same bodies the cargo-fuzz binaries run
//! (`orca::fuzzing`), plus random inputs from proptest.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

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

proptest! {
    #![proptest_config(Config { cases: 512, failure_persistence: None, ..Config::default() })]

    #[test]
    fn random_bytes_break_no_target((target, bytes) in target_and_bytes()) {
        (target.run)(&bytes);
    }
}
