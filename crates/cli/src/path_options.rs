//! The emulated path's command-line options (`--delay`, `--uplink-rate`, `--uplink-queue-bytes`,
//! ...) and their validation into `pantheon_link::PathConfig`, one per direction. Every driver of
//! the link model flattens [`PathArgs`] into its own command line (`pantheon emulate`,
//! `pantheon-sim run`, the simulator's batch jobs), so all of them accept the same options and
//! reject a bad one with the same one-line message, naming the option.

use std::fmt;
use std::path::PathBuf;

use clap::{Args, Parser};
use pantheon_link::{Delivery, PathConfig, PolicerConfig, QueueLimit, Timing, Trace};

/// Emulated path options for both directions (uplink: from the command outwards).
#[derive(Debug, Clone, Args)]
pub struct PathArgs {
    /// One-way propagation delay in milliseconds, each direction (fractions allowed).
    #[arg(long, value_name = "MS", default_value = "0")]
    pub delay: String,

    /// Uplink constant rate in Mbit/s, or 'unlimited' [default: 12].
    #[arg(long, value_name = "MBPS", group = "uplink_delivery")]
    pub uplink_rate: Option<String>,
    /// Uplink Mahimahi trace: one line per 1500-byte delivery opportunity, in ms; loops.
    #[arg(long, value_name = "FILE", group = "uplink_delivery")]
    pub uplink_trace: Option<PathBuf>,
    /// Uplink Poisson deliveries at this mean rate in Mbit/s.
    #[arg(long, value_name = "MBPS", group = "uplink_delivery")]
    pub uplink_poisson: Option<String>,
    /// Downlink constant rate in Mbit/s, or 'unlimited' [default: 12].
    #[arg(long, value_name = "MBPS", group = "downlink_delivery")]
    pub downlink_rate: Option<String>,
    /// Downlink Mahimahi trace (see --uplink-trace).
    #[arg(long, value_name = "FILE", group = "downlink_delivery")]
    pub downlink_trace: Option<PathBuf>,
    /// Downlink Poisson deliveries at this mean rate in Mbit/s.
    #[arg(long, value_name = "MBPS", group = "downlink_delivery")]
    pub downlink_poisson: Option<String>,

    /// Uplink queue discipline: droptail (needs a limit) or infinite [default: infinite].
    #[arg(long, value_name = "KIND")]
    pub uplink_queue: Option<String>,
    /// Uplink DropTail limit in packets.
    #[arg(long, value_name = "N", conflicts_with = "uplink_queue_bytes")]
    pub uplink_queue_packets: Option<String>,
    /// Uplink DropTail limit in bytes.
    #[arg(long, value_name = "N")]
    pub uplink_queue_bytes: Option<String>,
    /// Downlink queue discipline: droptail or infinite [default: infinite].
    #[arg(long, value_name = "KIND")]
    pub downlink_queue: Option<String>,
    /// Downlink DropTail limit in packets.
    #[arg(long, value_name = "N", conflicts_with = "downlink_queue_bytes")]
    pub downlink_queue_packets: Option<String>,
    /// Downlink DropTail limit in bytes.
    #[arg(long, value_name = "N")]
    pub downlink_queue_bytes: Option<String>,

    /// Uplink i.i.d. loss probability in [0, 1].
    #[arg(long, value_name = "P", default_value = "0")]
    pub uplink_loss: String,
    /// Downlink i.i.d. loss probability in [0, 1].
    #[arg(long, value_name = "P", default_value = "0")]
    pub downlink_loss: String,

    /// Uplink token-bucket policer: rate in Mbit/s and bucket depth in bytes.
    #[arg(long, value_name = "MBPS,BYTES")]
    pub uplink_policer: Option<String>,
    /// Downlink token-bucket policer: rate in Mbit/s and bucket depth in bytes.
    #[arg(long, value_name = "MBPS,BYTES")]
    pub downlink_policer: Option<String>,

    /// Seed for loss and Poisson delivery; the same seed reproduces the same random choices.
    #[arg(long, value_name = "N", default_value = "0")]
    pub seed: String,

    /// Clock of the path model: 'us' (exact microseconds) or 'mahimahi' (Mahimahi's whole
    /// milliseconds: delays truncate, opportunities on ms boundaries carry only earlier arrivals).
    #[arg(long, value_name = "CLOCK", default_value = "us")]
    pub timing: String,
}

/// A bad option value: which option, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    pub option: String,
    pub message: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.option, self.message)
    }
}

impl std::error::Error for ArgError {}

fn bad(option: &str, message: impl Into<String>) -> ArgError {
    ArgError { option: option.to_string(), message: message.into() }
}

/// Both directions of a validated path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPair {
    pub uplink: PathConfig,
    pub downlink: PathConfig,
    pub seed: u64,
}

impl PathPair {
    /// The uplink's seed: uplink seeds are even and downlink seeds odd, so that the two
    /// directions draw independently (every driver of the pair derives them the same way).
    pub fn uplink_seed(&self) -> u64 {
        self.seed.wrapping_mul(2)
    }

    pub fn downlink_seed(&self) -> u64 {
        self.seed.wrapping_mul(2).wrapping_add(1)
    }
}

fn parse_number(option: &str, text: &str, what: &str) -> Result<f64, ArgError> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(bad(option, format!("{what}, got '{text}'"))),
    }
}

fn parse_rate(option: &str, text: &str) -> Result<f64, ArgError> {
    let rate = parse_number(option, text, "expected a rate in Mbit/s")?;
    if rate <= 0.0 {
        return Err(bad(option, format!("rate must be positive, got '{text}'")));
    }
    Ok(rate)
}

fn parse_count(option: &str, text: &str) -> Result<u64, ArgError> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad(option, format!("expected a positive whole number, got '{text}'"))),
    }
}

fn parse_delivery(
    dir: &str,
    rate: &Option<String>,
    trace: &Option<PathBuf>,
    poisson: &Option<String>,
) -> Result<Delivery, ArgError> {
    if let Some(text) = rate {
        let option = format!("--{dir}-rate");
        if text.trim().eq_ignore_ascii_case("unlimited") {
            return Ok(Delivery::Unlimited);
        }
        return Ok(Delivery::Constant { rate_mbps: parse_rate(&option, text)? });
    }
    if let Some(file) = trace {
        let option = format!("--{dir}-trace {}", file.display());
        let text = std::fs::read_to_string(file).map_err(|e| bad(&option, format!("cannot read the trace: {e}")))?;
        return Trace::parse(&text).map(Delivery::Trace).map_err(|e| bad(&option, e.to_string()));
    }
    if let Some(text) = poisson {
        return Ok(Delivery::Poisson { rate_mbps: parse_rate(&format!("--{dir}-poisson"), text)? });
    }
    Ok(Delivery::Constant { rate_mbps: 12.0 })
}

fn parse_queue(
    dir: &str,
    kind: &Option<String>,
    packets: &Option<String>,
    bytes: &Option<String>,
) -> Result<QueueLimit, ArgError> {
    let limit = match (packets, bytes) {
        (Some(n), _) => Some(QueueLimit::Packets(parse_count(&format!("--{dir}-queue-packets"), n)?)),
        (None, Some(n)) => Some(QueueLimit::Bytes(parse_count(&format!("--{dir}-queue-bytes"), n)?)),
        (None, None) => None,
    };
    let option = format!("--{dir}-queue");
    match (kind.as_deref().map(str::trim), limit) {
        (None | Some("infinite"), None) => Ok(QueueLimit::Infinite),
        (Some("infinite"), Some(_)) => Err(bad(&option, "an infinite queue takes no packet or byte limit")),
        (None | Some("droptail"), Some(limit)) => Ok(limit),
        (Some("droptail"), None) => {
            Err(bad(&option, format!("droptail needs a limit: add --{dir}-queue-packets N or --{dir}-queue-bytes N")))
        }
        (Some(other), _) => Err(bad(&option, format!("unknown queue '{other}'; use droptail or infinite"))),
    }
}

fn parse_timing(text: &str) -> Result<Timing, ArgError> {
    match text.trim() {
        "us" => Ok(Timing::Microseconds),
        "mahimahi" => Ok(Timing::Mahimahi),
        other => Err(bad("--timing", format!("unknown clock '{other}'; use us or mahimahi"))),
    }
}

fn parse_loss(option: &str, text: &str) -> Result<f64, ArgError> {
    let p = parse_number(option, text, "expected a probability in [0, 1]")?;
    if !(0.0..=1.0).contains(&p) {
        return Err(bad(option, format!("loss probability must be in [0, 1], got '{text}'")));
    }
    Ok(p)
}

fn parse_policer(option: &str, text: &Option<String>) -> Result<Option<PolicerConfig>, ArgError> {
    let Some(text) = text else { return Ok(None) };
    let Some((rate, burst)) = text.split_once(',') else {
        return Err(bad(option, format!("expected RATE_MBPS,BURST_BYTES, got '{text}'")));
    };
    Ok(Some(PolicerConfig { rate_mbps: parse_rate(option, rate)?, burst_bytes: parse_count(option, burst)? }))
}

/// The path options alone, as a command line of their own.
#[derive(Debug, Parser)]
#[command(name = "path", no_binary_name = true, allow_negative_numbers = true)]
struct PathOnly {
    #[command(flatten)]
    path: PathArgs,
}

impl PathArgs {
    /// Validates path options given as words rather than on a command line (a simulator batch
    /// job's, a test's): the first problem, in the one line a driver's command line would print.
    pub fn validate_words(words: &[String]) -> Result<PathPair, String> {
        let parsed = PathOnly::try_parse_from(words).map_err(|e| {
            let rendered = e.to_string();
            rendered.lines().next().unwrap_or("bad path options").trim_start_matches("error: ").to_string()
        })?;
        parsed.path.to_paths().map_err(|e| e.to_string())
    }

    /// Validates every option; the first problem found is returned.
    pub fn to_paths(&self) -> Result<PathPair, ArgError> {
        let delay_ms = parse_number("--delay", &self.delay, "expected a delay in ms")?;
        if delay_ms < 0.0 {
            return Err(bad("--delay", format!("delay must not be negative, got '{}'", self.delay)));
        }
        let delay_us = (delay_ms * 1000.0).round() as u64;
        let seed = self
            .seed
            .trim()
            .parse::<u64>()
            .map_err(|_| bad("--seed", format!("expected a non-negative whole number, got '{}'", self.seed)))?;
        let timing = parse_timing(&self.timing)?;
        let uplink = PathConfig {
            delay_us,
            loss_probability: parse_loss("--uplink-loss", &self.uplink_loss)?,
            queue: parse_queue("uplink", &self.uplink_queue, &self.uplink_queue_packets, &self.uplink_queue_bytes)?,
            delivery: parse_delivery("uplink", &self.uplink_rate, &self.uplink_trace, &self.uplink_poisson)?,
            policer: parse_policer("--uplink-policer", &self.uplink_policer)?,
            timing,
        };
        let downlink = PathConfig {
            delay_us,
            loss_probability: parse_loss("--downlink-loss", &self.downlink_loss)?,
            queue: parse_queue(
                "downlink",
                &self.downlink_queue,
                &self.downlink_queue_packets,
                &self.downlink_queue_bytes,
            )?,
            delivery: parse_delivery("downlink", &self.downlink_rate, &self.downlink_trace, &self.downlink_poisson)?,
            policer: parse_policer("--downlink-policer", &self.downlink_policer)?,
            timing,
        };
        Ok(PathPair { uplink, downlink, seed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<PathPair, ArgError> {
        PathOnly::try_parse_from(args).expect("clap accepts").path.to_paths()
    }

    #[test]
    fn defaults_are_12_mbps_no_delay_infinite_queue() {
        let p = parse(&[]).unwrap();
        assert_eq!(p.uplink.delivery, Delivery::Constant { rate_mbps: 12.0 });
        assert_eq!(p.downlink.queue, QueueLimit::Infinite);
        assert_eq!(p.uplink.delay_us, 0);
        assert_eq!(p.uplink.timing, Timing::Microseconds);
    }

    #[test]
    fn timing_applies_to_both_directions() {
        let p = parse(&["--timing", "mahimahi"]).unwrap();
        assert_eq!((p.uplink.timing, p.downlink.timing), (Timing::Mahimahi, Timing::Mahimahi));
    }

    #[test]
    fn full_path() {
        let p = parse(&[
            "--delay",
            "20.5",
            "--uplink-rate",
            "100",
            "--downlink-poisson",
            "5",
            "--uplink-queue",
            "droptail",
            "--uplink-queue-bytes",
            "90000",
            "--downlink-queue-packets",
            "1",
            "--uplink-loss",
            "0.01",
            "--uplink-policer",
            "8,15000",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!(p.uplink.delay_us, 20_500);
        assert_eq!(p.uplink.queue, QueueLimit::Bytes(90_000));
        assert_eq!(p.downlink.queue, QueueLimit::Packets(1));
        assert_eq!(p.downlink.delivery, Delivery::Poisson { rate_mbps: 5.0 });
        assert_eq!(p.uplink.policer, Some(PolicerConfig { rate_mbps: 8.0, burst_bytes: 15_000 }));
        assert_eq!(p.seed, 7);
    }

    #[test]
    fn bad_values_name_their_option() {
        let cases: &[(&[&str], &str)] = &[
            (&["--uplink-rate", "0"], "--uplink-rate"),
            (&["--downlink-rate", "-3"], "--downlink-rate"),
            (&["--uplink-rate", "fast"], "--uplink-rate"),
            (&["--uplink-loss", "1.5"], "--uplink-loss"),
            (&["--downlink-loss", "-0.1"], "--downlink-loss"),
            (&["--delay", "-1"], "--delay"),
            (&["--uplink-queue", "droptail"], "--uplink-queue"),
            (&["--uplink-queue", "red"], "--uplink-queue"),
            (&["--uplink-queue", "infinite", "--uplink-queue-packets", "5"], "--uplink-queue"),
            (&["--uplink-queue-packets", "0"], "--uplink-queue-packets"),
            (&["--uplink-policer", "12"], "--uplink-policer"),
            (&["--seed", "x"], "--seed"),
            (&["--timing", "ms"], "--timing"),
        ];
        for (args, option) in cases {
            let err = parse(args).unwrap_err();
            assert_eq!(&err.option, option, "{args:?}: {err}");
        }
    }

    #[test]
    fn words_are_validated_as_a_command_line_would_be() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(PathArgs::validate_words(&words(&["--delay", "20"])).unwrap().uplink.delay_us, 20_000);
        assert_eq!(
            PathArgs::validate_words(&words(&["--uplink-loss", "2"])).unwrap_err(),
            "--uplink-loss: loss probability must be in [0, 1], got '2'"
        );
        let clash = PathArgs::validate_words(&words(&["--uplink-rate", "1", "--uplink-poisson", "1"])).unwrap_err();
        assert!(clash.starts_with("the argument '--uplink-rate <MBPS>' cannot be used with"), "{clash}");
        assert!(!clash.contains('\n'));
    }

    #[test]
    fn missing_trace_names_the_file() {
        let err = parse(&["--uplink-trace", "/nonexistent/x.trace"]).unwrap_err();
        assert!(err.option.contains("/nonexistent/x.trace"), "{err}");
    }
}
