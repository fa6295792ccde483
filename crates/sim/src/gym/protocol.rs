//! `pantheon-sim gym`: environments stepped over standard input and output, many per process,
//! so that a Python trainer steps N of them in one round trip (docs/gym.md). Requests are lines;
//! every reply is a header line, then for `ok` that many bytes of records:
//!
//! ```text
//! reset {"env": 0, "path": ["--delay", "20"], "seed": 7, "step_ms": 10, "steps": 1000, "max_cwnd_packets": 10000}
//!   → ok 120\n + one record
//! step 3 2 - x1.25       (an action per environment, in order: one of Indigo's five, a window
//!                         multiplier, or "-": leave it where it is)
//!   → ok 480\n + a record per environment
//!   → error env 2: the episode is over: reset the environment\n
//! ```
//!
//! A record is `gym::RECORD_VALUES` little-endian f64 (gym.rs says which is which); for an
//! environment left where it is, its last record. `reset` of environment `len` adds one; of an
//! existing one, starts its new episode. A mistake is a one-line `error` reply and the process
//! goes on; an environment whose step failed must be reset before it steps again. Binary records
//! rather than text because reading 15 floats as text costs Python 3.5 µs a record (split and
//! float(); numpy.frombuffer of the binary: 0.5 µs), more than simulating the 10 ms interval at
//! 12 Mbit/s (2.5 µs: bench/gym_speed.py's batch job).

use std::io::{self, BufRead, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::Deserialize;

use super::{Action, Env, EnvConfig, Record};

/// Longest request line: 1 MiB (a path with a long option list; without a bound a line with no
/// newline would be read until memory ran out).
const MAX_LINE_BYTES: u64 = 1 << 20;
/// Most environments in one process (each holds a run's queues).
const MAX_ENVS: usize = 4096;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reset {
    env: usize,
    #[serde(default)]
    path: Vec<String>,
    #[serde(default)]
    seed: u64,
    step_ms: f64,
    steps: u64,
    max_cwnd_packets: f64,
}

/// Environments by number.
#[derive(Default)]
struct Envs(Vec<Env>);

impl Envs {
    fn reset(&mut self, json: &str, out: &mut Vec<u8>) -> Result<(), String> {
        let r: Reset = serde_json::from_str(json).map_err(|e| format!("bad reset: {e}"))?;
        if r.env > self.0.len() || r.env >= MAX_ENVS {
            return Err(format!(
                "reset: env {} is not the next environment ({} exist, at most {MAX_ENVS})",
                r.env,
                self.0.len()
            ));
        }
        let config = EnvConfig {
            path: r.path,
            seed: r.seed,
            step_ms: r.step_ms,
            steps: r.steps,
            max_cwnd_packets: r.max_cwnd_packets,
        };
        let env = Env::reset(&config)?;
        put(out, env.record());
        if r.env == self.0.len() {
            self.0.push(env);
        } else {
            self.0[r.env] = env;
        }
        Ok(())
    }

    fn step(&mut self, actions: &str, out: &mut Vec<u8>) -> Result<(), String> {
        let count = actions.split_ascii_whitespace().count();
        if count != self.0.len() {
            return Err(format!("step: {count} actions for {} environments", self.0.len()));
        }
        for (i, (env, token)) in self.0.iter_mut().zip(actions.split_ascii_whitespace()).enumerate() {
            if token == "-" {
                put(out, env.record());
                continue;
            }
            let action = match token.strip_prefix('x') {
                Some(factor) => factor.parse::<f64>().map(Action::Scale).ok(),
                None => token.parse::<usize>().map(Action::Indigo).ok(),
            };
            let action =
                action.ok_or_else(|| format!("env {i}: expected an action 0 to 4, xFACTOR or '-', got '{token}'"))?;
            put(out, env.step(action).map_err(|e| format!("env {i}: {e}"))?);
        }
        Ok(())
    }

    /// The reply to one request line (without its newline): the records, or the error.
    fn answer(&mut self, line: &str, out: &mut Vec<u8>) -> Result<(), String> {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        match verb {
            "reset" => self.reset(rest, out),
            "step" => self.step(rest, out),
            _ => Err(format!("unknown request '{verb}': expected reset or step")),
        }
    }
}

fn put(out: &mut Vec<u8>, record: &Record) {
    for value in record {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// Answers requests from `input` on `output` until the input ends.
pub fn serve<R: BufRead, W: Write>(mut input: R, mut output: W) -> io::Result<()> {
    let mut envs = Envs::default();
    let mut line = Vec::new();
    let mut records = Vec::new();
    loop {
        line.clear();
        if (&mut input).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        records.clear();
        let result = if line.len() as u64 > MAX_LINE_BYTES {
            input.skip_until(b'\n')?;
            Err(format!("a request is longer than {MAX_LINE_BYTES} bytes (1 MiB)"))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            match std::str::from_utf8(line.trim_ascii()) {
                Ok(text) => catch_unwind(AssertUnwindSafe(|| envs.answer(text, &mut records))).unwrap_or_else(|_| {
                    envs = Envs::default();
                    Err("internal error: the simulation panicked (a bug; please report the request); every environment must be reset".into())
                }),
                Err(_) => Err("a request is not UTF-8 text".into()),
            }
        };
        match result {
            Ok(()) => {
                writeln!(output, "ok {}", records.len())?;
                output.write_all(&records)?;
            }
            Err(e) => writeln!(output, "error {}", e.replace('\n', " "))?,
        }
        output.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gym::{CWND_PACKETS, INPUTS, MEASUREMENTS, RECORD_VALUES, THROUGHPUT_MBPS};

    /// The replies to `requests`: each the header line and its records.
    fn replies(requests: &str) -> Vec<(String, Vec<Record>)> {
        let mut output = Vec::new();
        serve(requests.as_bytes(), &mut output).unwrap();
        let mut rest = &output[..];
        let mut all = Vec::new();
        while !rest.is_empty() {
            let end = rest.iter().position(|&b| b == b'\n').unwrap();
            let header = String::from_utf8(rest[..end].to_vec()).unwrap();
            rest = &rest[end + 1..];
            let bytes = header.strip_prefix("ok ").map_or(0, |n| n.parse::<usize>().unwrap());
            let records = rest[..bytes]
                .chunks(8 * RECORD_VALUES)
                .map(|chunk| {
                    let mut r = [0.0; RECORD_VALUES];
                    for (v, b) in r.iter_mut().zip(chunk.chunks(8)) {
                        *v = f64::from_le_bytes(b.try_into().unwrap());
                    }
                    r
                })
                .collect();
            rest = &rest[bytes..];
            all.push((header, records));
        }
        all
    }

    const RESET: &str = r#""path": ["--delay", "10", "--uplink-rate", "12", "--downlink-rate", "12"], "step_ms": 10, "steps": 3, "max_cwnd_packets": 1000"#;

    #[test]
    fn a_multiplier_scales_the_window_within_its_floor_and_ceiling() {
        let requests = format!("reset {{\"env\": 0, {RESET}}}\nstep x1.5\nstep x0.01\nstep x1e9\n");
        let r = replies(&requests);
        let cwnd: Vec<f64> = r[1..].iter().map(|(_, records)| records[0][CWND_PACKETS]).collect();
        assert_eq!(cwnd, [15.0, 2.0, 1000.0]);
        // Its observation: the measurements, then the multiplier where Indigo's one-hot was.
        assert_eq!(r[1].1[0][MEASUREMENTS..INPUTS], [1.5, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(r[3].1[0][MEASUREMENTS], 1e9);
    }

    #[test]
    fn two_environments_step_together_and_end_with_their_episodes() {
        let requests = format!(
            "reset {{\"env\": 0, {RESET}}}\nreset {{\"env\": 1, {RESET}}}\nstep 4 2\nstep 4 -\nstep 4 2\nstep 2 2\nstep - 2\n"
        );
        let r = replies(&requests);
        assert_eq!(
            r.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>()[..5],
            ["ok 120", "ok 120", "ok 240", "ok 240", "ok 240"]
        );
        // ×2 from 10 packets, three times; +0 holds it.
        assert_eq!([r[2].1[0][CWND_PACKETS], r[3].1[0][CWND_PACKETS], r[4].1[0][CWND_PACKETS]], [20.0, 40.0, 80.0]);
        assert_eq!(r[4].1[1][CWND_PACKETS], 10.0);
        // Env 1 left where it was returns its last record again.
        assert_eq!(r[3].1[1], r[2].1[1]);
        assert!(r[4].1[0][THROUGHPUT_MBPS] > 0.0);
        // Env 0 has run its 3 steps.
        assert_eq!(r[5].0, "error env 0: the episode is over: reset the environment");
        assert_eq!(r[6].0, "ok 240");
    }

    #[test]
    fn mistakes_are_one_line_and_the_process_goes_on() {
        let requests = format!(
            "reset {{\"env\": 0, \"path\": [\"--uplink-rate\", \"0\"], \"step_ms\": 10, \"steps\": 3, \"max_cwnd_packets\": 1000}}\nreset {{\"env\": 1, {RESET}}}\nreset {{\"env\": 0, {RESET}}}\nstep 7\nstep 1 1\nfly\nstep x-1\nstep xNaN\nstep up\n"
        );
        let headers: Vec<String> = replies(&requests).into_iter().map(|(h, _)| h).collect();
        assert_eq!(headers[0], "error --uplink-rate: rate must be positive, got '0'");
        assert_eq!(headers[1], "error reset: env 1 is not the next environment (0 exist, at most 4096)");
        assert_eq!(headers[2], "ok 120");
        assert_eq!(headers[3], "error env 0: action: expected 0 to 4, got 7");
        assert_eq!(headers[4], "error step: 2 actions for 1 environments");
        assert_eq!(headers[5], "error unknown request 'fly': expected reset or step");
        assert_eq!(headers[6], "error env 0: action: expected a positive window multiplier, got -1");
        assert_eq!(headers[7], "error env 0: action: expected a positive window multiplier, got NaN");
        assert_eq!(headers[8], "error env 0: expected an action 0 to 4, xFACTOR or '-', got 'up'");
    }
}
