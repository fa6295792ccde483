//! The emulated path's command-line options (`--delay`, `--uplink-rate`, `--uplink-queue-bytes`,
//! ...) and their validation into `pantheon_link::PathConfig`, one per direction. Every driver of
//! the link model flattens [`PathArgs`] into its own command line (`pantheon emulate`,
//! `pantheon-sim run`, the simulator's batch jobs), so all of them accept the same options and
//! reject a bad one with the same one-line message, naming the option.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Parser};
use pantheon_link::bounds::{MAX_BUFFER, MAX_DELAY_US, MAX_RATE_MBPS, MAX_TRACE_FILE_BYTES, MIN_RATE_MBPS};
use pantheon_link::queue::{KINDS, NAMES};
use pantheon_link::{Aqm, Delivery, PathConfig, PolicerConfig, QueueLimit, Timing, Trace};

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

    /// Uplink queue discipline: droptail (needs a limit), infinite, codel, pie, fq-codel, red or
    /// dualpi2 [default: infinite].
    #[arg(long, value_name = "KIND")]
    pub uplink_queue: Option<String>,
    /// Uplink queue parameters in Mahimahi's form, e.g. codel's 'packets=1000,target=5,interval=100'
    /// (times in ms; packets= or bytes= is the limit).
    #[arg(long, value_name = "ARGS")]
    pub uplink_queue_args: Option<String>,
    /// Uplink DropTail limit in packets.
    #[arg(long, value_name = "N", conflicts_with = "uplink_queue_bytes")]
    pub uplink_queue_packets: Option<String>,
    /// Uplink DropTail limit in bytes.
    #[arg(long, value_name = "N")]
    pub uplink_queue_bytes: Option<String>,
    /// Downlink queue discipline (see --uplink-queue) [default: infinite].
    #[arg(long, value_name = "KIND")]
    pub downlink_queue: Option<String>,
    /// Downlink queue parameters (see --uplink-queue-args).
    #[arg(long, value_name = "ARGS")]
    pub downlink_queue_args: Option<String>,
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
    if !(MIN_RATE_MBPS..=MAX_RATE_MBPS).contains(&rate) {
        return Err(bad(
            option,
            format!("rate must be from {MIN_RATE_MBPS} to {MAX_RATE_MBPS} Mbit/s (1 kbit/s to 1 Tbit/s), got '{text}'"),
        ));
    }
    Ok(rate)
}

/// A buffer's size (a queue limit, a policer's bucket), in bytes or packets.
fn parse_count(option: &str, text: &str) -> Result<u64, ArgError> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_BUFFER).contains(&n) => Ok(n),
        _ => Err(bad(option, format!("expected a whole number from 1 to {MAX_BUFFER} (2^32), got '{text}'"))),
    }
}

fn parse_delay_us(text: &str) -> Result<u64, ArgError> {
    let delay_ms = parse_number("--delay", text, "expected a delay in ms")?;
    if delay_ms < 0.0 {
        return Err(bad("--delay", format!("delay must not be negative, got '{text}'")));
    }
    let max_ms = MAX_DELAY_US / 1000;
    if delay_ms > max_ms as f64 {
        return Err(bad("--delay", format!("delay must be at most {max_ms} ms (one hour), got '{text}'")));
    }
    Ok((delay_ms * 1000.0).round() as u64)
}

/// A trace file's text, read only if it is a regular file of at most `MAX_TRACE_FILE_BYTES`:
/// `/dev/zero` or a FIFO would never end, and a huge (or sparse) file is refused by its size
/// rather than read.
fn read_trace(file: &Path) -> Result<String, String> {
    let regular = |metadata: std::fs::Metadata| -> Result<(), String> {
        if !metadata.is_file() {
            let kind = if metadata.is_dir() { "a directory" } else { "not a regular file (a device or a FIFO?)" };
            return Err(format!("cannot read the trace: it is {kind}"));
        }
        if metadata.len() > MAX_TRACE_FILE_BYTES {
            return Err(format!(
                "the trace is {} bytes, more than the {MAX_TRACE_FILE_BYTES} bytes ({} MiB) a trace may have",
                metadata.len(),
                MAX_TRACE_FILE_BYTES >> 20
            ));
        }
        Ok(())
    };
    // Judged before opening (opening a FIFO waits for a writer), and again on what was opened.
    regular(std::fs::metadata(file).map_err(|e| format!("cannot read the trace: {e}"))?)?;
    let opened = File::open(file).map_err(|e| format!("cannot read the trace: {e}"))?;
    regular(opened.metadata().map_err(|e| format!("cannot read the trace: {e}"))?)?;
    let mut bytes = Vec::new();
    opened.take(MAX_TRACE_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read the trace: {e}"))?;
    if bytes.len() as u64 > MAX_TRACE_FILE_BYTES {
        return Err(format!("the trace grew past {MAX_TRACE_FILE_BYTES} bytes while it was read"));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!("the trace is not text (a byte that is not UTF-8 at offset {})", e.utf8_error().valid_up_to())
    })
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
        let text = read_trace(file).map_err(|e| bad(&option, e))?;
        return Trace::parse(&text).map(Delivery::Trace).map_err(|e| bad(&option, e.to_string()));
    }
    if let Some(text) = poisson {
        return Ok(Delivery::Poisson { rate_mbps: parse_rate(&format!("--{dir}-poisson"), text)? });
    }
    Ok(Delivery::Constant { rate_mbps: 12.0 })
}

/// A direction's queue options: `--{dir}-queue KIND`, `--{dir}-queue-args ARGS` (Mahimahi's
/// form) and the limit flags `--{dir}-queue-packets N` / `--{dir}-queue-bytes N`.
struct QueueOptions<'a> {
    kind: &'a Option<String>,
    args: &'a Option<String>,
    packets: &'a Option<String>,
    bytes: &'a Option<String>,
}

fn parse_queue(dir: &str, options: QueueOptions<'_>) -> Result<(QueueLimit, Aqm), ArgError> {
    let flag_limit = match (options.packets, options.bytes) {
        (Some(n), _) => Some(QueueLimit::Packets(parse_count(&format!("--{dir}-queue-packets"), n)?)),
        (None, Some(n)) => Some(QueueLimit::Bytes(parse_count(&format!("--{dir}-queue-bytes"), n)?)),
        (None, None) => None,
    };
    let option = format!("--{dir}-queue");
    let args_option = format!("--{dir}-queue-args");
    let kind = options.kind.as_deref().map(str::trim);
    let args = options.args.as_deref().unwrap_or("");
    if kind.is_none() && options.args.is_some() {
        return Err(bad(&args_option, format!("name the queue too: add --{dir}-queue KIND ({KINDS})")));
    }
    let kind = kind.unwrap_or(if flag_limit.is_some() { "droptail" } else { "infinite" });
    if !NAMES.contains(&kind) {
        return Err(bad(&option, format!("unknown queue '{kind}'; use {KINDS}")));
    }
    let (aqm, args_limit) = Aqm::parse(kind, args).map_err(|e| bad(&args_option, e))?;
    let limit = match (flag_limit, args_limit) {
        (Some(_), Some(_)) => {
            return Err(bad(&args_option, format!("the limit is given twice: here and as --{dir}-queue-packets/bytes")))
        }
        (limit, None) | (None, limit) => limit,
    };
    match (kind, limit) {
        ("infinite", Some(_)) => Err(bad(&option, "an infinite queue takes no packet or byte limit")),
        ("droptail", None) => {
            Err(bad(&option, format!("droptail needs a limit: add --{dir}-queue-packets N or --{dir}-queue-bytes N")))
        }
        (_, limit) => Ok((limit.unwrap_or_else(|| aqm.default_limit()), aqm)),
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
        let delay_us = parse_delay_us(&self.delay)?;
        let seed = self
            .seed
            .trim()
            .parse::<u64>()
            .map_err(|_| bad("--seed", format!("expected a non-negative whole number, got '{}'", self.seed)))?;
        let timing = parse_timing(&self.timing)?;
        let (uplink_queue, uplink_aqm) = parse_queue(
            "uplink",
            QueueOptions {
                kind: &self.uplink_queue,
                args: &self.uplink_queue_args,
                packets: &self.uplink_queue_packets,
                bytes: &self.uplink_queue_bytes,
            },
        )?;
        let (downlink_queue, downlink_aqm) = parse_queue(
            "downlink",
            QueueOptions {
                kind: &self.downlink_queue,
                args: &self.downlink_queue_args,
                packets: &self.downlink_queue_packets,
                bytes: &self.downlink_queue_bytes,
            },
        )?;
        let uplink = PathConfig {
            delay_us,
            loss_probability: parse_loss("--uplink-loss", &self.uplink_loss)?,
            queue: uplink_queue,
            aqm: uplink_aqm,
            delivery: parse_delivery("uplink", &self.uplink_rate, &self.uplink_trace, &self.uplink_poisson)?,
            policer: parse_policer("--uplink-policer", &self.uplink_policer)?,
            timing,
        };
        let downlink = PathConfig {
            delay_us,
            loss_probability: parse_loss("--downlink-loss", &self.downlink_loss)?,
            queue: downlink_queue,
            aqm: downlink_aqm,
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
    fn aqms_take_mahimahis_arguments_and_linuxs_default_limits() {
        let p = parse(&[
            "--uplink-queue",
            "codel",
            "--uplink-queue-args",
            "packets=100,target=5,interval=100",
            "--downlink-queue",
            "fq-codel",
        ])
        .unwrap();
        assert_eq!((p.uplink.aqm.name(), p.uplink.queue), ("codel", QueueLimit::Packets(100)));
        assert_eq!((p.downlink.aqm.name(), p.downlink.queue), ("fq-codel", QueueLimit::Packets(10_240)));
        let limit_flag = parse(&["--uplink-queue", "pie", "--uplink-queue-bytes", "60000"]).unwrap();
        assert_eq!((limit_flag.uplink.aqm.name(), limit_flag.uplink.queue), ("pie", QueueLimit::Bytes(60_000)));
        let droptail_args = parse(&["--uplink-queue", "droptail", "--uplink-queue-args", "packets=14"]).unwrap();
        assert_eq!((droptail_args.uplink.aqm, droptail_args.uplink.queue), (Aqm::DropTail, QueueLimit::Packets(14)));
        for kind in ["red", "dualpi2", "fq_codel"] {
            assert!(parse(&["--uplink-queue", kind]).is_ok(), "{kind}");
        }
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
            (&["--uplink-queue", "blue"], "--uplink-queue"),
            (&["--uplink-queue-args", "packets=5"], "--uplink-queue-args"),
            (&["--uplink-queue", "codel", "--uplink-queue-args", "target=-1"], "--uplink-queue-args"),
            (&["--uplink-queue", "codel", "--uplink-queue-args", "flows=4"], "--uplink-queue-args"),
            (
                &["--uplink-queue", "pie", "--uplink-queue-args", "packets=5", "--uplink-queue-packets", "5"],
                "--uplink-queue-args",
            ),
            (&["--uplink-queue", "infinite", "--uplink-queue-args", "packets=5"], "--uplink-queue"),
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
    fn numbers_beyond_the_model_are_refused_naming_the_bound() {
        let cases: &[(&[&str], &str)] = &[
            (&["--delay", "1e300"], "--delay: delay must be at most 3600000 ms (one hour), got '1e300'"),
            (&["--delay", "1.9e16"], "--delay: delay must be at most 3600000 ms (one hour), got '1.9e16'"),
            (&["--delay", "1e17"], "--delay: delay must be at most 3600000 ms (one hour), got '1e17'"),
            (&["--delay", "3600000.001"], "at most 3600000 ms"),
            (&["--delay", "nan"], "--delay: expected a delay in ms, got 'nan'"),
            (&["--delay", "inf"], "--delay: expected a delay in ms, got 'inf'"),
            (&["--uplink-rate", "1e300"], "--uplink-rate: rate must be from 0.001 to 1000000 Mbit/s"),
            (&["--downlink-poisson", "2e6"], "--downlink-poisson: rate must be from 0.001 to 1000000 Mbit/s"),
            (&["--uplink-rate", "1e-300"], "--uplink-rate: rate must be from 0.001"),
            (&["--uplink-rate", "NaN"], "--uplink-rate: expected a rate in Mbit/s, got 'NaN'"),
            (&["--uplink-loss", "nan"], "--uplink-loss: expected a probability in [0, 1], got 'nan'"),
            (
                &["--uplink-queue-bytes", "4294967297"],
                "--uplink-queue-bytes: expected a whole number from 1 to 4294967296",
            ),
            (&["--downlink-queue-packets", "18446744073709551615"], "from 1 to 4294967296"),
            (&["--uplink-policer", "1e300,1500"], "--uplink-policer: rate must be from"),
            (&["--uplink-policer", "12,99999999999"], "--uplink-policer: expected a whole number from 1 to"),
        ];
        for (args, expected) in cases {
            let err = parse(args).unwrap_err().to_string();
            assert!(err.starts_with(expected) || err.contains(expected), "{args:?}: {err}");
        }
        let edge = parse(&["--delay", "3600000", "--uplink-rate", "1e6", "--downlink-rate", "0.001"]).unwrap();
        assert_eq!(edge.uplink.delay_us, 3_600_000_000);
        assert!(parse(&["--uplink-queue-bytes", "4294967296"]).is_ok());
    }

    /// A scratch file of this test process's own, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let path = std::env::temp_dir().join(format!("pantheon-cli-{}-{name}", std::process::id()));
            let _ = std::fs::remove_file(&path);
            Scratch(path)
        }

        fn arg(&self) -> &str {
            self.0.to_str().expect("temp paths are UTF-8 here")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn trace_error(file: &str) -> String {
        let err = parse(&["--uplink-trace", file]).unwrap_err();
        assert!(err.option.starts_with("--uplink-trace"), "{err}");
        err.message
    }

    #[test]
    fn traces_that_are_not_regular_files_are_refused_unread() {
        assert!(trace_error("/dev/zero").contains("not a regular file"));
        assert!(trace_error("/").contains("it is a directory"));
        let fifo = Scratch::new("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo.0).status().expect("mkfifo runs");
        assert!(made.success());
        // Opening a FIFO would wait for a writer forever: it is judged before it is opened.
        assert!(trace_error(fifo.arg()).contains("not a regular file"));
    }

    #[test]
    fn a_huge_sparse_trace_is_refused_by_its_size_at_once() {
        let sparse = Scratch::new("sparse");
        File::create(&sparse.0).unwrap().set_len(2 << 30).unwrap();
        let started = std::time::Instant::now();
        let message = trace_error(sparse.arg());
        assert!(message.starts_with("the trace is 2147483648 bytes, more than the 134217728 bytes"), "{message}");
        assert!(started.elapsed().as_secs_f64() < 1.0, "took {:?}", started.elapsed());
    }

    #[test]
    fn trace_contents_past_the_bounds_are_one_short_line() {
        let file = Scratch::new("wrap");
        std::fs::write(&file.0, "1\n18446744073709552\n").unwrap();
        assert_eq!(
            trace_error(file.arg()),
            "line 2: timestamp 18446744073709552 ms is past the longest trace the model takes, 86400000 ms (one day)"
        );
        std::fs::write(&file.0, [b'1', b'\n', 0xff, b'\n']).unwrap();
        assert!(trace_error(file.arg()).contains("not UTF-8 at offset 2"));
        std::fs::write(&file.0, format!("1\n{}\n", "9".repeat(1 << 20))).unwrap();
        let message = trace_error(file.arg());
        assert!(message.starts_with("line 2 is 1048576 bytes long") && message.len() < 200, "{message}");
    }

    #[test]
    fn missing_trace_names_the_file() {
        let err = parse(&["--uplink-trace", "/nonexistent/x.trace"]).unwrap_err();
        assert!(err.option.contains("/nonexistent/x.trace"), "{err}");
    }
}
