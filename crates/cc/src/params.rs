//! The parameters of one controller spec (`name:key=value,...`), as each algorithm's config reads
//! them, and the one-line error a mistake in them gives. A leaf: the algorithms import it, and the
//! registry (registry.rs), which imports every algorithm, hands it to them — so no algorithm
//! imports the registry and no import goes round in a circle.

use std::fmt;

/// A user's mistake in a controller spec, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

/// The `key=value` pairs of one spec, handed to the algorithm's config to read.
#[derive(Debug)]
pub struct Params<'a> {
    cc: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
    /// Keys the algorithm asked for, to list in the error for an unknown key.
    read: Vec<&'static str>,
}

impl<'a> Params<'a> {
    pub(crate) fn parse(cc: &'a str, text: &'a str) -> Result<Self, SpecError> {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(SpecError(format!("{cc}: expected key=value, got '{item}'")));
            };
            let key = key.trim();
            if pairs.iter().any(|&(k, _)| k == key) {
                return Err(SpecError(format!("{cc}: parameter '{key}' given twice")));
            }
            pairs.push((key, value.trim()));
        }
        Ok(Params { cc, pairs, read: Vec::new() })
    }

    fn raw(&mut self, key: &'static str) -> Option<&'a str> {
        self.read.push(key);
        self.pairs.iter().find(|&&(k, _)| k == key).map(|&(_, v)| v)
    }

    /// A number greater than zero, or `default` when the key is absent.
    pub fn positive_f64(&mut self, key: &'static str, default: f64) -> Result<f64, SpecError> {
        Ok(self.optional_positive_f64(key)?.unwrap_or(default))
    }

    /// A number greater than zero, or `None` when the key is absent (the algorithm says what an
    /// absent value means, or that it is required).
    pub fn optional_positive_f64(&mut self, key: &'static str) -> Result<Option<f64>, SpecError> {
        let Some(text) = self.raw(key) else { return Ok(None) };
        let cc = self.cc;
        let value: f64 = text.parse().map_err(|_| SpecError(format!("{cc}: {key} must be a number, got '{text}'")))?;
        if !(value.is_finite() && value > 0.0) {
            return Err(SpecError(format!("{cc}: {key} must be > 0, got {text}")));
        }
        Ok(Some(value))
    }

    /// The value as written (a path, a name), or `None` when the key is absent.
    pub fn text(&mut self, key: &'static str) -> Option<&'a str> {
        self.raw(key)
    }

    /// The error for a mistake the algorithm found itself, in the same one-line form.
    pub fn error(&self, message: impl fmt::Display) -> SpecError {
        SpecError(format!("{}: {message}", self.cc))
    }

    /// A whole number of at least `min`, or `default` when the key is absent.
    pub fn u64_at_least(&mut self, key: &'static str, min: u64, default: u64) -> Result<u64, SpecError> {
        let Some(text) = self.raw(key) else { return Ok(default) };
        let cc = self.cc;
        let value: u64 =
            text.parse().map_err(|_| SpecError(format!("{cc}: {key} must be a whole number, got '{text}'")))?;
        if value < min {
            return Err(SpecError(format!("{cc}: {key} must be >= {min}, got {text}")));
        }
        Ok(value)
    }

    /// `true`/`false`, or `default` when the key is absent.
    pub fn bool(&mut self, key: &'static str, default: bool) -> Result<bool, SpecError> {
        let Some(text) = self.raw(key) else { return Ok(default) };
        match text {
            "true" | "1" | "on" => Ok(true),
            "false" | "0" | "off" => Ok(false),
            _ => Err(SpecError(format!("{}: {key} must be true or false, got '{text}'", self.cc))),
        }
    }

    pub(crate) fn finish(&self) -> Result<(), SpecError> {
        match self.pairs.iter().find(|(k, _)| !self.read.contains(k)) {
            None => Ok(()),
            Some((key, _)) => {
                Err(SpecError(format!("{}: unknown parameter '{key}'; known: {}", self.cc, self.read.join(", "))))
            }
        }
    }
}
