//! The command-line contract of Pantheon's binaries: a user's mistake is one line on standard
//! error, `NAME: what is wrong`, with exit status 2 — never a usage dump or a backtrace — and a
//! run's exit status is its command's.

use std::process::ExitCode;

use clap::Parser;

/// Exit status for bad input or a failed set-up, as for a usage error.
pub const USAGE_ERROR: u8 = 2;

/// Parses the command line; `--help` and `--version` print and succeed, anything else wrong is
/// one line and `USAGE_ERROR`.
pub fn parse<T: Parser>(name: &str) -> Result<T, ExitCode> {
    T::try_parse().map_err(|e| {
        if !e.use_stderr() {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        let rendered = e.to_string();
        let first = rendered.lines().next().unwrap_or("bad arguments").trim_start_matches("error: ");
        eprintln!("{name}: {first} (see --help)");
        ExitCode::from(USAGE_ERROR)
    })
}

/// The process's exit: the command's status, or one line and `USAGE_ERROR`.
pub fn exit(name: &str, outcome: Result<i32, String>) -> ExitCode {
    match outcome {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(message) => {
            eprintln!("{name}: {message}");
            ExitCode::from(USAGE_ERROR)
        }
    }
}
