//! The command line of `pantheon emulate`: the path options every driver of the link model shares
//! (`pantheon_cli::path_options`), the emulator's logs, and the command to run.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use pantheon_cli::path_options::PathArgs;
use pantheon_link::stalls::StallConfig;

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

    /// Hold departures back as a stalling host would: N stalls a second at random (Poisson), each
    /// MS ms long on average (exponential); what falls due during one leaves when it ends. Off by
    /// default. For comparisons with Mahimahi on a loaded host (docs/emulator.md).
    #[arg(long, value_name = "N,MS", value_parser = parse_stalls)]
    pub stalls: Option<StallConfig>,

    /// The command to run inside the emulated namespace, after '--'.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn parse_stalls(text: &str) -> Result<StallConfig, String> {
    let expected = || format!("'{text}': expected N,MS (stalls a second, their mean length in ms), e.g. 20,2");
    let (per_s, mean_ms) = text.split_once(',').ok_or_else(expected)?;
    let number = |field: &str| field.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0);
    match (number(per_s), number(mean_ms)) {
        (Some(per_s), Some(mean_ms)) if per_s * mean_ms < 1000.0 => {
            Ok(StallConfig { per_s, mean_us: mean_ms * 1000.0 })
        }
        (Some(_), Some(_)) => Err(format!("'{text}': stalls would fill every second (N × MS must stay below 1000)")),
        _ => Err(expected()),
    }
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
        assert_eq!(args.stalls, None);
    }

    #[test]
    fn stalls_take_a_rate_and_a_mean_length() {
        let parse = |value: &str| EmulateArgs::try_parse_from(["pantheon-emu", "--stalls", value, "--", "true"]);
        assert_eq!(parse("20,2").unwrap().stalls, Some(StallConfig { per_s: 20.0, mean_us: 2000.0 }));
        assert_eq!(parse("0.5, 1.5").unwrap().stalls, Some(StallConfig { per_s: 0.5, mean_us: 1500.0 }));
        for bad in ["20", "20,0", "-1,2", "x,2", "20,nan", "500,2"] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
    }
}
