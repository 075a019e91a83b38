//! The `orca` binary: parse the command line, set up logging on stderr, hand over to `cli::run`.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: a gateway call makes hundreds of small allocations
/// on tokio's worker threads (BENCHMARKS.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    orca::cli::main()
}
