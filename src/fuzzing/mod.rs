//! The bodies of orca's fuzz targets, one function per parser of untrusted input, shared by the
//! cargo-fuzz binaries in `fuzz/` (nightly, libFuzzer) and the corpus replay in the integration
//! tests (stable), so that both run exactly the same checks.
//!
//! Each target takes any bytes and panics when a promise breaks: a panic inside a parser, a hang,
//! a round trip that does not come back, a token accepted that orca did not issue for that use,
//! or an error that echoes a secret. Not part of orca's API: hidden from the documentation and
//! only stable enough for `fuzz/` and `tests/`.
//!
//! - `edge`: a JSON-RPC body at the HTTP edge (`gateway::edge::check_json_rpc`, then rmcp's
//!   message deserialization) and the line framing of the stdio edge (rmcp's transport over
//!   stdin, as `gateway::stdio` serves it).
//! - `files`: the context file, `orca.yaml` and `external-mcps.yaml`.
//! - `tokens`: page tokens and confirmation tokens.
//! - `tools`: every internal tool's arguments against its published input schema.
//! - `sql`: SQL classification.
//!
//! # Design notes
//!
//! The bodies of the fuzz targets (`#[doc(hidden)] pub`, the only crate-internal code the lib
//! exposes, so that `fuzz/` and `tests/it/fuzz_replay.rs` run the same checks): `TARGETS` names
//! each; a body takes any bytes and panics when a promise breaks.

mod edge;
mod files;
mod sql;
mod tokens;
mod tools;

/// A fuzz target: its name (the cargo-fuzz binary and the corpus folder `fuzz/corpus/<name>/`)
/// and its body.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz all` runs them.
pub const TARGETS: &[Target] = &[
    Target { name: "http_body", run: edge::http_body },
    Target { name: "stdio_lines", run: edge::stdio_lines },
    Target { name: "context_file", run: files::context_file },
    Target { name: "orca_yaml", run: files::orca_yaml },
    Target { name: "external_yaml", run: files::external_yaml },
    Target { name: "page_token", run: tokens::page_token },
    Target { name: "confirmation_token", run: tokens::confirmation_token },
    Target { name: "tool_arguments", run: tools::tool_arguments },
    Target { name: "classify", run: sql::classify },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|target| target.name == name)
}

/// Reads fuzz input as a sequence of small values; once the bytes run out every value is zero
/// or empty, so any input is a complete one.
struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(bytes: &'a [u8]) -> Input<'a> {
        Input { bytes }
    }

    fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&first, rest)) => {
                self.bytes = rest;
                first
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        let mut buffer = [0u8; 8];
        for slot in &mut buffer {
            *slot = self.byte();
        }
        u64::from_le_bytes(buffer)
    }

    /// Up to `max` bytes as text (lossily).
    fn text(&mut self, max: usize) -> String {
        let length = usize::from(self.byte()).min(max).min(self.bytes.len());
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        String::from_utf8_lossy(taken).into_owned()
    }
}

/// Secrets the configuration targets put in the environment; no error, description or endpoint
/// may ever show one of them.
const SECRETS: &[(&str, &str)] = &[
    ("ORCA_SECRET", "orca-secret-5b1f0c7e9a2d4e6f8a0b3c5d7e9f1a2b"),
    ("OPENAI_API_KEY", "sk-proj-fuzz7d2e9c41b8a64f05a3c1e8d9b2f7a6c4"),
    ("ANTHROPIC_API_KEY", "sk-ant-fuzz4c8a1e6b3d9f2a7c5e0b4d8f6a2c9e1b"),
    ("METABASE_PASSWORD", "metabase-password-3e7a9c1f5b2d8e4a6c0f"),
    ("WEAVIATE_API_KEY", "weaviate-key-9f3b7d1e5a2c8f4b6d0e2a7c"),
    ("FUZZ_TOKEN", "ghp_fuzz2c8a6e4b1d9f7a3c5e0b8d6f4a2c1e9b"),
    ("DATABASE_PASSWORD", "pg-password-8d4f2a6c0e9b1d3f5a7c"),
];

/// Panic when `shown` contains a secret that the input itself did not contain (an error may
/// quote the input back, which is no leak).
#[track_caller]
fn assert_no_secret(shown: &str, input: &[u8], what: &str) {
    let input = String::from_utf8_lossy(input);
    for (name, secret) in SECRETS {
        if shown.contains(secret) && !input.contains(secret) {
            panic!("{what} shows the value of {name}: {shown}");
        }
    }
}
