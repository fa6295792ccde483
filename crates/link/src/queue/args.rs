//! A queue's parameters as Mahimahi's `--uplink-queue-args` gives them: `key=value` pairs
//! separated by commas (`packets=1000,target=5,interval=100`), times in milliseconds. Each
//! discipline takes the keys it knows, with its defaults; `finish` then refuses any key left over,
//! naming the keys the discipline takes. Every error is one line naming the key.

use crate::bounds::{MAX_BUFFER, MAX_DELAY_US};
use crate::queue::QueueLimit;

#[derive(Debug)]
pub struct QueueArgs {
    kind: String,
    /// Pairs not yet taken, in the order given.
    pairs: Vec<(String, String)>,
    /// The keys the discipline asked for, for `finish`'s message.
    known: Vec<&'static str>,
}

impl QueueArgs {
    /// Splits `text` into pairs; an empty `text` has none.
    pub fn parse(kind: &str, text: &str) -> Result<QueueArgs, String> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!("{kind}: expected key=value, got '{part}'"));
            };
            let key = key.trim().to_string();
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(format!("{kind}: '{key}' is given twice"));
            }
            pairs.push((key, value.trim().to_string()));
        }
        Ok(QueueArgs { kind: kind.to_string(), pairs, known: Vec::new() })
    }

    fn take(&mut self, key: &'static str) -> Option<String> {
        self.known.push(key);
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    fn bad(&self, key: &str, what: impl std::fmt::Display) -> String {
        format!("{} {key}: {what}", self.kind)
    }

    /// `packets=N` or `bytes=N`, whichever is given (not both).
    pub fn limit(&mut self) -> Result<Option<QueueLimit>, String> {
        let packets = self.take("packets");
        let bytes = self.take("bytes");
        let count = |key: &str, text: &str| match text.parse::<u64>() {
            Ok(n) if (1..=MAX_BUFFER).contains(&n) => Ok(n),
            _ => Err(self.bad(key, format!("expected a whole number from 1 to {MAX_BUFFER} (2^32), got '{text}'"))),
        };
        match (packets, bytes) {
            (Some(_), Some(_)) => Err(format!("{}: give packets= or bytes=, not both", self.kind)),
            (Some(n), None) => Ok(Some(QueueLimit::Packets(count("packets", &n)?))),
            (None, Some(n)) => Ok(Some(QueueLimit::Bytes(count("bytes", &n)?))),
            (None, None) => Ok(None),
        }
    }

    /// A number in `[low, high]`, or `default` when the key is absent.
    pub fn number(&mut self, key: &'static str, default: f64, low: f64, high: f64) -> Result<f64, String> {
        let Some(text) = self.take(key) else { return Ok(default) };
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() && (low..=high).contains(&x) => Ok(x),
            _ => Err(self.bad(key, format!("expected a number from {low} to {high}, got '{text}'"))),
        }
    }

    /// A time given in ms (fractions allowed), as whole µs; at least `min_us`, at most an hour.
    pub fn ms_as_us(&mut self, key: &'static str, default_us: u64, min_us: u64) -> Result<u64, String> {
        let Some(text) = self.take(key) else { return Ok(default_us) };
        let max_ms = (MAX_DELAY_US / 1000) as f64;
        match text.parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms * 1000.0 >= min_us as f64 && ms <= max_ms => {
                Ok((ms * 1000.0).round() as u64)
            }
            _ => Err(self
                .bad(key, format!("expected a time in ms from {} to {max_ms}, got '{text}'", min_us as f64 / 1000.0))),
        }
    }

    /// A whole number in `[low, high]`.
    pub fn count(&mut self, key: &'static str, default: u64, low: u64, high: u64) -> Result<u64, String> {
        let Some(text) = self.take(key) else { return Ok(default) };
        match text.parse::<u64>() {
            Ok(n) if (low..=high).contains(&n) => Ok(n),
            _ => Err(self.bad(key, format!("expected a whole number from {low} to {high}, got '{text}'"))),
        }
    }

    /// `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`.
    pub fn flag(&mut self, key: &'static str, default: bool) -> Result<bool, String> {
        let Some(text) = self.take(key) else { return Ok(default) };
        match text.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err(self.bad(key, format!("expected 1 or 0, got '{text}'"))),
        }
    }

    /// Refuses any key the discipline did not take.
    pub fn finish(self) -> Result<(), String> {
        match self.pairs.first() {
            None => Ok(()),
            Some((key, _)) => {
                Err(format!("{}: unknown parameter '{key}'; {} takes {}", self.kind, self.kind, self.known.join(", ")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_taken_with_defaults_and_leftovers_refused() {
        let mut a = QueueArgs::parse("codel", "packets=100, target=2.5").unwrap();
        assert_eq!(a.limit().unwrap(), Some(QueueLimit::Packets(100)));
        assert_eq!(a.ms_as_us("target", 5_000, 1).unwrap(), 2_500);
        assert_eq!(a.ms_as_us("interval", 100_000, 1).unwrap(), 100_000);
        a.finish().unwrap();
        let mut b = QueueArgs::parse("codel", "target=5,colour=red").unwrap();
        b.ms_as_us("target", 5_000, 1).unwrap();
        assert_eq!(b.finish().unwrap_err(), "codel: unknown parameter 'colour'; codel takes target");
    }

    #[test]
    fn bad_values_name_the_key() {
        assert!(QueueArgs::parse("pie", "target").unwrap_err().contains("key=value"));
        assert!(QueueArgs::parse("pie", "a=1,a=2").unwrap_err().contains("twice"));
        let mut a = QueueArgs::parse("pie", "packets=0").unwrap();
        assert!(a.limit().unwrap_err().starts_with("pie packets:"));
        let mut b = QueueArgs::parse("pie", "packets=1,bytes=2").unwrap();
        assert!(b.limit().unwrap_err().contains("not both"));
        let mut c = QueueArgs::parse("red", "max_p=2").unwrap();
        assert!(c.number("max_p", 0.1, 0.0, 1.0).unwrap_err().starts_with("red max_p:"));
    }
}
