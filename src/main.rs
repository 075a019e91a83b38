//! The `orca` binary: parse the command line, set up logging on stderr, hand over to `cli::run`.

use std::process::ExitCode;

fn main() -> ExitCode {
    orca::cli::main()
}
