//! The files of `pantheon-sim run`, in the real experiment's formats, so that the harness's
//! record merge (python/pantheon/harness/records.py) and `pantheon analyze` read a simulated run
//! as they read an emulated one:
//!
//! - per flow (files numbered from 0, as the harness names them: flow 1 is `flow0.*`), the
//!   tunnel's four native logs (docs/tunnel.md): `flowI.sender.ingress.log` and
//!   `flowI.receiver.egress.log` for data, `flowI.receiver.ingress.log` and
//!   `flowI.sender.egress.log` for acknowledgements; lines `t_us uid bytes` with the inner
//!   datagram's size, written with the tunnel's own header and line code
//!   (`pantheon_format::tunnel_log`);
//! - `uplink.log` and `downlink.log` in pantheon-emu's `--uplink-log` form (docs/emulator.md),
//!   written by the emulator's own writer (`pantheon_format::link_log`); its lateness column is 0
//!   (virtual time is never late).
//!
//! Times are µs since the run's start. The headers say so in the words the readers look for:
//! `t_us 0 is 0000000000000000 us since the Unix epoch` — zero, written with the sixteen digits
//! of a real base, since records.py recognises a base by its fifteen digits or more. Headers
//! describe the scenario rather than the command line, so that two runs of the same scenario
//! into different directories give byte-identical files.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path as FsPath, PathBuf};

use pantheon_format::line::LineBuffer;
use pantheon_format::link_log::{describe, NativeLog};
use pantheon_format::tunnel_log::{native_header_lines, native_line, Side};
use pantheon_link::{DropCause, Ecn, PathConfig};

use crate::observer::{Direction, LinkDeparture, Observer};
use crate::scenario::Scenario;
use crate::simulation::{ACK_INNER_BYTES, DATA_INNER_BYTES};

const BUFFER_BYTES: usize = 1 << 20;
/// The base of every log: the run's start is time 0 (see the header for the digits).
const BASE_LINE: &str = "base: t_us 0 is 0000000000000000 us since the Unix epoch (simulated: the run's start)";

/// One tunnel log: `t_us uid bytes` lines.
struct TunnelLog {
    out: BufWriter<File>,
}

/// A flow's four tunnel logs.
struct FlowLogs {
    sender_ingress: TunnelLog,
    receiver_egress: TunnelLog,
    receiver_ingress: TunnelLog,
    sender_egress: TunnelLog,
}

fn create(path: &FsPath) -> io::Result<BufWriter<File>> {
    let file = File::create(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(BufWriter::with_capacity(BUFFER_BYTES, file))
}

impl TunnelLog {
    fn create(path: &FsPath, endpoint: &str, side: Side, meaning: &str, scenario_line: &str) -> io::Result<TunnelLog> {
        let mut out = create(path)?;
        let endpoint = format!("{endpoint} (simulated by pantheon-sim)");
        out.write_all(native_header_lines(&endpoint, side, meaning, BASE_LINE, scenario_line).as_bytes())?;
        Ok(TunnelLog { out })
    }
}

/// The scenario in one line, for every header.
pub fn scenario_line(scenario: &Scenario) -> String {
    let mut flows: Vec<String> = Vec::with_capacity(scenario.flow_count);
    for senders in scenario.flows.chunk_by(|a, b| a.flow == b.flow) {
        let f = &senders[0];
        let extra = match f.extra_delay_us {
            0 => String::new(),
            us => format!(", {us} us extra delay each way"),
        };
        flows.push(match f.bytes {
            None => format!("flow {} {} from {} us to {} us{extra}", f.flow + 1, f.cc, f.start_us, f.end_us),
            Some(_) => {
                let bytes: u64 = senders.iter().filter_map(|s| s.bytes).sum();
                let last_us = senders.iter().map(|s| s.start_us).max().unwrap_or(f.start_us);
                let (n, first_us) = (senders.len(), f.start_us);
                format!("flow {} {} {n} transfers of {bytes} bytes in all starting from {first_us} us to {last_us} us{extra}", f.flow + 1, f.cc)
            }
        });
    }
    format!("scenario: runtime {} us; {}", scenario.runtime_us, flows.join("; "))
}

fn link_header(name: &str, towards: &str, config: &PathConfig, seed: u64, scenario_line: &str) -> [String; 4] {
    [
        format!("direction: {name} ({towards})"),
        format!("path: {}; seed {seed}", describe(config)),
        BASE_LINE.to_string(),
        scenario_line.to_string(),
    ]
}

/// The observer that writes the files. A write error stops nothing; the first is reported at
/// the end, and the run fails then.
pub struct Logs {
    /// Every file created, to remove them if the run fails.
    files: Vec<PathBuf>,
    flows: Vec<FlowLogs>,
    uplink: NativeLog,
    downlink: NativeLog,
    line: LineBuffer,
    error: Option<io::Error>,
}

impl Logs {
    /// Creates every file of `scenario` in `dir` (which must exist).
    pub fn create(dir: &FsPath, scenario: &Scenario) -> io::Result<Logs> {
        let line = scenario_line(scenario);
        let mut files = Vec::new();
        let mut file = |name: String| -> PathBuf {
            files.push(dir.join(&name));
            dir.join(name)
        };
        let mut flows = Vec::with_capacity(scenario.flow_count);
        for i in 0..scenario.flow_count {
            let sender = format!("sender of flow {}", i + 1);
            let receiver = format!("receiver of flow {}", i + 1);
            let ingress = "datagrams entering the tunnel here (sent by the command)";
            let egress = "datagrams leaving the tunnel here (arrived from the peer)";
            flows.push(FlowLogs {
                sender_ingress: TunnelLog::create(
                    &file(format!("flow{i}.sender.ingress.log")),
                    &sender,
                    Side::Ingress,
                    ingress,
                    &line,
                )?,
                receiver_egress: TunnelLog::create(
                    &file(format!("flow{i}.receiver.egress.log")),
                    &receiver,
                    Side::Egress,
                    egress,
                    &line,
                )?,
                receiver_ingress: TunnelLog::create(
                    &file(format!("flow{i}.receiver.ingress.log")),
                    &receiver,
                    Side::Ingress,
                    ingress,
                    &line,
                )?,
                sender_egress: TunnelLog::create(
                    &file(format!("flow{i}.sender.egress.log")),
                    &sender,
                    Side::Egress,
                    egress,
                    &line,
                )?,
            });
        }
        // Over a topology the link logs are one link's (topology.rs's `log_link`): they say which.
        let topology = &scenario.topology;
        let logged = topology.logged();
        let paths = &logged.paths;
        let of_link = match topology.links.len() {
            1 => String::new(),
            n => format!(" on link {} of the topology's {n}", logged.name),
        };
        let with_name =
            |e: io::Error, name: &str| io::Error::new(e.kind(), format!("{}: {e}", dir.join(name).display()));
        let uplink = NativeLog::create(
            &file("uplink.log".into()),
            &link_header(
                "uplink",
                &format!("data, from the senders to the receivers{of_link}"),
                &paths.uplink,
                paths.uplink_seed(),
                &line,
            ),
        )
        .map_err(|e| with_name(e, "uplink.log"))?;
        let downlink = NativeLog::create(
            &file("downlink.log".into()),
            &link_header(
                "downlink",
                &format!("acknowledgements, towards the senders{of_link}"),
                &paths.downlink,
                paths.downlink_seed(),
                &line,
            ),
        )
        .map_err(|e| with_name(e, "downlink.log"))?;
        Ok(Logs { files, flows, uplink, downlink, line: LineBuffer::default(), error: None })
    }

    fn note(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    /// A line of one of `flow`'s tunnel logs: a datagram of `bytes` inside the tunnel, codepoint `ecn`.
    fn tunnel_line(
        &mut self,
        pick: fn(&mut FlowLogs) -> &mut TunnelLog,
        flow: usize,
        t_us: u64,
        uid: u64,
        bytes: u32,
        ecn: Ecn,
    ) {
        let line = native_line(&mut self.line, t_us, uid, u64::from(bytes), ecn);
        let result = pick(&mut self.flows[flow]).out.write_all(line);
        self.note(result);
    }

    fn link(&mut self, direction: Direction) -> &mut NativeLog {
        match direction {
            Direction::Uplink => &mut self.uplink,
            Direction::Downlink => &mut self.downlink,
        }
    }

    /// Removes every file: the run failed, and half a run's logs would pass for a whole one.
    pub fn discard(self) {
        let files = self.files.clone();
        drop(self);
        for file in files {
            let _ = std::fs::remove_file(file);
        }
    }

    /// Flushes every file; the first error of the run, if any.
    pub fn finish(self) -> io::Result<()> {
        let Logs { flows, uplink, downlink, error, .. } = self;
        let mut first = error.map_or(Ok(()), Err);
        let mut keep = |r: io::Result<()>| {
            if first.is_ok() {
                first = r;
            }
        };
        for f in flows {
            for log in [f.sender_ingress, f.receiver_egress, f.receiver_ingress, f.sender_egress] {
                keep(log.out.into_inner().map(drop).map_err(|e| e.into_error()));
            }
        }
        keep(uplink.finish());
        keep(downlink.finish());
        first
    }
}

impl Observer for Logs {
    fn records_link(&self) -> bool {
        true
    }

    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        self.tunnel_line(|f| &mut f.sender_ingress, flow, t_us, uid, DATA_INNER_BYTES, ecn);
    }

    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, _sent_us: u64, ecn: Ecn) {
        self.tunnel_line(|f| &mut f.receiver_egress, flow, t_us, uid, DATA_INNER_BYTES, ecn);
    }

    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.tunnel_line(|f| &mut f.receiver_ingress, flow, t_us, uid, ACK_INNER_BYTES, Ecn::NotEct);
    }

    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.tunnel_line(|f| &mut f.sender_egress, flow, t_us, uid, ACK_INNER_BYTES, Ecn::NotEct);
    }

    fn link_entry(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32) {
        self.link(direction).entry(t_us, link_uid, bytes);
    }

    fn link_departure(&mut self, direction: Direction, d: LinkDeparture) {
        let result = self.link(direction).departure(d.t_us, d.link_uid, d.bytes, d.t_us - d.entry_us, 0, d.marked);
        self.note(result);
    }

    fn link_drop(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32, cause: DropCause) {
        let result = self.link(direction).drop(t_us, link_uid, bytes, cause);
        self.note(result);
    }

    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        let result = self.link(direction).opportunity(t_us);
        self.note(result);
    }
}
