//! The tunnel's per-datagram log formats, as the tunnel writes them and the simulator imitates
//! them, so that the harness's record merge reads a simulated run as an emulated one. Each
//! endpoint can keep two logs, in two forms each:
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
//! kernel stamps received datagrams with, and the one two machines can share), the size of
//! the inner IP datagram as the command sent it (on the path it is 36 bytes more), and its ECN
//! codepoint (RFC 3168), 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE (`pantheon_link::Ecn::bits`): at
//! ingress as the command sent it, at egress as written to the TUN device, after RFC 6040's
//! decapsulation (`tunnel_wire::decapsulated_ecn`), so that a 3 at egress over a 1 or 2 at
//! ingress is a mark the path made:
//!   `t_us uid bytes ecn`
//! Logs of version 1 (before ECN crossed the tunnel) have no fourth column; their datagrams were
//! Not-ECT on the path, whatever the command sent, and [`parse_native_line`] reads them so.
//!
//! Text form, exactly as the original pantheon-tunnel wrote it, so its analysis reads it: a header
//! `# <command line, each word single-quoted> <ingress|egress>: <base, ms since the epoch, 3
//! decimals>` and lines `<ms since the base, 3 decimals> - <uid> - <bytes>`, where bytes is the
//! size of the outer IP datagram on the path (inner + 36). The original named its logs from the
//! host's side, the other way round: its egress log is our ingress log. So its
//! `merge_tunnel_logs.py single` takes the receiver's egress text log as `-i` and the sender's
//! ingress text log as `-e`. Newlines in the command line are written as `\n` so that the header
//! stays one line (the original's merge reads the base from the first line).

use std::io::Write;

use pantheon_link::Ecn;

use crate::line::LineBuffer;
use crate::tunnel_wire::OVERHEAD_BYTES;

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

    /// What the side's log records, as the tunnel's headers say it.
    pub fn meaning(self) -> &'static str {
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

/// The tunnel's native header for `side` of the run `context` describes.
pub fn native_header(side: Side, context: &Context) -> String {
    native_header_lines(
        context.endpoint,
        side,
        side.meaning(),
        &format!("base: t_us 0 is {} us since the Unix epoch (CLOCK_REALTIME)", context.base_epoch_us),
        &format!("command line: {}", one_line(&context.command_line.join(" "))),
    )
}

/// A native header from its variable lines: the endpoint, what the side records (`meaning`),
/// where t_us 0 is (`base`: the harness recognises a base by its digits) and how the run was
/// made (`run`). The simulator, which has no command line and no wall clock, says these in its
/// own words around the same format lines.
pub fn native_header_lines(endpoint: &str, side: Side, meaning: &str, base: &str, run: &str) -> String {
    format!(
        "# pantheon-tunnel log v2\n\
         # endpoint: {endpoint}\n\
         # {}: {meaning}\n\
         # {base}\n\
         # bytes: the inner IP datagram; on the path it is {OVERHEAD_BYTES} bytes more\n\
         # ecn: the inner IP datagram's ECN codepoint, 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE; {}\n\
         # {run}\n\
         # columns: t_us uid bytes ecn\n",
        side.as_str(),
        match side {
            Side::Ingress => "as the command sent it",
            Side::Egress => "as written to the TUN device (3: marked on the way, RFC 6040)",
        },
    )
}

/// The header of an endpoint's clock log (`--clock-log`): the exchanges it initiated, one line
/// `t1_us t2_us t3_us t4_us` each (RFC 5905 §8's four times), all µs since the Unix epoch.
pub fn clock_header(context: &Context) -> String {
    format!(
        "# pantheon-tunnel clock exchanges v1: those this endpoint initiated (RFC 5905 §8)\n\
         # endpoint: {}\n\
         # t1 (probe sent) and t4 (answer received) on this endpoint's clock, t2 (probe received) and t3 \
         (answer sent) on the peer's: CLOCK_REALTIME as each process reads it, µs since the Unix epoch\n\
         # command line: {}\n\
         # columns: t1_us t2_us t3_us t4_us\n",
        context.endpoint,
        one_line(&context.command_line.join(" "))
    )
}

/// A native line, `t_us uid bytes ecn`, assembled in `line`.
pub fn native_line(line: &mut LineBuffer, t_us: u64, uid: u64, inner_bytes: u64, ecn: Ecn) -> &[u8] {
    line.start().int(t_us).text(" ").int(uid).text(" ").int(inner_bytes).text(" ").int(ecn.bits()).end()
}

/// One datagram of a native log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeRecord {
    pub t_us: u64,
    pub uid: u64,
    /// The inner IP datagram's size.
    pub bytes: u64,
    /// Not-ECT in a version 1 log, which has no fourth column.
    pub ecn: Ecn,
}

/// A native log's data line, `t_us uid bytes ecn` or version 1's `t_us uid bytes`; `None` for a
/// header line or anything else (a line cut short by a full disk).
pub fn parse_native_line(line: &str) -> Option<NativeRecord> {
    let mut fields = [0u64; 4];
    let mut count = 0;
    for field in line.strip_suffix('\n').unwrap_or(line).split(' ') {
        *fields.get_mut(count)? = field.parse().ok()?;
        count += 1;
    }
    let ecn = match (count, fields[3]) {
        (3, _) => Ecn::NotEct,
        (4, bits @ 0..=3) => Ecn::from_tos(bits as u8),
        _ => return None,
    };
    Some(NativeRecord { t_us: fields[0], uid: fields[1], bytes: fields[2], ecn })
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
    // Writing to a Vec cannot fail.
    let _ = writeln!(out, "{}.{:03} - {uid} - {}", t_us / 1000, t_us % 1000, inner_bytes + OVERHEAD_BYTES);
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
    fn native_lines_are_microseconds_inner_bytes_and_the_ecn_codepoint() {
        let mut line = LineBuffer::default();
        assert_eq!(native_line(&mut line, 20_005, 0, 1464, Ecn::NotEct), b"20005 0 1464 0\n");
        assert_eq!(native_line(&mut line, 40_017, 1, 52, Ecn::Ect1), b"40017 1 52 1\n");
        assert_eq!(native_line(&mut line, 40_018, 2, 1464, Ecn::Ect0), b"40018 2 1464 2\n");
        assert_eq!(native_line(&mut line, 40_019, 3, 1464, Ecn::Ce), b"40019 3 1464 3\n");
        assert_eq!(
            native_line(&mut line, u64::MAX, u64::MAX, u64::MAX, Ecn::Ce),
            b"18446744073709551615 18446744073709551615 18446744073709551615 3\n"
        );
        let header = native_header(Side::Ingress, &context(&["x".to_string()]));
        assert!(header.starts_with("# pantheon-tunnel log v2\n"));
        assert!(header.contains("# base: t_us 0 is 1523456789012345 us since the Unix epoch"));
        assert!(header.contains("# bytes: the inner IP datagram; on the path it is 36 bytes more\n"));
        assert!(header.contains("# ecn: the inner IP datagram's ECN codepoint, 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE; as the command sent it\n# command line: x\n"));
        assert!(header.ends_with("# columns: t_us uid bytes ecn\n"));
        let egress = native_header(Side::Egress, &context(&["x".to_string()]));
        assert!(egress.contains("; as written to the TUN device (3: marked on the way, RFC 6040)\n"));
    }

    #[test]
    fn a_reader_takes_both_versions_and_refuses_the_rest() {
        let record = |t_us, uid, bytes, ecn| Some(NativeRecord { t_us, uid, bytes, ecn });
        let mut line = LineBuffer::default();
        for ecn in [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce] {
            let written = std::str::from_utf8(native_line(&mut line, 20_005, 7, 1464, ecn)).unwrap().to_string();
            assert_eq!(parse_native_line(&written), record(20_005, 7, 1464, ecn));
        }
        // Version 1: no ECN column, Not-ECT on the path.
        assert_eq!(parse_native_line("20005 7 1464"), record(20_005, 7, 1464, Ecn::NotEct));
        assert_eq!(parse_native_line("20005 7 1464\n"), record(20_005, 7, 1464, Ecn::NotEct));
        let bad =
            ["# columns: t_us uid bytes ecn", "", "20005 7", "20005 7 1464 ", "20005 7 1464 4", "20005 7 1464 2 9"];
        for line in bad {
            assert_eq!(parse_native_line(line), None, "{line:?}");
        }
    }
}
