//! Mahimahi packet-delivery traces (Netravali et al., "Mahimahi: Accurate Record-and-Replay for
//! HTTP", USENIX ATC 2015, §3.2): one line per delivery opportunity, each a millisecond timestamp
//! at which one 1500-byte packet may leave. Several lines may share a timestamp (a burst). The
//! trace repeats forever with a period equal to its last timestamp.

use std::fmt;
use std::sync::Arc;

/// A validated trace: non-decreasing millisecond timestamps ending after time zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    opportunities_ms: Arc<[u64]>,
}

/// What is wrong with a trace, with the 1-based line number where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    Empty,
    NotANumber { line: usize, text: String },
    Decreasing { line: usize, previous_ms: u64, this_ms: u64 },
    EndsAtZero,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Empty => write!(f, "trace has no delivery opportunities (it is empty)"),
            TraceError::NotANumber { line, text } => {
                write!(f, "line {line}: {text:?} is not a whole number of milliseconds")
            }
            TraceError::Decreasing { line, previous_ms, this_ms } => write!(
                f,
                "line {line}: timestamp {this_ms} ms is earlier than the line before ({previous_ms} ms); \
                 timestamps must be non-decreasing"
            ),
            TraceError::EndsAtZero => {
                write!(f, "trace's last timestamp is 0 ms, so it cannot repeat; it must end after 0 ms")
            }
        }
    }
}

impl std::error::Error for TraceError {}

impl Trace {
    /// Parses trace text. Blank lines are ignored; anything else must be a whole number.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut opportunities_ms = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let t_ms: u64 =
                line.parse().map_err(|_| TraceError::NotANumber { line: index + 1, text: line.to_string() })?;
            if let Some(&previous_ms) = opportunities_ms.last() {
                if t_ms < previous_ms {
                    return Err(TraceError::Decreasing { line: index + 1, previous_ms, this_ms: t_ms });
                }
            }
            opportunities_ms.push(t_ms);
        }
        Trace::new(opportunities_ms)
    }

    pub fn new(opportunities_ms: Vec<u64>) -> Result<Trace, TraceError> {
        match opportunities_ms.last() {
            None => Err(TraceError::Empty),
            Some(0) => Err(TraceError::EndsAtZero),
            Some(_) => Ok(Trace { opportunities_ms: opportunities_ms.into() }),
        }
    }

    pub fn opportunities_ms(&self) -> &[u64] {
        &self.opportunities_ms
    }

    /// Length of one repetition in milliseconds.
    pub fn period_ms(&self) -> u64 {
        *self.opportunities_ms.last().expect("validated non-empty")
    }

    /// Average rate the trace offers, in Mbit/s (1500-byte opportunities).
    pub fn mean_rate_mbps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * 1500.0 * 8.0 / (self.period_ms() as f64 * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_rate() {
        let t = Trace::parse("1\n1\n2\n\n3\n").unwrap();
        assert_eq!(t.opportunities_ms(), &[1, 1, 2, 3]);
        assert_eq!(t.period_ms(), 3);
        assert!((t.mean_rate_mbps() - 16.0).abs() < 1e-9);
    }

    #[test]
    fn rejects_bad_traces_with_line_numbers() {
        assert_eq!(Trace::parse(""), Err(TraceError::Empty));
        assert_eq!(Trace::parse("\n \n"), Err(TraceError::Empty));
        assert_eq!(Trace::parse("1\nabc\n"), Err(TraceError::NotANumber { line: 2, text: "abc".into() }));
        assert_eq!(Trace::parse("1\n-3\n"), Err(TraceError::NotANumber { line: 2, text: "-3".into() }));
        assert_eq!(Trace::parse("5\n6\n4\n"), Err(TraceError::Decreasing { line: 3, previous_ms: 6, this_ms: 4 }));
        assert_eq!(Trace::parse("0\n0\n"), Err(TraceError::EndsAtZero));
    }
}
