//! `pantheon-sim run --flows-file FILE`: a run's senders as CSV, one row per sender, for runs that
//! `--flow` cannot say (transfers, extra delays, thousands of senders). The harness writes it
//! from its plan (python/pantheon/plan.py's `Flow`):
//!
//! ```text
//! flow,cc,start_s,duration_s,bytes,extra_delay_ms
//! 0,cubic,0,,,0                      a bulk flow: one row, no bytes
//! 1,"copa:delta=0.5",0.25,,150000,30 a flow with transfers: one row per transfer, the same cc
//! 1,"copa:delta=0.5",0.75,,2000,30   and extra delay on each
//! ```
//!
//! - `flow`: the records' flow number, from 0; rows come in flow order, without gaps;
//! - `cc`: a crates/cc spec (CSV-quoted when it holds commas), checked once per flow;
//! - `start_s`: the sender's start, seconds ≥ 0 before the run's end (a transfer's planned start);
//! - `duration_s`: how long it may run, seconds > 0; empty: to the run's end. A transfer's sender
//!   ends when its transfer is acknowledged or at its end, whichever comes first;
//! - `bytes`: a transfer of that many bytes (> 0; ⌈bytes / 1464⌉ datagrams); empty: a bulk flow,
//!   which has one row;
//! - `extra_delay_ms`: the flow's extra one-way delay each way, ms ≥ 0 (empty: 0).
//!
//! The header names the six columns in any order; anything else is a one-line error naming the
//! file, the line and the column. At most `MAX_ROWS` rows.

use std::path::Path;

use pantheon_cc::flow::controller;

use crate::scenario::{extra_delay_us, seconds_to_us, sender_start_us, FlowPlan, MAX_FLOWS, MAX_SENDERS};

/// Most rows in a flows file: one per sender.
pub const MAX_ROWS: usize = MAX_SENDERS;
/// The columns, in the order the harness writes them.
pub const COLUMNS: [&str; 6] = ["flow", "cc", "start_s", "duration_s", "bytes", "extra_delay_ms"];
/// Largest file read: 100 000 rows of a long spec and its numbers fit well within it.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads the senders of the flows file at `path` for a run of `runtime_us`.
pub fn read(path: &Path, runtime_us: u64) -> Result<Vec<FlowPlan>, String> {
    let name = path.display().to_string();
    let size = std::fs::metadata(path).map_err(|e| format!("--flows-file {name}: {e}"))?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("--flows-file {name}: {size} bytes, more than a flows file of {MAX_ROWS} rows needs"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("--flows-file {name}: {e}"))?;
    parse(&name, &text, runtime_us)
}

/// The first row of the flow being read: what its later rows must agree with.
struct FlowHead {
    flow: usize,
    line: usize,
    cc: String,
    ecn: bool,
    extra_delay_us: u64,
    bulk: bool,
}

/// The senders of a flows file's `text`; `name` names the file in messages.
pub fn parse(name: &str, text: &str, runtime_us: u64) -> Result<Vec<FlowPlan>, String> {
    let mut lines = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim_end_matches('\r')))
        .filter(|(_, line)| !line.trim().is_empty());
    let Some((header_line, header)) = lines.next() else {
        return Err(format!("{name}: empty: expected the header {}, then one row per sender", COLUMNS.join(",")));
    };
    let at = |line: usize| format!("{name}: line {line}");
    let header = fields(header).map_err(|e| format!("{}: {e}", at(header_line)))?;
    // Where each of COLUMNS is in a row.
    let mut place = [usize::MAX; COLUMNS.len()];
    for (i, column) in header.iter().enumerate() {
        let column = column.trim();
        let Some(c) = COLUMNS.iter().position(|known| *known == column) else {
            return Err(format!(
                "{}, column {}: unknown column '{column}'; the columns are {}",
                at(header_line),
                i + 1,
                COLUMNS.join(",")
            ));
        };
        if place[c] != usize::MAX {
            return Err(format!("{}, column {}: '{column}' a second time", at(header_line), i + 1));
        }
        place[c] = i;
    }
    if let Some(c) = place.iter().position(|&p| p == usize::MAX) {
        return Err(format!("{}: no column '{}'; the columns are {}", at(header_line), COLUMNS[c], COLUMNS.join(",")));
    }
    let mut plans: Vec<FlowPlan> = Vec::new();
    let mut head: Option<FlowHead> = None;
    for (line, text) in lines {
        if plans.len() == MAX_ROWS {
            return Err(format!("{}: more than {MAX_ROWS} rows, the most a run may have", at(line)));
        }
        let row = fields(text).map_err(|e| format!("{}: {e}", at(line)))?;
        if row.len() != header.len() {
            return Err(format!("{}: {} fields, where the header has {}", at(line), row.len(), header.len()));
        }
        let field = |c: usize| row[place[c]].trim();
        let bad = |c: usize, what: String| format!("{}, column {}: {what}", at(line), COLUMNS[c]);
        let flow = parse_flow(field(0), head.as_ref()).map_err(|e| bad(0, e))?;
        let extra_delay_us = parse_extra_delay_us(field(5)).map_err(|e| bad(5, e))?;
        let bytes = parse_bytes(field(4)).map_err(|e| bad(4, e))?;
        let start_us = parse_start_us(field(2), runtime_us).map_err(|e| bad(2, e))?;
        let duration_us = parse_duration_us(field(3)).map_err(|e| bad(3, e))?;
        let cc = field(1);
        match &head {
            Some(h) if h.flow == flow => {
                if h.bulk {
                    return Err(bad(
                        4,
                        format!(
                            "flow {flow} is a bulk flow (line {} has no bytes), which is one row; a flow with transfers has bytes on every row",
                            h.line
                        ),
                    ));
                }
                if bytes.is_none() {
                    return Err(bad(
                        4,
                        format!("flow {flow} has transfers (line {}), so every row of it needs bytes", h.line),
                    ));
                }
                if cc != h.cc {
                    return Err(bad(
                        1,
                        format!("flow {flow}'s rows disagree: '{cc}' here, '{}' on line {}", h.cc, h.line),
                    ));
                }
                if extra_delay_us != h.extra_delay_us {
                    return Err(bad(
                        5,
                        format!(
                            "flow {flow}'s rows disagree: {} here, {} on line {}",
                            field(5),
                            h.extra_delay_us as f64 / 1e3,
                            h.line
                        ),
                    ));
                }
            }
            _ => {
                controller::build(cc).map_err(|e| bad(1, e.to_string()))?;
                let ecn = controller::ecn(cc).map_err(|e| bad(1, e.to_string()))?;
                head = Some(FlowHead { flow, line, cc: cc.to_string(), ecn, extra_delay_us, bulk: bytes.is_none() });
            }
        }
        let h = head.as_ref().expect("set for this row's flow above");
        let end_us = duration_us.map_or(runtime_us, |d| start_us.saturating_add(d).min(runtime_us));
        plans.push(FlowPlan { flow, cc: h.cc.clone(), ecn: h.ecn, start_us, end_us, bytes, extra_delay_us });
    }
    if plans.is_empty() {
        return Err(format!("{name}: no rows after the header: give one row per sender"));
    }
    Ok(plans)
}

/// The fields of one CSV line (RFC 4180: a field in double quotes may hold commas, and `""` is a
/// quote within it; a line break within a field is not supported).
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(format!("field {}: a quote is never closed", out.len() + 1)),
                }
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Ok(out);
                }
                Some(',') => out.push(field),
                Some(c) => return Err(format!("field {}: '{c}' after its closing quote", out.len() + 1)),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Ok(out);
                    }
                    Some(',') => break,
                    Some(c) => field.push(c),
                }
            }
            out.push(field);
        }
    }
}

/// A row's flow number, which must be the previous row's or the next (from 0).
fn parse_flow(text: &str, head: Option<&FlowHead>) -> Result<usize, String> {
    let flow =
        text.parse::<usize>().map_err(|_| format!("expected a flow number (a whole number from 0), got '{text}'"))?;
    if flow >= MAX_FLOWS {
        return Err(format!("flow {flow}: a run has at most {MAX_FLOWS} flows, numbered up to {}", MAX_FLOWS - 1));
    }
    match head.map(|h| h.flow) {
        None if flow != 0 => Err(format!("flows are numbered from 0, and the first row's is {flow}")),
        Some(previous) if flow < previous => Err(format!("flow {flow} after flow {previous}: rows come in flow order")),
        Some(previous) if flow > previous + 1 => {
            Err(format!("flow {flow} after flow {previous}: flow numbers have no gaps (no flow {})", previous + 1))
        }
        _ => Ok(flow),
    }
}

fn number(text: &str, what: &str) -> Result<f64, String> {
    text.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| format!("expected {what}, got '{text}'"))
}

/// The checks are scenario.rs's, which batch jobs share: a field that is no number is NaN there.
fn parse_start_us(text: &str, runtime_us: u64) -> Result<u64, String> {
    sender_start_us(text.parse().unwrap_or(f64::NAN), text, runtime_us)
}

fn parse_duration_us(text: &str) -> Result<Option<u64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let what = "a duration in seconds > 0 (or nothing: to the run's end)";
    let duration_s = number(text, what)?;
    if duration_s <= 0.0 {
        return Err(format!("expected {what}, got '{text}'"));
    }
    Ok(Some(seconds_to_us(duration_s.min(crate::scenario::MAX_RUNTIME_S))))
}

fn parse_bytes(text: &str) -> Result<Option<u64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<u64>() {
        Ok(bytes) if bytes > 0 => Ok(Some(bytes)),
        _ => Err(format!("expected a transfer's size, a whole number of bytes > 0 (or nothing: bulk), got '{text}'")),
    }
}

fn parse_extra_delay_us(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Ok(0);
    }
    extra_delay_us(text.parse().unwrap_or(f64::NAN), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_US: u64 = 30_000_000;
    const HEADER: &str = "flow,cc,start_s,duration_s,bytes,extra_delay_ms\n";

    fn error_of(rows: &str) -> String {
        parse("f.csv", &format!("{HEADER}{rows}"), RUN_US).unwrap_err()
    }

    #[test]
    fn a_bulk_flow_and_a_flow_of_transfers() {
        let text = "extra_delay_ms,flow,cc,start_s,duration_s,bytes\r\n\
                    0,0,cubic,0,,\r\n\
                    30,1,\"fixed:cwnd_packets=10,ecn=1\",0.25,1.5,150000\r\n\
                    \r\n\
                    30,1,\"fixed:cwnd_packets=10,ecn=1\",29.5,,2000\r\n";
        let plans = parse("f.csv", text, RUN_US).unwrap();
        let cubic = FlowPlan::new(1, "cubic", 0.0, None, RUN_US).unwrap();
        assert_eq!(plans[0], cubic);
        let transfer = |start_us, end_us, bytes| FlowPlan {
            flow: 1,
            cc: "fixed:cwnd_packets=10,ecn=1".into(),
            ecn: true,
            start_us,
            end_us,
            bytes: Some(bytes),
            extra_delay_us: 30_000,
        };
        assert_eq!(plans[1..], [transfer(250_000, 1_750_000, 150_000), transfer(29_500_000, RUN_US, 2000)]);
    }

    #[test]
    fn every_mistake_is_one_line_naming_the_file_line_and_column() {
        let cases = [
            ("0,cubic,0,,,0,7\n", "f.csv: line 2: 7 fields, where the header has 6"),
            ("1,cubic,0,,,0\n", "f.csv: line 2, column flow: flows are numbered from 0, and the first row's is 1"),
            ("0,cubic,0,,,0\n2,cubic,0,,,0\n", "f.csv: line 3, column flow: flow 2 after flow 0: flow numbers have no gaps (no flow 1)"),
            ("0,cubic,0,,1,0\n1,cubic,0,,,0\n0,cubic,0,,1,0\n", "f.csv: line 4, column flow: flow 0 after flow 1: rows come in flow order"),
            ("x,cubic,0,,,0\n", "f.csv: line 2, column flow: expected a flow number (a whole number from 0), got 'x'"),
            ("0,cubic,soon,,,0\n", "f.csv: line 2, column start_s: expected a start in seconds ≥ 0, got 'soon'"),
            ("0,cubic,-1,,,0\n", "f.csv: line 2, column start_s: expected a start in seconds ≥ 0, got '-1'"),
            ("0,cubic,30,,,0\n", "f.csv: line 2, column start_s: a start at 30 s is not before the run's end at 30 s: start it earlier or lengthen the run"),
            ("0,cubic,0,0,,0\n", "f.csv: line 2, column duration_s: expected a duration in seconds > 0 (or nothing: to the run's end), got '0'"),
            ("0,cubic,0,,0,0\n", "f.csv: line 2, column bytes: expected a transfer's size, a whole number of bytes > 0 (or nothing: bulk), got '0'"),
            ("0,cubic,0,,1.5e3,0\n", "f.csv: line 2, column bytes: expected a transfer's size, a whole number of bytes > 0 (or nothing: bulk), got '1.5e3'"),
            ("0,cubic,0,,,nan\n", "f.csv: line 2, column extra_delay_ms: expected an extra delay in ms from 0 to 3600000 (one hour), got 'nan'"),
            ("0,cubic,0,,,-5\n", "f.csv: line 2, column extra_delay_ms: expected an extra delay in ms from 0 to 3600000 (one hour), got '-5'"),
            ("0,copa:delta=-1,0,,,0\n", "f.csv: line 2, column cc: copa: delta must be > 0, got -1"),
            ("0,cubic,0,,100,0\n0,bbr,1,,100,0\n", "f.csv: line 3, column cc: flow 0's rows disagree: 'bbr' here, 'cubic' on line 2"),
            ("0,cubic,0,,100,10\n0,cubic,1,,100,20\n", "f.csv: line 3, column extra_delay_ms: flow 0's rows disagree: 20 here, 10 on line 2"),
            ("0,cubic,0,,,0\n0,cubic,1,,100,0\n", "f.csv: line 3, column bytes: flow 0 is a bulk flow (line 2 has no bytes), which is one row; a flow with transfers has bytes on every row"),
            ("0,cubic,0,,100,0\n0,cubic,1,,,0\n", "f.csv: line 3, column bytes: flow 0 has transfers (line 2), so every row of it needs bytes"),
            ("0,\"cubic,0,,,0\n", "f.csv: line 2: field 2: a quote is never closed"),
            ("70000,cubic,0,,,0\n", "f.csv: line 2, column flow: flow 70000: a run has at most 65536 flows, numbered up to 65535"),
        ];
        for (rows, expected) in cases {
            assert_eq!(error_of(rows), expected, "{rows}");
        }
        let e = parse("f.csv", "flow,cc,start_s,duration_s,bytes,delay_ms\n", RUN_US).unwrap_err();
        assert_eq!(e, "f.csv: line 1, column 6: unknown column 'delay_ms'; the columns are flow,cc,start_s,duration_s,bytes,extra_delay_ms");
        let e = parse("f.csv", "flow,cc,start_s,duration_s,bytes\n", RUN_US).unwrap_err();
        assert_eq!(e, "f.csv: line 1: no column 'extra_delay_ms'; the columns are flow,cc,start_s,duration_s,bytes,extra_delay_ms");
        assert_eq!(
            parse("f.csv", HEADER, RUN_US).unwrap_err(),
            "f.csv: no rows after the header: give one row per sender"
        );
        assert!(parse("f.csv", "", RUN_US).unwrap_err().starts_with("f.csv: empty: expected the header"));
    }

    #[test]
    fn at_most_a_hundred_thousand_rows() {
        let rows = "0,cubic,1,,1000,0\n".repeat(MAX_ROWS);
        assert_eq!(parse("f.csv", &format!("{HEADER}{rows}"), RUN_US).unwrap().len(), MAX_ROWS);
        let e = parse("f.csv", &format!("{HEADER}{rows}0,cubic,1,,1000,0\n"), RUN_US).unwrap_err();
        assert_eq!(e, "f.csv: line 100002: more than 100000 rows, the most a run may have");
    }

    #[test]
    fn quoted_fields_follow_rfc_4180() {
        assert_eq!(fields("a,\"b,c\",\"d\"\"e\",").unwrap(), ["a", "b,c", "d\"e", ""]);
        assert_eq!(fields("\"a\"x,b").unwrap_err(), "field 1: 'x' after its closing quote");
    }
}
