//! Helpers shared by the simulator's tests: the binary, scratch directories that remove
//! themselves, and the tunnel logs read back.

#![allow(dead_code)] // each test file uses its own subset

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_pantheon-sim");

/// A directory under the system's temporary directory, removed when dropped (a failing test
/// too: the drop runs while the panic unwinds).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("pantheon-sim-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn sim(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("pantheon-sim runs")
}

/// `pantheon-sim run --out DIR --text-logs ARGS...`: the JSON summary.
pub fn run_ok(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut argv = vec!["run", "--out", dir.to_str().unwrap(), "--text-logs"];
    argv.extend_from_slice(args);
    let out = sim(&argv);
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

/// uid -> (t_us, bytes, ECN codepoint: 0 in a log without the column) of a native tunnel log.
pub fn tunnel_log(path: &Path) -> HashMap<u64, (u64, u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[1], (v[0], v[2], v.get(3).copied().unwrap_or(0)))
        })
        .collect()
}

/// Lines of a log without its `#` header.
pub fn body(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap().lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
}
