//! The link's per-packet logs, one file per direction and form: the emulator writes them from
//! the wall clock, the simulator from virtual time, both with the writers below, so that the
//! harness and `pantheon analyze` read either run the same way (docs/emulator.md).
//!
//! Native form (microseconds since the base, on CLOCK_MONOTONIC; uid numbers the packets of one
//! direction in the order they entered the path):
//!   `t_us + uid bytes`                         the packet entered the path
//!   `t_us - uid bytes delay_us lateness_us`    it left; delay = t_us − entry; it was written to the
//!                                              far end lateness_us after its scheduled time; a
//!                                              sixth field `ce` says the queue marked it CE
//!   `t_us d uid bytes cause`                   it was dropped (cause: loss, policer, queue: the
//!                                              limit, aqm: the queue's AQM)
//!   `t_us # 1500`                              a delivery opportunity of the bottleneck
//! Lines are in time order.
//!
//! Mahimahi form, as `mm-link --uplink-log` writes it, so Mahimahi's tools read it: whole
//! milliseconds since the init timestamp, and the bottleneck's view only (arrivals at its queue,
//! departures with their queueing delay, opportunities, queue drops):
//!   `t + bytes`, `t - bytes delay_ms`, `t # 1500`, `t d 1 bytes` (queue and AQM drops).
//!
//! The writers take any `io::Write` (a file by default, a `Vec<u8>` in tests); they read no
//! clock: every time is an argument.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path as FsPath;

use pantheon_link::{Aqm, Delivery, DropCause, PathConfig, QueueLimit, OPPORTUNITY_BYTES};

use crate::line::LineBuffer;

const BUFFER_BYTES: usize = 1 << 20;

/// A queue as the log headers name it, in Mahimahi's words: `droptail [packets=14]`,
/// `codel [packets=1000,target=5,interval=100,ecn=1]`, `infinite`.
pub fn queue_text(queue: QueueLimit, aqm: &Aqm) -> String {
    let limit = match queue {
        QueueLimit::Infinite if *aqm == Aqm::DropTail => return "infinite".into(),
        QueueLimit::Infinite => None,
        QueueLimit::Packets(n) => Some(format!("packets={n}")),
        QueueLimit::Bytes(n) => Some(format!("bytes={n}")),
    };
    let args = aqm.args_text();
    let all: Vec<String> = limit.into_iter().chain((!args.is_empty()).then_some(args)).collect();
    format!("{} [{}]", aqm.name(), all.join(","))
}

/// A path direction in one line, for the log headers (the simulator's logs say it the same way).
pub fn describe(config: &PathConfig) -> String {
    let delivery = match &config.delivery {
        Delivery::Unlimited => "unlimited".to_string(),
        Delivery::Constant { rate_mbps } => format!("constant {rate_mbps} Mbit/s"),
        Delivery::Trace(t) => format!("trace, mean {:.3} Mbit/s, period {} ms", t.mean_rate_mbps(), t.period_ms()),
        Delivery::Poisson { rate_mbps } => format!("poisson, mean {rate_mbps} Mbit/s"),
    };
    let policer =
        config.policer.map_or("none".into(), |p| format!("{} Mbit/s, burst {} bytes", p.rate_mbps, p.burst_bytes));
    format!(
        "delay {} us; loss {}; queue {}; delivery {delivery}; policer {policer}",
        config.delay_us,
        config.loss_probability,
        queue_text(config.queue, &config.aqm)
    )
}

fn create(path: &FsPath) -> io::Result<BufWriter<File>> {
    Ok(BufWriter::with_capacity(BUFFER_BYTES, File::create(path)?))
}

/// The native microsecond log.
pub struct NativeLog<W: Write = BufWriter<File>> {
    out: W,
    /// Entries waiting until every model event before them has been written, so that the file
    /// stays in time order although entries are read before the events that precede them are
    /// computed: (t_us, uid, bytes).
    pending_entries: VecDeque<(u64, u64, u32)>,
    line: LineBuffer,
}

impl NativeLog {
    /// A log into a new file at `path`, its header written.
    pub fn create(path: &FsPath, header: &[String]) -> io::Result<NativeLog> {
        NativeLog::new(create(path)?, header)
    }
}

impl<W: Write> NativeLog<W> {
    /// A log into `out`; writes the header, one `# ` line for each of `header` between the
    /// format's own lines.
    pub fn new(mut out: W, header: &[String]) -> io::Result<NativeLog<W>> {
        writeln!(out, "# pantheon-emu link log v1")?;
        for line in header {
            writeln!(out, "# {line}")?;
        }
        writeln!(out, "# columns: t_us + uid bytes | t_us - uid bytes delay_us lateness_us | t_us d uid bytes cause | t_us # bytes")?;
        Ok(NativeLog { out, pending_entries: VecDeque::new(), line: LineBuffer::default() })
    }

    pub fn entry(&mut self, t_us: u64, uid: u64, bytes: u32) {
        self.pending_entries.push_back((t_us, uid, bytes));
    }

    /// Writes pending entries that happened at or before `t_us`.
    fn catch_up(&mut self, t_us: u64) -> io::Result<()> {
        while let Some(&(t, uid, bytes)) = self.pending_entries.front() {
            if t > t_us {
                break;
            }
            self.out.write_all(self.line.start().int(t).text(" + ").int(uid).text(" ").int(bytes).end())?;
            self.pending_entries.pop_front();
        }
        Ok(())
    }

    /// The packet `uid` left; `marked`: the queue set CE on it.
    pub fn departure(
        &mut self,
        t_us: u64,
        uid: u64,
        bytes: u32,
        delay_us: u64,
        lateness_us: u64,
        marked: bool,
    ) -> io::Result<()> {
        self.catch_up(t_us)?;
        let line = self.line.start().int(t_us).text(" - ").int(uid).text(" ").int(bytes);
        let line = line.text(" ").int(delay_us).text(" ").int(lateness_us);
        self.out.write_all(if marked { line.text(" ce") } else { line }.end())
    }

    pub fn drop(&mut self, t_us: u64, uid: u64, bytes: u32, cause: DropCause) -> io::Result<()> {
        self.catch_up(t_us)?;
        let line = self.line.start().int(t_us).text(" d ").int(uid).text(" ").int(bytes);
        self.out.write_all(line.text(" ").text(cause.as_str()).end())
    }

    pub fn opportunity(&mut self, t_us: u64) -> io::Result<()> {
        self.catch_up(t_us)?;
        self.out.write_all(self.line.start().int(t_us).text(" # ").int(OPPORTUNITY_BYTES).end())
    }

    /// Called once all model events up to now are written.
    pub fn settle(&mut self) -> io::Result<()> {
        self.catch_up(u64::MAX)
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.settle()?;
        self.out.flush()
    }
}

/// The Mahimahi-compatible millisecond log.
pub struct MahimahiLog<W: Write = BufWriter<File>> {
    out: W,
}

impl MahimahiLog {
    /// A log into a new file at `path`, its header written.
    pub fn create(path: &FsPath, header: &[String]) -> io::Result<MahimahiLog> {
        MahimahiLog::new(create(path)?, header)
    }
}

impl<W: Write> MahimahiLog<W> {
    /// A log into `out`; writes `header`, one `# ` line each.
    pub fn new(mut out: W, header: &[String]) -> io::Result<MahimahiLog<W>> {
        for line in header {
            writeln!(out, "# {line}")?;
        }
        Ok(MahimahiLog { out })
    }

    pub fn arrival(&mut self, t_us: u64, bytes: u32) -> io::Result<()> {
        writeln!(self.out, "{} + {bytes}", t_us / 1000)
    }

    pub fn departure(&mut self, t_us: u64, bytes: u32, queueing_us: u64) -> io::Result<()> {
        writeln!(self.out, "{} - {bytes} {}", t_us / 1000, t_us / 1000 - (t_us - queueing_us) / 1000)
    }

    pub fn drop(&mut self, t_us: u64, bytes: u32) -> io::Result<()> {
        writeln!(self.out, "{} d 1 {bytes}", t_us / 1000)
    }

    pub fn opportunity(&mut self, t_us: u64) -> io::Result<()> {
        writeln!(self.out, "{} # {OPPORTUNITY_BYTES}", t_us / 1000)
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_lines_in_time_order() {
        let mut out = Vec::new();
        let mut log = NativeLog::new(&mut out, &["direction: uplink".to_string()]).unwrap();
        log.entry(0, 0, 1500);
        log.entry(5, 1, 40);
        log.opportunity(3).unwrap();
        log.departure(20_000, 0, 1500, 20_000, 7, false).unwrap();
        log.drop(20_001, 1, 40, DropCause::Queue).unwrap();
        log.departure(20_002, 2, 1500, 20_000, 0, true).unwrap();
        log.drop(20_003, 3, 40, DropCause::Aqm).unwrap();
        log.entry(u64::MAX - 1, u64::MAX, u32::MAX);
        log.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            [
                "0 + 0 1500",
                "3 # 1500",
                "5 + 1 40",
                "20000 - 0 1500 20000 7",
                "20001 d 1 40 queue",
                "20002 - 2 1500 20000 0 ce",
                "20003 d 3 40 aqm",
                "18446744073709551614 + 18446744073709551615 4294967295",
            ]
        );
        assert!(text.starts_with("# pantheon-emu link log v1\n# direction: uplink\n# columns: t_us + uid bytes"));
    }

    #[test]
    fn queues_are_named_in_mahimahis_words() {
        assert_eq!(queue_text(QueueLimit::Infinite, &Aqm::DropTail), "infinite");
        assert_eq!(queue_text(QueueLimit::Bytes(60_000), &Aqm::DropTail), "droptail [bytes=60000]");
        let (codel, _) = Aqm::parse("codel", "").unwrap();
        let text = queue_text(QueueLimit::Packets(1000), &codel);
        assert!(text.starts_with("codel [packets=1000") && text.ends_with(']'), "{text}");
    }

    #[test]
    fn mahimahi_lines_are_whole_milliseconds() {
        let mut out = Vec::new();
        let mut log = MahimahiLog::new(&mut out, &["queue: infinite".to_string()]).unwrap();
        log.arrival(1_999, 1500).unwrap();
        log.opportunity(2_000).unwrap();
        log.departure(21_500, 1500, 19_600).unwrap();
        log.drop(22_000, 40).unwrap();
        log.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "# queue: infinite\n1 + 1500\n2 # 1500\n21 - 1500 20\n22 d 1 40\n");
    }
}
