//! The integration tests: one binary, a real PostgreSQL started by the harness, and the real
//! `orca` binary driven over stdio and HTTP by rmcp's client.

mod auth;
mod big_results;
mod chaos;
mod client_cli;
mod client_conformance;
mod client_sdk;
mod config;
mod conformance;
mod console;
mod data_metadata;
mod data_profile;
mod data_query;
mod demo;
mod edge;
mod eval;
mod export;
mod external;
mod feedback;
mod fuzz_replay;
mod gateway_http;
mod gateway_stdio;
mod llm_fake_wire;
mod llm_generate;
mod metabase;
mod oauth;
mod oauth_upstream;
mod sql_classify;
mod sql_execute;
mod sql_safety;
mod sql_schema_format;
mod sql_writes;
mod support;
mod tidy;
mod tracking;
mod weaviate;
