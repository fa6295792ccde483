//! The command line of `pantheon emulate`: the path options every driver of the link model shares
//! (`pantheon_cli::path_options`), the emulator's logs, and the command to run.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use pantheon_cli::path_options::PathArgs;

#[derive(Debug, Parser)]
#[command(
    name = "pantheon emulate",
    allow_negative_numbers = true,
    about = "Run CMD in a fresh network namespace whose only way out is an emulated path.",
    long_about = "Run CMD in a fresh network namespace whose only way out is an emulated path to the \
namespace this command was started in. CMD finds the peer's address in $MAHIMAHI_BASE (and \
$PANTHEON_PEER). Uplink is the direction from CMD outwards. Times are in ms on the command line \
and in us in the logs. Exit status is CMD's.",
    after_help = "Example: pantheon emulate --delay 20 --uplink-rate 12 --downlink-rate 12 -- sh -c 'ping -c 3 $MAHIMAHI_BASE'"
)]
pub struct EmulateArgs {
    #[command(flatten)]
    pub path: PathArgs,

    /// Per-packet uplink log at microsecond resolution (arrivals, departures, drops, opportunities).
    #[arg(long, value_name = "FILE")]
    pub uplink_log: Option<PathBuf>,
    /// Per-packet downlink log at microsecond resolution.
    #[arg(long, value_name = "FILE")]
    pub downlink_log: Option<PathBuf>,
    /// Uplink log in Mahimahi's mm-link text form (ms), readable by Mahimahi's tools.
    #[arg(long, value_name = "FILE")]
    pub uplink_mm_log: Option<PathBuf>,
    /// Downlink log in Mahimahi's mm-link text form (ms).
    #[arg(long, value_name = "FILE")]
    pub downlink_mm_log: Option<PathBuf>,

    /// The command to run inside the emulated namespace, after '--'.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_options_logs_and_the_command_share_one_line() {
        let argv = ["pantheon-emu", "--delay", "20", "--uplink-log", "up.log", "--", "sh", "-c", "true"];
        let args = EmulateArgs::try_parse_from(argv).expect("clap accepts");
        assert_eq!(args.path.to_paths().unwrap().uplink.delay_us, 20_000);
        assert_eq!(args.uplink_log, Some(PathBuf::from("up.log")));
        assert_eq!(args.command, ["sh", "-c", "true"]);
    }
}
