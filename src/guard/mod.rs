//! What orca refuses to pass on from servers it does not control, as pure functions over text
//! and JSON, knowing nothing of MCP: `poison.rs` reads a tool definition for what
//! tool-poisoning attacks write into it (hidden characters, instructions aimed at the model,
//! instructions about other tools); `secrets.rs` finds credentials in results and errors and
//! replaces them with a marker naming their kind, in a `Value`, in text, or in JSON bytes as a
//! spliced result carries them.

pub(crate) mod poison;
pub(crate) mod secrets;
