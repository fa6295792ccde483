//! The two logs `pantheon-udp` writes.
//!
//! The transfers log (`--transfers-log FILE`, `TransferLog`): one line per transfer, `transfer_id
//! epoch_us`, the time on CLOCK_REALTIME in µs, so that the harness can place it on the run's
//! timeline. The receiver writes a transfer's end (the kernel's receive time of the datagram that
//! completed it), a sender its beginning (when its first datagram left). Each line is flushed as it
//! is written: the harness reads the file while the run goes on, and a receiver stopped by SIGKILL
//! loses nothing already logged.
//!
//! The sender's optional per-acknowledgement log (`pantheon-udp send --log FILE`), for watching a
//! controller work: one line per acknowledgement the controller was given, with its decision
//! right after it. Text, space-separated, `-` where the controller leaves a value unset:
//!
//! ```text
//! # t_us cwnd_bytes pacing_rate_bps srtt_us rtt_us inflight_bytes
//! 41234 29280 - 40125 40210 27816
//! ```
//!
//! `t_us` is the flow's clock, from the sender's start. Lines go through one 64 KiB buffer: formatting numbers
//! into it allocates nothing, and a write(2) happens once per ~1500 lines.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use pantheon_cc::{Acked, Decision};

const BUFFER_BYTES: usize = 64 << 10;

/// `transfer_id epoch_us` lines, each flushed.
pub struct TransferLog {
    out: File,
}

impl TransferLog {
    pub fn new(file: File) -> TransferLog {
        TransferLog { out: file }
    }

    /// One line, written with one write(2).
    pub fn line(&mut self, transfer_id: u32, epoch_us: u64) -> io::Result<()> {
        self.out.write_all(format!("{transfer_id} {epoch_us}\n").as_bytes())
    }
}

pub struct AckLog {
    out: BufWriter<File>,
}

struct Field(Option<u64>);

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value}"),
            None => f.write_str("-"),
        }
    }
}

impl AckLog {
    pub fn new(file: File) -> io::Result<AckLog> {
        let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
        writeln!(out, "# t_us cwnd_bytes pacing_rate_bps srtt_us rtt_us inflight_bytes")?;
        out.flush()?;
        Ok(AckLog { out })
    }

    pub fn ack(&mut self, acked: &Acked, decision: &Decision) -> io::Result<()> {
        writeln!(
            self.out,
            "{} {} {} {} {} {}",
            acked.now_us,
            Field(decision.cwnd_bytes),
            Field(decision.pacing_rate_bps),
            acked.srtt_us,
            acked.rtt_us,
            acked.inflight_bytes
        )
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }
}
