//! The `shapec` binary: see `shapec --help` and `docs/guide.md`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let status = shapec::cli::main_with(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(status)
}
