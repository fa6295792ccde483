//! Mahimahi packet-delivery traces (Netravali et al., "Mahimahi: Accurate Record-and-Replay for
//! HTTP", USENIX ATC 2015, §3.2): one line per delivery opportunity, each a millisecond timestamp
//! at which one 1500-byte packet may leave. Several lines may share a timestamp (a burst). The
//! trace repeats forever with a period equal to its last timestamp.

use std::fmt;
use std::sync::Arc;

use crate::bounds::{MAX_TRACE_LINE_BYTES, MAX_TRACE_MS, MAX_TRACE_OPPORTUNITIES};

/// How much of a bad line an error quotes: enough to recognise it, never a screenful.
const QUOTED_CHARS: usize = 32;

/// A validated trace: non-decreasing millisecond timestamps ending after time zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    opportunities_ms: Arc<[u64]>,
}

/// What is wrong with a trace, with the 1-based line number where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    Empty,
    /// `text` is the line's start, at most `QUOTED_CHARS` characters (then "...").
    NotANumber {
        line: usize,
        text: String,
    },
    LineTooLong {
        line: usize,
        length_bytes: usize,
        text: String,
    },
    BeyondMax {
        line: usize,
        t_ms: u64,
    },
    TooManyOpportunities,
    Decreasing {
        line: usize,
        previous_ms: u64,
        this_ms: u64,
    },
    EndsAtZero,
}

/// The start of a line for an error message.
fn quoted(line: &str) -> String {
    match line.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line.to_string(),
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Empty => write!(f, "trace has no delivery opportunities (it is empty)"),
            TraceError::NotANumber { line, text } => {
                write!(f, "line {line}: {text:?} is not a whole number of milliseconds")
            }
            TraceError::LineTooLong { line, length_bytes, text } => write!(
                f,
                "line {line} is {length_bytes} bytes long ({text:?}); a line holds one timestamp, \
                 at most {MAX_TRACE_LINE_BYTES} bytes"
            ),
            TraceError::BeyondMax { line, t_ms } => write!(
                f,
                "line {line}: timestamp {t_ms} ms is past the longest trace the model takes, \
                 {MAX_TRACE_MS} ms (one day)"
            ),
            TraceError::TooManyOpportunities => {
                write!(f, "trace has more than {MAX_TRACE_OPPORTUNITIES} delivery opportunities (lines)")
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
    /// Parses trace text. Blank lines are ignored; anything else must be a whole number of ms, at
    /// most `MAX_TRACE_MS`, on a line of at most `MAX_TRACE_LINE_BYTES`, and there may be at most
    /// `MAX_TRACE_OPPORTUNITIES` of them (`bounds.rs`).
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut opportunities_ms = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            if raw.len() > MAX_TRACE_LINE_BYTES {
                return Err(TraceError::LineTooLong { line, length_bytes: raw.len(), text: quoted(raw.trim()) });
            }
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                continue;
            }
            let t_ms: u64 = trimmed.parse().map_err(|_| TraceError::NotANumber { line, text: quoted(trimmed) })?;
            if t_ms > MAX_TRACE_MS {
                return Err(TraceError::BeyondMax { line, t_ms });
            }
            if opportunities_ms.len() == MAX_TRACE_OPPORTUNITIES {
                return Err(TraceError::TooManyOpportunities);
            }
            if let Some(&previous_ms) = opportunities_ms.last() {
                if t_ms < previous_ms {
                    return Err(TraceError::Decreasing { line, previous_ms, this_ms: t_ms });
                }
            }
            opportunities_ms.push(t_ms);
        }
        Trace::new(opportunities_ms)
    }

    /// A trace from its opportunities, which must be non-decreasing (checked in debug builds).
    pub fn new(opportunities_ms: Vec<u64>) -> Result<Trace, TraceError> {
        debug_assert!(opportunities_ms.is_sorted());
        if opportunities_ms.len() > MAX_TRACE_OPPORTUNITIES {
            return Err(TraceError::TooManyOpportunities);
        }
        match opportunities_ms.last() {
            None => Err(TraceError::Empty),
            Some(&t_ms) if t_ms > MAX_TRACE_MS => Err(TraceError::BeyondMax { line: opportunities_ms.len(), t_ms }),
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

    #[test]
    fn timestamps_past_a_day_are_refused_before_they_overflow_microseconds() {
        // 18446744073709552 ms is u64::MAX µs rounded up: times 1000 it wraps (issue 18).
        assert_eq!(
            Trace::parse("1\n18446744073709552\n"),
            Err(TraceError::BeyondMax { line: 2, t_ms: 18_446_744_073_709_552 })
        );
        assert!(Trace::parse(&format!("{MAX_TRACE_MS}\n")).is_ok());
        assert!(Trace::parse(&format!("{}\n", MAX_TRACE_MS + 1)).is_err());
        assert!(matches!(Trace::new(vec![1, MAX_TRACE_MS + 1]), Err(TraceError::BeyondMax { .. })));
    }

    #[test]
    fn a_bad_line_is_quoted_in_a_few_dozen_characters() {
        let long = "7".repeat(10_000);
        let message = Trace::parse(&format!("1\n{long}\n")).unwrap_err().to_string();
        assert!(message.starts_with("line 2 is 10000 bytes long"), "{message}");
        assert!(message.len() < 200, "{message}");
        let junk = "x".repeat(60);
        let message = Trace::parse(&junk).unwrap_err().to_string();
        assert!(message.contains(&format!("\"{}...\"", "x".repeat(QUOTED_CHARS))), "{message}");
        assert!(message.len() < 120, "{message}");
        // Characters, not bytes: a multi-byte character is never cut in half.
        assert!(Trace::parse(&"é".repeat(40)).unwrap_err().to_string().contains("..."));
    }

    #[test]
    fn the_number_of_opportunities_is_bounded() {
        let many = "1\n".repeat(MAX_TRACE_OPPORTUNITIES + 1);
        assert_eq!(Trace::parse(&many), Err(TraceError::TooManyOpportunities));
        assert!(Trace::parse(&many[2..]).is_ok());
    }
}
