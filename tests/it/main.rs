//! The integration tests: one binary, a real PostgreSQL started by the harness, and the real
//! `orca` binary driven over stdio and HTTP by rmcp's client.

mod auth;
mod config;
mod demo;
mod export;
mod feedback;
mod gateway_http;
mod gateway_stdio;
mod support;
mod tidy;
mod tracking;
