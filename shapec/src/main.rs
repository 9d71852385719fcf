//! The `shapec` binary: see `shapec --help` and `docs/guide.md`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    // A write past the file size limit (`ulimit -f`) then fails with an
    // error that `run --out` cleans up after, instead of killing the
    // process and leaving a partial temporary file.
    #[cfg(unix)]
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let status = shapec::cli::main_with(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(status)
}
