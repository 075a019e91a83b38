//! The next MCP conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.12`), which
//! adds the 2026-07-28 revision (stateless requests, `server/discover`, cache hints, the
//! `Mcp-Method`/`Mcp-Name` headers, `subscriptions/listen`, `InputRequiredResult`) and the tasks
//! extension, run through orca with the suite's fixture server behind it, stateless and
//! `--stateful`. Each scenario
//! passes, or fails exactly the checks named here for the reason given (RELIABILITY.md,
//! "What the proxy does not relay yet").

use crate::conformance::{DirectFixture, Expect, install_suite, judge_against, run_suite};
use crate::support::{OrcaSetup, TestDatabase};

const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";

const SUITE_PENDING: &str =
    "is skipped by the suite itself until its harness listens on subscriptions/listen";
const TASK_SUPPORT: &str = "needs a tool registered as requiring a task (test_tool_with_task, a required-task failing_job); orca decides which calls become tasks by how they run, since a 2025-11-25 server cannot say that a tool needs one";

/// Every scenario of the suite and what it must show through orca.
fn expectations(stateful: bool) -> Vec<(&'static str, Expect)> {
    use Expect::{Except, LeftOut, Pass};
    // Stateless, orca's `Mcp-Session-Id` carries the client's capabilities: the suite's
    // session checks run with it (its DELETE is answered 405, which the protocol allows), and
    // only the SSE polling ones do not apply to JSON answers.
    let json_answers = LeftOut {
        evidence: "priming event tests not applicable",
        reason: "answers a POST with JSON stateless, where the SSE polling checks do not apply",
    };
    vec![
        ("server-initialize", Pass),
        ("server-session-lifecycle", Pass),
        ("server-stateless", Pass),
        ("logging-set-level", Pass),
        ("ping", Pass),
        ("completion-complete", Pass),
        ("tools-list", Pass),
        ("tools-call-simple-text", Pass),
        ("tools-call-image", Pass),
        ("tools-call-audio", Pass),
        ("tools-call-embedded-resource", Pass),
        ("tools-call-mixed-content", Pass),
        ("tools-call-with-logging", Pass),
        ("tools-call-error", Pass),
        ("tools-call-with-progress", Pass),
        ("tools-call-sampling", Pass),
        ("tools-call-elicitation", Pass),
        ("json-schema-2020-12", Pass),
        ("elicitation-sep1034-defaults", Pass),
        ("server-sse-polling", if stateful { Pass } else { json_answers }),
        ("server-sse-multiple-streams", Pass),
        ("elicitation-sep1330-enums", Pass),
        ("resources-list", Pass),
        ("resources-read-text", Pass),
        ("resources-read-binary", Pass),
        ("resources-templates-read", Pass),
        ("resources-subscribe", Pass),
        ("resources-unsubscribe", Pass),
        ("sep-2164-resource-not-found", Pass),
        ("sep-2640-skills-directory", Pass),
        ("sep-2640-skills-enumeration", Pass),
        ("sep-2640-skills-manifest", Pass),
        ("prompts-list", Pass),
        ("prompts-get-simple", Pass),
        ("prompts-get-with-args", Pass),
        ("prompts-get-embedded-resource", Pass),
        ("prompts-get-with-image", Pass),
        ("dns-rebinding-protection", Pass),
        ("caching", Pass),
        ("http-header-validation", Pass),
        ("http-custom-header-server-validation", Pass),
        ("tasks-lifecycle", Pass),
        ("tasks-capability-negotiation", Pass),
        ("tasks-wire-fields", Pass),
        ("tasks-request-state-removal", Pass),
        ("tasks-mrtr-input", Pass),
        ("tasks-request-headers", Pass),
        ("tasks-dispatch-and-envelope", Pass),
        (
            "tasks-status-notifications",
            LeftOut { evidence: "subscriptions/listen", reason: SUITE_PENDING },
        ),
        (
            "tasks-required-task-error",
            Except {
                failing: &["Sep2663ServerReturnsMissingCapabilityWhenRequired"],
                reason: TASK_SUPPORT,
            },
        ),
        (
            "tasks-mrtr-composition",
            Except { failing: &["Sep2663MrtrSynchronousBeforeTaskCreation"], reason: TASK_SUPPORT },
        ),
        ("input-required-result-basic-elicitation", Pass),
        ("input-required-result-basic-sampling", Pass),
        ("input-required-result-basic-list-roots", Pass),
        ("input-required-result-request-state", Pass),
        ("input-required-result-multiple-input-requests", Pass),
        ("input-required-result-multi-round", Pass),
        ("input-required-result-missing-input-response", Pass),
        ("input-required-result-non-tool-request", Pass),
        ("input-required-result-result-type", Pass),
        ("input-required-result-unsupported-methods", Pass),
        ("input-required-result-tampered-state", Pass),
        ("input-required-result-capability-check", Pass),
        ("input-required-result-ignore-extra-params", Pass),
        ("input-required-result-validate-input", Pass),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_conformance_suite_passes_through_orca_except_what_is_not_relayed_yet() {
    through_orca("2025-11-25").await;
}

/// The same with orca speaking 2026-07-28 to the fixture: what the fixture asks comes to orca
/// as `InputRequiredResult`s, list changes and resource updates on a listen stream, and the
/// fixture's slow tools are tasks of its own (`FIXTURE_NATIVE_TASKS`), which orca follows.
#[tokio::test(flavor = "multi_thread")]
async fn the_next_conformance_suite_passes_the_same_with_orca_speaking_2026_07_28_upstream() {
    through_orca("2026-07-28").await;
}

#[allow(clippy::print_stderr, reason = "the table of outcomes is the test's own report")]
async fn through_orca(protocol: &str) {
    let suite = install_suite(SUITE, "mcp-conformance-next");
    let database = TestDatabase::create().await;
    // The fixture over Streamable HTTP: a request it makes during a call comes on that call's
    // own response stream, so calls waiting for a client's input (a round the suite never
    // finishes) cannot be mistaken for the one a new request belongs to, as over stdio.
    let native_tasks: &[(&str, &str)] =
        if protocol == "2026-07-28" { &[("FIXTURE_NATIVE_TASKS", "1")] } else { &[] };
    let fixture = DirectFixture::start_with(native_tasks);
    let yaml = format!(
        "mcps:\n  conformance:\n    url: {}\n    prefix: \"\"\n    timeout: 10s\n    protocol: {protocol}\n",
        fixture.url
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    for stateful in [false, true] {
        let server = setup.http_server(if stateful { &["--stateful"] } else { &[] });
        let out = tempfile::tempdir().unwrap();
        let checks = run_suite(&suite, &server.url("/mcp"), out.path());
        let table = judge_against(expectations(stateful), &checks);
        let mode = if stateful { "stateful" } else { "stateless" };
        eprintln!("conformance {SUITE}, {mode}, orca speaking {protocol} upstream:\n{table}");
        let status = server.stop();
        assert!(status.success(), "orca exited with {status}");
    }
}
