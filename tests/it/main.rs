//! The integration tests: one binary, a real PostgreSQL started by the harness, and the real
//! `orca` binary driven over stdio and HTTP by rmcp's client.
//!
//! # How the tests are built
//!
//! `tests/it/` is one integration-test binary.
//! `support/pg.rs` starts one throwaway cluster per test run (shared across nextest's processes
//! through a directory keyed by `NEXTEST_RUN_ID` and a file lock; a detached reaper stops it when
//! the run ends) and creates a database per test.
//! `support/orca.rs` runs the real binary: over stdio through rmcp's `TokioChildProcess` client,
//! and over HTTP with the address read from its log.
//! The outage tests start a private cluster of their own so that stopping it disturbs no other
//! test.
//! `support/samples.rs` loads Chinook and the Pagila schema once per run as template databases and
//! gives each SQL test its own copy.
//! `sql_classify.rs` holds the classification corpus (every pitfall of the research, and the
//! analytics that must stay reads) and the property tests; `sql_safety.rs` runs the pitfall corpus
//! against a real database as superuser and checks nothing changed; `sql_writes.rs` the token and
//! approval flows; `sql_schema_format.rs` `generate_schema` and `format_results`; `sql_execute.rs`
//! reads and `add_records`.
//! `support/fake_llm.rs` is one axum server (on its own thread) speaking OpenAI's chat completions,
//! Anthropic's Messages and Gemini's `generateContent` as the real services do: it checks every
//! request against the wire's rules (headers, roles and alternation, fields the real API would
//! refuse), records it, and answers from a per-wire script (text, an error with its real body and
//! `Retry-After`, a hang, a malformed body); `llm_fake_wire.rs` tests the fake itself,
//! `llm_generate.rs` the loop through the binary (snapshots of each provider's request body in
//! `tests/it/snapshots/`).
//! `support/fake_metabase.rs` is a fake Metabase (axum, on its own thread) with the real shapes of
//! the research notes: sessions it can expire (401 `Unauthenticated` as plain text), the login
//! throttle, the generic 403/404 strings and 400 validation maps, 202 failed queries, 0.46
//! (`ordered_cards`, `POST .../cards`) and 0.50 (`dashcards`, `tabs`, replaced whole through `PUT`)
//! dashboards, 2,000 of 5,000 rows with fingerprints; it checks every body (`parameters` arrays,
//! `template-tags`, dashcards or tabs left out) and records violations, which `metabase.rs` asserts
//! are none.
//! `external.rs` runs orca against real MCP servers: `fixtures/upstream` (a workspace member built
//! by `scripts/test`: an rmcp server over stdio or Streamable HTTP whose tools hang, crash, flood,
//! write garbage and change the tool list on request), and the MCP reference server
//! `@modelcontextprotocol/server-everything` installed from npm into `target/` (stdio and SSE;
//! skipped, saying why, when npm cannot install it).
//! `support/fake_weaviate.rs` is a fake Weaviate speaking its REST shapes (schema with a
//! multi-tenant collection, tenants with statuses, batch upserts with per-object errors, 404 with
//! no body, batch deletes with dry runs, API keys with a read-only role), stoppable and restartable
//! on its port; `support/fake_weaviate_graphql.rs` parses every GraphQL query with
//! `graphql-parser`, checks it as Weaviate's schema would (arguments and types, enum operators,
//! fields, tenants, the vectorizer key header) and answers from the stored objects; `weaviate.rs`
//! drives every Weaviate tool through the binary.
//! `client_sdk.rs` runs the client SDK against `fixtures/upstream`'s second binary
//! `orca-test-awkward` (dotted and 80-character names, colliding names, `$defs`/`$ref`, recursion,
//! nullable unions, bare objects, enums, nested objects, a top-level union, a remote `$ref`; paged
//! `tools/list`), the test upstream (list changes, hangs, crashes, HTTP sessions) and the npm
//! reference server, with insta snapshots of the three conversions; `client_cli.rs` runs `orca
//! tools`, `call` and `ask`, the last against `fake_llm.rs`'s OpenAI wire, whose tool rules
//! (`support/fake_llm_tools.rs`: tool names and schemas, strict mode, each `tool` message answering
//! a call the fake issued) it checks on every request.
//! `console.rs` checks the console's files, endpoints and Origin rule over HTTP, and runs
//! `tests/console/console.mjs` (playwright-core from npm, installed into `target/`, driving
//! Debian's Chromium headless through its executable path) against the real binary in two
//! scenarios: without keys (the server list at 1280 and 390 px with an external server's long
//! `missing credentials` status, versions as `list_servers` may report them, a paged read, the JSON
//! view, CSV and JSON downloads, feedback found in `orca.mcp_feedback`, three failures and
//! `EXCEEDED_RETRIES` from the fake LLM opening the dialog, the manual fallback's dry run and
//! confirmed write, its read, and its closing, keyboard-only use, a narrow window) and with keys
//! under `write_confirmation: human` (the key prompt, per-key tools and rows, an approval);
//! `oauth.rs` runs a third, `signin` (Sign in through the real provider's login and consent pages,
//! back with no code in the address and the token in `sessionStorage`, a tool run as the signed-in
//! user, Sign out). Every scenario fails on a console error, a failed request or a request leaving
//! orca's origin (in `signin`, navigations to the provider's origin only are allowed); screenshots
//! go to `target/debug/console-screenshots/`.
//! `chaos.rs` holds the replica and fault scenarios in a short form, each under load from several
//! rmcp clients with the history of its calls checked against `orca.mcp_executions` (every answered
//! call exactly one row, no row without a call): two replicas sharing one database and
//! `ORCA_SECRET`, a private cluster stopped and started, the test upstream SIGKILLed with calls in
//! flight, `fake_llm.rs` answering 500, 429 and hanging, SIGTERM with a short drain.
//! `examples/chaos.rs` is the same idea at length, outside the test harness: the load generator
//! behind `scripts/chaos` (the clients, the JSON-lines history, the check against PostgreSQL, the
//! cross-replica scenarios and the soak plot), with the faults injected by the script around it;
//! `chaos inflight` sends the calls that are in flight when the upstream is killed, and
//! `examples/chaos/provider.rs` is the fake OpenAI-compatible provider of `--fault llm` (it checks
//! what it receives; the script switches its failures), kept apart from the test support code.
//! The stdio benchmarks (`examples/bench_completion.rs`, `bench_proxy.rs`, and `bench_client.rs`
//! for its connection) share `examples/bench/stdio.rs` through `#[path]`: the command line split at
//! `--`, the client on a child process, the timed callers and the result line.
//! `fuzz/` holds one cargo-fuzz binary per parser of untrusted input (`fuzz/fuzz_targets/*.rs`),
//! each a one-line call into `orca::fuzzing`; `scripts/fuzz` runs them on nightly and minimizes
//! `fuzz/corpus/<target>/`, and `fuzz_replay.rs` replays those corpora and
//! `fuzz/regressions/<target>/` through the same bodies on stable, with random inputs from
//! proptest.
//! `oauth.rs` runs the binary as an OAuth resource server against a real OpenID provider,
//! `oidc-provider` from npm (installed into `target/`), which `tests/oauth/provider.mjs` starts
//! with its own key, the client credentials grant and resource indicators, and which the tests stop
//! and restart with a new key: tokens for orca and for another resource, without the required
//! scope, expired, after a rotation, with the provider stopped (a cached key, and an orca with
//! none), an HTTP upstream that must get orca's credential and never the client's token, and `orca
//! doctor`; `tests/oauth/mcp_client.mjs` is the MCP TypeScript SDK's client signing in by itself
//! from orca's 401; with `CONSOLE_REDIRECT_URI` the provider also has the console's public client
//! and its development login and consent pages, for the console's sign-in and the checks of `POST
//! /console/api/token` (a code it never issued, a foreign redirect URI, a large body, the
//! throttle); the refused forms no provider mints (`alg: none`, HMAC with the public key, a
//! tampered payload, `nbf` ahead) are unit tests of `gateway::oauth` with keys of their own
//! (`src/gateway/oauth_test_keys/`).
//! `dpop.rs` has orca's own client get a DPoP-bound token from the real provider (which takes DPoP
//! proofs by default) for an orca resource server, and that orca refuse the token as a bearer
//! token, without a proof, with a replayed proof, a proof for another URL and one of another key
//! (the `oauth_upstream.rs` sign-ins are DPoP-bound too, so a refresh and a second replica use the
//! stored key). `client_conformance.rs` runs the same suite's client mode (0.1.16 and
//! 0.2.0-alpha.12) against `examples/conformance_client.rs`, each scenario passing or left out with
//! its evidence; `oauth_upstream.rs` runs a proxy signing in to another orca (a resource server of
//! the real provider) with client credentials, the sealed row read directly and the proxy's log and
//! tracking searched for the token, a shared upstream waiting as `needs_sign_in`, and `orca login`
//! through the provider's development pages (`tests/oauth/sign_in.mjs`, with dynamic registration
//! and `offline_access` enabled in `provider.mjs` under `DEV_INTERACTIONS`) followed by calls
//! across token expiry, a second replica and a revocation; and a `per_user` upstream with two API
//! keys signing in through the console's routes as two provider users (the upstream's
//! `list_servers` naming each caller), sign-out, a refused refresh, and the `upstream` browser
//! scenario of the console's **Sign in**.
//! `upstream_trust.rs` puts hostile parties behind a proxy orca (`support/hostile.rs`: an HTTP
//! server that answers `/mcp` with a 401 pointing wherever the test says, serves whatever metadata
//! it is given, and records every request with its `Authorization` header; the same server stands
//! in for an internal service that must record nothing): a client secret goes only to
//! `oauth.issuer`, what an upstream names is fetched only on its origin, its issuer's or
//! `oauth.allowed_hosts` and its refusal is no port oracle, and one caller can neither hold
//! everyone's sign-ins nor start one its role hides.
//! `support/fake_embeddings.rs` speaks OpenAI's `/v1/embeddings` and Gemini's `batchEmbedContents`
//! with vectors made from keywords, and can fail or hold every request but the query's until the
//! test releases them, for `tool_search.rs`'s order of events.
//! `conformance.rs` runs the MCP project's conformance suite (`@modelcontextprotocol/conformance`
//! on the Node.js 22 of the npm package `node@22`, both installed into
//! `target/debug/mcp-conformance/`) against the binary, stateless and `--stateful`, and judges
//! every scenario against a table of those that must pass and those left out, each with the
//! evidence of why (`RELIABILITY.md`); it also checks loopback origins, completions and log
//! messages relayed from the test upstream, and `/healthz`'s external servers.

mod apps;
mod auth;
mod big_results;
mod cache_hints;
mod chaos;
mod client_cli;
mod client_conformance;
mod client_sdk;
mod client_skills;
mod config;
mod conformance;
mod conformance_next;
mod console;
mod data_metadata;
mod data_profile;
mod data_query;
mod databases;
mod demo;
mod dpop;
mod edge;
mod eval;
mod export;
mod external;
mod feedback;
mod forwarding;
mod fuzz_replay;
mod gateway_http;
mod gateway_stdio;
mod input_required;
mod llm_fake_wire;
mod llm_generate;
mod masking;
mod metabase;
mod modern_upstream;
mod oauth;
mod oauth_upstream;
mod owners;
mod pinning;
mod replicas;
mod result_masking;
mod sampling;
mod secrets;
mod sql_classify;
mod sql_execute;
mod sql_safety;
mod sql_schema_format;
mod sql_writes;
mod support;
mod tidy;
mod tool_search;
mod traces;
mod tracking;
mod upstream_tasks;
mod upstream_trust;
mod weaviate;
