//! The MCP conformance suite's client mode against `examples/conformance_client.rs`, the thin
//! driver over `orca::client`: every client scenario of `@modelcontextprotocol/conformance`
//! 0.1.16 and 0.2.0-alpha.12 (each installed with the Node.js 22 of the npm package `node@22`
//! into its own directory under `target/`): every one must pass (`RELIABILITY.md`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::orca::BINARY;

/// Node.js 22 and the suite's entry point for `version`, installed once per target directory.
struct Suite {
    node: PathBuf,
    entry: PathBuf,
}

fn suite(version: &str) -> Suite {
    let root =
        Path::new(BINARY).parent().unwrap().join(format!("mcp-conformance-client-{version}"));
    let node = root.join("node_modules/node/bin/node");
    let entry = root.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    if !node.is_file() || !entry.is_file() {
        let package = format!("@modelcontextprotocol/conformance@{version}");
        let output = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .args([package.as_str(), "node@22"])
            .output()
            .unwrap_or_else(|error| {
                panic!("the conformance suite needs npm (apt-get install -y npm): {error}")
            });
        assert!(
            output.status.success(),
            "npm install {package} node@22 failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let version = Command::new(&node).arg("--version").output().expect("cannot run node@22");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(version.starts_with("v22."), "node@22 runs {version}");
    Suite { node, entry }
}

/// The driver, built next to orca by `cargo build --example conformance_client`.
fn driver() -> PathBuf {
    let path = Path::new(BINARY).parent().unwrap().join("examples/conformance_client");
    assert!(
        path.is_file(),
        "{} is missing: build it (cargo build --example conformance_client)",
        path.display()
    );
    path
}

/// The client scenarios the suite lists.
fn scenarios(suite: &Suite) -> Vec<String> {
    let output = Command::new(&suite.node).arg(&suite.entry).arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let section = text
        .split("Client scenarios")
        .nth(1)
        .expect("the suite lists client scenarios")
        .split("\n\n")
        .next()
        .unwrap_or_default();
    section
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(|line| line.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

/// One scenario: whether the suite's verdict is a pass, and its whole report.
fn run(suite: &Suite, driver: &Path, scenario: &str) -> (bool, String) {
    let output = Command::new(&suite.node)
        .arg(&suite.entry)
        .args(["client", "--scenario", scenario, "--timeout", "60000", "--command"])
        .arg(driver)
        .env("NO_COLOR", "1")
        .output()
        .expect("cannot run the conformance suite");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let passed =
        output.status.success() && report.contains("OVERALL: PASSED") && report.contains("SUCCESS");
    (passed, report)
}

/// Every client scenario of `version`, each of which must pass; the table of outcomes.
fn judge(version: &str) -> String {
    let suite = suite(version);
    let driver = driver();
    let listed = scenarios(&suite);
    assert!(listed.len() > 20, "the suite lists too few client scenarios: {listed:?}");
    let mut table = String::new();
    let mut problems = Vec::new();
    for scenario in &listed {
        let (passed, report) = run(&suite, &driver, scenario);
        if passed {
            table.push_str(&format!("{scenario}: pass\n"));
        } else {
            problems.push(format!("{scenario}: expected to pass:\n{report}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{version}: client conformance problems:\n{}",
        problems.join("\n")
    );
    table
}

#[test]
#[allow(clippy::print_stderr, reason = "the table of outcomes is the test's own report")]
fn every_client_scenario_of_the_conformance_suite_passes() {
    // One release after the other: the scenarios that time reconnections need a quiet machine.
    let tables: Vec<(&str, String)> =
        ["0.1.16", "0.2.0-alpha.12"].into_iter().map(|version| (version, judge(version))).collect();
    for (version, table) in tables {
        eprintln!("client conformance, {version}:\n{table}");
    }
}
