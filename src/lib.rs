//! orca: one gateway that gives LLM clients safe, tracked access to data systems over MCP.
//!
//! # Layout
//!
//! Modules are declared in reading order, from the outside in:
//!
//! - [`cli`]: the commands a person runs (`serve`, `demo`, `migrate`, `export-feedback`, `doctor`).
//! - `config`: environment, `.env` and `orca.yaml` turned into one validated `Config`.
//! - `gateway`: the MCP facade (stdio and Streamable HTTP), auth, metrics and the wire mapping of errors.
//! - `external`: external MCP servers from `external-mcps.yaml`: supervised, namespaced, proxied, their tool definitions pinned.
//! - `guard`: what orca refuses to pass on from servers it does not control: poisoned tool definitions, credentials in results.
//! - `directory`: the directory of servers that `list_servers` reports, written by the registry and `external`.
//! - `registry`: the closed list of internal servers, tool routing and collision checks.
//! - `servers`: the internal MCP servers; each tool is a thin adapter over a domain function.
//! - `llm`: the model providers (OpenAI and compatible servers, Anthropic, Google) behind one request shape.
//! - `catalog`: tool search for large catalogs: which of many tools a query is about (BM25F, synonyms, embeddings).
//! - `context`: the learned context file: parsed, hot-reloaded, searched for what a question needs.
//! - [`sql`]: classification, the read check, read execution, writes behind confirmation tokens.
//! - `splice`: big results encoded once and written into the message at the transport, without a `Value` tree.
//! - `tool`: what every tool shares: verbs, the error taxonomy, the domain result.
//! - `tracking`: executions, failures and feedback, written off the request path; the CSV export.
//! - `telemetry`: OpenTelemetry traces of each call, exported over OTLP/HTTP when configured.
//! - `tls`: ring as the one cryptography backend of rustls (every HTTPS client) and jsonwebtoken.
//! - [`embedded`]: the private PostgreSQL cluster used when no database URL is configured.
//! - [`client`]: the client SDK: any MCP server's tools as OpenAI, Anthropic and Gemini tools, and an executor.
//! - `eval`: `orca eval`, execution accuracy of `generate_sql` on a question set.
//! - `fuzzing` (hidden): the bodies of the fuzz targets, shared by `fuzz/` and the corpus replay test.

mod catalog;
pub mod cli;
pub mod client;
mod cluster;
mod config;
mod context;
mod directory;
pub mod embedded;
mod eval;
mod external;
#[doc(hidden)]
pub mod fuzzing;
mod gateway;
mod guard;
mod llm;
mod privacy;
mod registry;
mod servers;
mod splice;
pub mod sql;
mod telemetry;
mod tls;
mod tool;
mod tracking;
