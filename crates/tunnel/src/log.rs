//! The tunnel's per-datagram logs. Each endpoint can keep two, in two forms each:
//!
//! - ingress: datagrams entering the tunnel here: the command sent them, the endpoint read them
//!   from its TUN device, gave each a UID and sent it to the peer;
//! - egress: datagrams leaving the tunnel here: they arrived from the peer and were written to
//!   the TUN device.
//!
//! A flow's sender logs each datagram at its ingress and the receiver at its egress; pairing the
//! two by UID gives every datagram's one-way delay, or its loss (Pantheon paper §3.1.2).
//!
//! Native form, microseconds since the base given in the header (CLOCK_REALTIME: the clock the
//! kernel stamps received datagrams with, and the one two machines can share), and the size of
//! the inner IP datagram as the command sent it (on the path it is 36 bytes more):
//!   `t_us uid bytes`
//!
//! Text form, exactly as the original pantheon-tunnel wrote it, so its analysis reads it: a header
//! `# <command line, each word single-quoted> <ingress|egress>: <base, ms since the epoch, 3
//! decimals>` and lines `<ms since the base, 3 decimals> - <uid> - <bytes>`, where bytes is the
//! size of the outer IP datagram on the path (inner + 36). The original named its logs from the
//! host's side, the other way round: its egress log is our ingress log. So its
//! `merge_tunnel_logs.py single` takes the receiver's egress text log as `-i` and the sender's
//! ingress text log as `-e`. Newlines in the command line are written as `\n` so that the header
//! stays one line (the original's merge reads the base from the first line).

use std::fs::File;
use std::io::{self, BufWriter, Write};

use crate::wire::OVERHEAD_BYTES;

/// Which side of the tunnel a log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Ingress,
    Egress,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Ingress => "ingress",
            Side::Egress => "egress",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Side::Ingress => {
                "datagrams entering the tunnel here (sent by the command: read from the TUN device, sent to the peer)"
            }
            Side::Egress => "datagrams leaving the tunnel here (arrived from the peer, written to the TUN device)",
        }
    }
}

/// What the native header says about the run.
pub struct Context<'a> {
    /// `server` or `client`, and where it was listening or connecting to.
    pub endpoint: &'a str,
    /// Microseconds since the Unix epoch of t_us 0.
    pub base_epoch_us: u64,
    pub command_line: &'a [String],
}

pub fn native_header(side: Side, context: &Context) -> String {
    format!(
        "# pantheon-tunnel log v1\n\
         # endpoint: {}\n\
         # {}: {}\n\
         # base: t_us 0 is {} us since the Unix epoch (CLOCK_REALTIME)\n\
         # bytes: the inner IP datagram; on the path it is {OVERHEAD_BYTES} bytes more\n\
         # command line: {}\n\
         # columns: t_us uid bytes\n",
        context.endpoint,
        side.as_str(),
        side.meaning(),
        context.base_epoch_us,
        one_line(&context.command_line.join(" ")),
    )
}

pub fn native_line(out: &mut Vec<u8>, t_us: u64, uid: u64, inner_bytes: usize) {
    // Writing to a Vec cannot fail.
    let _ = writeln!(out, "{t_us} {uid} {inner_bytes}");
}

fn one_line(text: &str) -> String {
    text.replace('\n', "\\n")
}

/// A word quoted for a POSIX shell, as the original quoted its command line.
fn shell_quote(word: &str) -> String {
    format!("'{}'", one_line(&word.replace('\'', "'\\''")))
}

/// Microseconds as milliseconds with three decimals, as the original printed them.
fn milliseconds(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

pub fn text_header(side: Side, context: &Context) -> String {
    let quoted: Vec<String> = context.command_line.iter().map(|w| shell_quote(w)).collect();
    format!("# {} {}: {}\n", quoted.join(" "), side.as_str(), milliseconds(context.base_epoch_us))
}

pub fn text_line(out: &mut Vec<u8>, t_us: u64, uid: u64, inner_bytes: usize) {
    let _ = writeln!(out, "{}.{:03} - {uid} - {}", t_us / 1000, t_us % 1000, inner_bytes + OVERHEAD_BYTES);
}

const BUFFER_BYTES: usize = 1 << 20;

/// One side's log files. A write error stops that side's logging and is kept for the end of the
/// run: the tunnel goes on carrying the command's traffic.
pub struct Log {
    native: Option<BufWriter<File>>,
    text: Option<BufWriter<File>>,
    line: Vec<u8>,
    error: Option<io::Error>,
}

impl Log {
    /// A log into the files given (none: a log that records nothing); writes their headers.
    pub fn new(side: Side, native: Option<File>, text: Option<File>, context: &Context) -> Log {
        let mut log = Log { native: None, text: None, line: Vec::with_capacity(64), error: None };
        let mut start = |file: File, header: String| {
            let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
            match out.write_all(header.as_bytes()) {
                Ok(()) => Some(out),
                Err(e) => {
                    log.error.get_or_insert(e);
                    None
                }
            }
        };
        let native = native.and_then(|f| start(f, native_header(side, context)));
        let text = text.and_then(|f| start(f, text_header(side, context)));
        Log { native, text, ..log }
    }

    pub fn record(&mut self, t_us: u64, uid: u64, inner_bytes: usize) {
        if let Some(out) = self.native.as_mut() {
            self.line.clear();
            native_line(&mut self.line, t_us, uid, inner_bytes);
            if let Err(e) = out.write_all(&self.line) {
                self.native = None;
                self.error.get_or_insert(e);
            }
        }
        if let Some(out) = self.text.as_mut() {
            self.line.clear();
            text_line(&mut self.line, t_us, uid, inner_bytes);
            if let Err(e) = out.write_all(&self.line) {
                self.text = None;
                self.error.get_or_insert(e);
            }
        }
    }

    /// Flushes both files; the first error of the run, if any.
    pub fn finish(mut self) -> io::Result<()> {
        for out in [self.native.take(), self.text.take()].into_iter().flatten() {
            if let Err(e) = out.into_inner().map_err(|e| e.into_error()) {
                self.error.get_or_insert(e);
            }
        }
        self.error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(command_line: &[String]) -> Context<'_> {
        Context { endpoint: "server listening on 0.0.0.0:9000", base_epoch_us: 1_523_456_789_012_345, command_line }
    }

    #[test]
    fn text_form_is_the_originals() {
        let words = ["pantheon-tunnel", "server", "--egress-text-log", "it's.log"].map(String::from);
        assert_eq!(
            text_header(Side::Egress, &context(&words)),
            "# 'pantheon-tunnel' 'server' '--egress-text-log' 'it'\\''s.log' egress: 1523456789012.345\n"
        );
        let multi_line = ["sh", "-c", "a\nb"].map(String::from);
        assert_eq!(
            text_header(Side::Ingress, &context(&multi_line)),
            "# 'sh' '-c' 'a\\nb' ingress: 1523456789012.345\n"
        );
        let mut out = Vec::new();
        text_line(&mut out, 20_005, 0, 1464);
        text_line(&mut out, 1_234_567_890, 41, 52);
        assert_eq!(String::from_utf8(out).unwrap(), "20.005 - 0 - 1500\n1234567.890 - 41 - 88\n");
    }

    #[test]
    fn text_header_ends_in_the_base_the_original_merge_reads() {
        // merge_tunnel_logs.py takes float(line.rsplit(':', 1)[-1]) of the first line.
        let words = ["pantheon-tunnel", "client", "100.64.0.1:9000"].map(String::from);
        let header = text_header(Side::Ingress, &context(&words));
        let base_ms: f64 = header.trim_end().rsplit_once(':').unwrap().1.trim().parse().unwrap();
        assert_eq!(base_ms, 1_523_456_789_012.345);
    }

    #[test]
    fn native_lines_are_microseconds_and_inner_bytes() {
        let mut out = Vec::new();
        native_line(&mut out, 20_005, 0, 1464);
        native_line(&mut out, 40_017, 1, 52);
        assert_eq!(String::from_utf8(out).unwrap(), "20005 0 1464\n40017 1 52\n");
        let header = native_header(Side::Ingress, &context(&["x".to_string()]));
        assert!(header.contains("# base: t_us 0 is 1523456789012345 us since the Unix epoch"));
        assert!(header.ends_with("# columns: t_us uid bytes\n"));
    }
}
