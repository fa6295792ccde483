//! `pantheon-udp` end to end over loopback: a receiver and a sender as separate processes, the
//! sender's per-acknowledgement log read back, both stopped with SIGTERM. No emulated path: the
//! flow is limited only by the two processes, so these tests check the plumbing (datagrams out,
//! acknowledgements back, controller fed, ECN codepoints and CE counts, clean stop), not an
//! algorithm's behaviour. Loopback keeps each datagram's TOS byte as it was sent, and nothing on
//! it marks CE: a test socket sends the marked datagrams itself.

use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_pantheon-udp");

/// A port nobody listens on right now (the kernel's choice for a throwaway socket).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pantheon-udp-test-{}-{name}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    dir
}

struct Process {
    child: Child,
    stderr: PathBuf,
}

impl Process {
    fn start(args: &[&str], stderr: PathBuf) -> Process {
        let child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Process { child, stderr }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, then the exit status and how long the exit took.
    fn terminate(&mut self) -> (ExitStatus, Duration) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(start.elapsed() < Duration::from_secs(5), "no exit 5 s after SIGTERM");
            sleep(Duration::from_millis(5));
        }
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Data lines of a sender log: (t_us, cwnd_bytes, pacing_rate_bps, srtt_us, rtt_us, inflight_bytes).
fn log_lines(path: &PathBuf) -> Vec<Vec<String>> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# t_us cwnd_bytes pacing_rate_bps srtt_us rtt_us inflight_bytes"));
    lines.map(|l| l.split(' ').map(str::to_string).collect()).collect()
}

/// The counts in the sender's closing line.
fn sender_counts(stderr: &str) -> (u64, u64, u64) {
    let line = stderr.lines().last().unwrap_or_default();
    let number_before = |word: &str| -> u64 {
        let at = line.find(word).unwrap_or_else(|| panic!("no '{word}' in {line:?}"));
        line[..at].split_whitespace().last().unwrap().trim_start_matches('(').parse().unwrap()
    };
    (number_before(" datagrams,"), number_before(" acknowledged ("), number_before(" declared lost"))
}

/// The receiver's closing line's data datagrams by ECN codepoint: Not-ECT, ECT(1), ECT(0), CE.
fn receiver_codepoints(stderr: &str) -> [u64; 4] {
    let line = stderr.lines().last().unwrap_or_default();
    let count = |name: &str| -> u64 {
        let at = line.find(&format!(" {name}")).unwrap_or_else(|| panic!("no '{name}' in {line:?}"));
        line[..at].rsplit([' ', ';']).next().unwrap().parse().unwrap()
    };
    [count("Not-ECT,"), count("ECT(1),"), count("ECT(0),"), count("CE)")]
}

/// A flow of `cc` for `seconds`. The receiver's codepoint counts.
fn flow(cc: &str, seconds: f64) -> [u64; 4] {
    let dir = scratch(&cc.replace([':', '=', ','], "-"));
    let port = free_port().to_string();
    let mut receiver = Process::start(&["recv", "--bind", "127.0.0.1", &port], dir.join("recv.stderr"));
    sleep(Duration::from_millis(200));
    let log = dir.join("send.log");
    let args = vec!["send", "--cc", cc, "--log", log.to_str().unwrap(), "127.0.0.1", &port];
    let mut sender = Process::start(&args, dir.join("send.stderr"));
    sleep(Duration::from_secs_f64(seconds / 2.0));
    // SAFETY: signalling our own children. SIGUSR1 asks for the totals so far and stops nothing.
    unsafe {
        libc::kill(sender.child.id() as libc::pid_t, libc::SIGUSR1);
        libc::kill(receiver.child.id() as libc::pid_t, libc::SIGUSR1);
    }
    sleep(Duration::from_secs_f64(seconds / 2.0));
    assert!(sender.running(), "sender exited on its own: {}", sender.stderr());
    assert!(receiver.running(), "receiver exited on its own: {}", receiver.stderr());
    let (status, took) = sender.terminate();
    assert!(status.success(), "sender: {status}; {}", sender.stderr());
    assert!(took < Duration::from_millis(500), "sender took {took:?} to stop");
    let (status, took) = receiver.terminate();
    assert!(status.success(), "receiver: {status}; {}", receiver.stderr());
    assert!(took < Duration::from_millis(500), "receiver took {took:?} to stop");

    let (sent, acked, lost) = sender_counts(&sender.stderr());
    let halfway = sender.stderr().lines().next().map(sender_counts).unwrap();
    assert_eq!(sender.stderr().lines().count(), 2, "a line for SIGUSR1, one at the end: {}", sender.stderr());
    assert!(halfway.1 > 0 && halfway.1 < acked, "halfway {halfway:?}, at the end {acked}");
    assert_eq!(receiver.stderr().lines().count(), 2, "{}", receiver.stderr());
    // Loopback moves hundreds of Mbit/s even on a loaded machine: well over 1000 datagrams.
    assert!(acked > 1000, "only {acked} acknowledged: {}", sender.stderr());
    assert!(acked + lost <= sent, "{acked} acked + {lost} lost > {sent} sent");
    let lines = log_lines(&log);
    assert_eq!(lines.len() as u64, acked, "one log line per acknowledgement given to the controller");
    let mut last_t_us = 0;
    for fields in &lines {
        let t_us: u64 = fields[0].parse().unwrap();
        assert!(t_us >= last_t_us, "log goes back in time");
        last_t_us = t_us;
        let srtt_us: u64 = fields[3].parse().unwrap();
        // Loopback round trips are microseconds; a second would mean stale or wrong timestamps.
        assert!(srtt_us < 1_000_000, "srtt {srtt_us} us");
        let cwnd_bytes: u64 = fields[1].parse().unwrap();
        assert!(cwnd_bytes >= 2 * 1464, "{cc} window {cwnd_bytes} below two packets");
    }
    assert!(last_t_us as f64 > (seconds - 1.0) * 1e6, "acknowledgements stopped at {last_t_us} us");
    let received: u64 = receiver.stderr().lines().last().unwrap().split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(received >= acked, "receiver saw {received} datagrams, sender {acked} acknowledgements");
    let codepoints = receiver_codepoints(&receiver.stderr());
    assert_eq!(codepoints.iter().sum::<u64>(), received, "{}", receiver.stderr());
    assert!(
        sender.stderr().lines().last().unwrap().contains(", 0 marked CE;"),
        "nothing marks on loopback: {}",
        sender.stderr()
    );
    fs::remove_dir_all(dir).unwrap();
    codepoints
}

#[test]
fn cubic_flow_is_acknowledged_and_stops_cleanly() {
    let [not_ect, ..] = flow("cubic", 2.0);
    assert!(not_ect > 1000, "{not_ect} Not-ECT datagrams");
}

#[test]
fn vegas_flow_is_acknowledged_and_stops_cleanly() {
    flow("vegas", 2.0);
}

#[test]
fn with_ecn_every_data_datagram_arrives_ect0() {
    // ecn=1 in the controller's spec, the flow's option (flow/controller.rs).
    for cc in ["cubic:ecn=1", "vegas:alpha=2,ecn=1"] {
        let [not_ect, ect1, ect0, ce] = flow(cc, 1.0);
        assert_eq!((not_ect, ect1, ce), (0, 0, 0), "{cc}");
        assert!(ect0 > 1000, "{cc}: {ect0} ECT(0) datagrams");
    }
}

#[test]
fn acknowledgements_echo_each_senders_count_of_ce_marked_datagrams_and_are_not_ect() {
    use pantheon_sys::udp::{self, RecvBatch};
    use pantheon_transport::wire::{Ack, Data, ACK_BYTES, DATA_BYTES};

    let dir = scratch("ce-count");
    let port = free_port();
    let mut receiver = Process::start(&["recv", "--bind", "127.0.0.1", &port.to_string()], dir.join("recv.stderr"));
    sleep(Duration::from_millis(200));
    let options = udp::Options {
        buffer_bytes: 1 << 20,
        timestamps: false,
        overflow_counts: false,
        blocking_sends: true,
        receive_tos: true,
    };
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    // Two senders: the marks of one are not the other's.
    let bind = |_: usize| udp::UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), options).unwrap();
    let senders: Vec<_> = (0..2).map(bind).collect();
    // Sender 0 sends ECT(0), CE, CE, ECT(0), CE; sender 1 ECT(1), CE. The marks are as a queue
    // on the path would have set them; the TOS is set per datagram with a control message.
    let plan: [(usize, u8); 7] = [(0, 0b10), (0, 0b11), (1, 0b01), (0, 0b11), (0, 0b10), (1, 0b11), (0, 0b11)];
    let mut expected = Vec::new();
    let mut counts = [0u16; 2];
    for (seq, &(sender, tos)) in plan.iter().enumerate() {
        let mut datagram = [0u8; DATA_BYTES];
        Data { seq: seq as u64, send_us: 1000 + seq as u64, transfer_id: 0, budget_packets: 0 }.encode(&mut datagram);
        senders[sender].send_to(&datagram, to, tos).unwrap();
        counts[sender] += u16::from(tos == 0b11);
        expected.push((sender, seq as u64, counts[sender]));
        // One at a time, so that the acknowledgements come back in order.
        sleep(Duration::from_millis(20));
    }
    let mut got: Vec<(usize, u64, u16)> = Vec::new();
    for (sender, socket) in senders.iter().enumerate() {
        let mut batch = RecvBatch::new(16, 2 * ACK_BYTES);
        let start = Instant::now();
        while got.iter().filter(|(s, ..)| *s == sender).count() < plan.iter().filter(|(s, _)| *s == sender).count() {
            assert!(start.elapsed() < Duration::from_secs(2), "acknowledgements missing: {got:?}");
            for i in 0..batch.receive(socket).unwrap() {
                let received = batch.get(i);
                assert_eq!(received.tos, Some(0), "acknowledgements are Not-ECT");
                let ack = Ack::decode(received.bytes).expect("an acknowledgement");
                assert_eq!(ack.send_us, 1000 + ack.seq);
                got.push((sender, ack.seq, ack.ce_count));
            }
            sleep(Duration::from_millis(1));
        }
    }
    got.sort_by_key(|&(_, seq, _)| seq);
    // Sender 0's counts 0, 1, 2, 2, 3; sender 1's 0, 1.
    assert_eq!(got, expected);
    assert_eq!(expected.iter().map(|&(_, _, c)| c).collect::<Vec<_>>(), [0, 1, 0, 2, 2, 1, 3]);
    receiver.terminate();
    // The receiver's line counts the datagrams by codepoint.
    assert_eq!(receiver_codepoints(&receiver.stderr()), [0, 1, 2, 4]);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sender_probes_an_absent_receiver_and_resumes_when_it_comes() {
    let dir = scratch("absent");
    let port = free_port().to_string();
    let log = dir.join("send.log");
    let mut sender = Process::start(
        &["send", "--cc", "reno", "--log", log.to_str().unwrap(), "127.0.0.1", &port],
        dir.join("send.stderr"),
    );
    // Nobody listens: every datagram earns an ICMP port unreachable. 1.5 s is past the 1 s of
    // silence after which the sender only probes.
    sleep(Duration::from_millis(1500));
    assert!(sender.running(), "sender gave up on an absent receiver: {}", sender.stderr());
    assert_eq!(log_lines(&log).len(), 0);
    let mut receiver = Process::start(&["recv", "--bind", "127.0.0.1", &port], dir.join("recv.stderr"));
    // Probes leave every 100 ms; the first one answered hands the flow back to the controller.
    sleep(Duration::from_millis(1000));
    let (status, _) = sender.terminate();
    assert!(status.success(), "{}", sender.stderr());
    let (sent, acked, _) = sender_counts(&sender.stderr());
    assert!(acked > 1000, "flow did not resume: {acked} of {sent} acknowledged");
    receiver.terminate();
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_receiver_outlives_its_senders() {
    let dir = scratch("senders");
    let port = free_port().to_string();
    let mut receiver = Process::start(&["recv", "--bind", "127.0.0.1", &port], dir.join("recv.stderr"));
    sleep(Duration::from_millis(200));
    for round in 0..2 {
        let mut sender =
            Process::start(&["send", "--cc", "cubic", "127.0.0.1", &port], dir.join(format!("send{round}.stderr")));
        sleep(Duration::from_millis(500));
        sender.terminate();
        let (_, acked, _) = sender_counts(&sender.stderr());
        assert!(acked > 100, "sender {round}: {acked} acknowledged");
    }
    assert!(receiver.running());
    let (status, _) = receiver.terminate();
    assert!(status.success());
    fs::remove_dir_all(dir).unwrap();
}

/// The lines of a transfers log: (transfer_id, epoch_us).
fn transfer_lines(path: &PathBuf) -> Vec<(u32, u64)> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let (id, epoch_us) = line.split_once(' ').unwrap_or_else(|| panic!("not 'id epoch_us': {line:?}"));
            (id.parse().unwrap(), epoch_us.parse().unwrap())
        })
        .collect()
}

fn epoch_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64
}

/// Waits up to 10 s for `sender` to exit on its own; its status.
/// A receiver logging its transfers to `dir`/received.log, on a free port, given time to bind.
fn transfers_receiver(dir: &Path) -> (String, PathBuf, Process) {
    let port = free_port().to_string();
    let received_log = dir.join("received.log");
    let receiver = Process::start(
        &["recv", "--bind", "127.0.0.1", "--transfers-log", received_log.to_str().unwrap(), &port],
        dir.join("recv.stderr"),
    );
    sleep(Duration::from_millis(200));
    (port, received_log, receiver)
}

fn exits_on_its_own(sender: &mut Process) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = sender.child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "a transfer still running after 10 s: {}", sender.stderr());
        sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_transfer_ends_when_acknowledged_and_the_receiver_logs_it_once() {
    let dir = scratch("transfer");
    let (port, received_log, mut receiver) = transfers_receiver(&dir);
    let began_log = dir.join("began.log");
    let before_us = epoch_us();
    // 146 400 bytes: exactly 100 datagrams of 1464.
    let args = [
        "send",
        "--cc",
        "cubic",
        "--bytes",
        "146400",
        "--transfer-id",
        "42",
        "--transfers-log",
        began_log.to_str().unwrap(),
        "127.0.0.1",
        &port,
    ];
    let mut sender = Process::start(&args, dir.join("send.stderr"));
    let status = exits_on_its_own(&mut sender);
    let after_us = epoch_us();
    assert!(status.success(), "{status}: {}", sender.stderr());
    let (sent, acked, lost) = sender_counts(&sender.stderr());
    assert_eq!(acked, 100, "{}", sender.stderr());
    assert_eq!(sent, acked + lost, "every datagram acknowledged or lost: {}", sender.stderr());
    // The receiver keeps going, for the next sender; the log has the transfer once.
    sleep(Duration::from_millis(200));
    assert!(receiver.running(), "{}", receiver.stderr());
    let ended = transfer_lines(&received_log);
    let began = transfer_lines(&began_log);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!((ended[0].0, began[0].0), (42, 42));
    assert!(before_us <= began[0].1 && began[0].1 <= ended[0].1 && ended[0].1 <= after_us, "{began:?} {ended:?}");
    receiver.terminate();
    assert!(receiver.stderr().contains(", 1 transfers complete"), "{}", receiver.stderr());
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn concurrent_transfers_are_each_logged_once_by_one_receiver() {
    let dir = scratch("transfers");
    let (port, received_log, mut receiver) = transfers_receiver(&dir);
    // Two at once (1 MB, 684 datagrams, and 100 kB, 69), then a third from a rate-paced sender;
    // a bulk sender runs beside them all and is never logged.
    let start = |args: &[&str], name: &str| Process::start(args, dir.join(name));
    let mut bulk = start(&["send", "--cc", "cubic", "127.0.0.1", &port], "bulk.stderr");
    let mut first =
        start(&["send", "--cc", "cubic", "--bytes", "1000000", "--transfer-id", "1", "127.0.0.1", &port], "1.stderr");
    let mut second =
        start(&["send", "--cc", "bbr", "--bytes", "100000", "--transfer-id", "2", "127.0.0.1", &port], "2.stderr");
    for sender in [&mut first, &mut second] {
        let status = exits_on_its_own(sender);
        assert!(status.success(), "{status}: {}", sender.stderr());
    }
    let mut third = start(
        &["send", "--cc", "cbr:rate_mbps=12", "--bytes", "14640", "--transfer-id", "3", "127.0.0.1", &port],
        "3.stderr",
    );
    assert!(exits_on_its_own(&mut third).success(), "{}", third.stderr());
    assert_eq!(sender_counts(&third.stderr()).1, 10, "{}", third.stderr());
    sleep(Duration::from_millis(200));
    assert!(bulk.running(), "{}", bulk.stderr());
    bulk.terminate();
    let mut ids: Vec<u32> = transfer_lines(&received_log).iter().map(|&(id, _)| id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3]);
    receiver.terminate();
    fs::remove_dir_all(dir).unwrap();
}

/// One line on stderr, exit status 2.
fn rejected(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {:?}", out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr:?}");
    stderr.trim_end().to_string()
}

#[test]
fn bad_command_lines_are_one_line_and_status_2() {
    assert_eq!(
        rejected(&["send", "--cc", "copa:delta=-1", "127.0.0.1", "9000"]),
        "pantheon-udp: --cc: copa: delta must be > 0, got -1"
    );
    // The registry lists every controller it knows, however many are registered.
    assert!(rejected(&["send", "--cc", "foo", "127.0.0.1", "9000"])
        .starts_with(&format!("pantheon-udp: --cc: unknown cc 'foo'; known: {}", pantheon_cc::KNOWN.join(", "))));
    assert!(rejected(&["send", "--cc", "cubic:detla=1", "127.0.0.1", "9000"]).contains("unknown parameter 'detla'"));
    assert!(rejected(&["send", "127.0.0.1", "9000"]).contains("required arguments were not provided"));
    assert!(rejected(&["send", "--cc", "cubic", "not-an-address", "9000"]).contains("not-an-address"));
    assert_eq!(
        rejected(&["send", "--cc", "cubic:ecn=maybe", "127.0.0.1", "9000"]),
        "pantheon-udp: --cc: cubic: ecn must be 1 or 0, got 'maybe'"
    );
    assert!(rejected(&["recv", "0"]).contains("0 is not in 1..=65535"));
    assert!(rejected(&["recv", "--bind", "10.255.255.254", "9000"])
        .starts_with("pantheon-udp: cannot listen on 10.255.255.254:9000"));
    assert!(rejected(&["send", "--cc", "cubic", "--log", "/nonexistent/dir/log", "127.0.0.1", "9000"])
        .starts_with("pantheon-udp: --log /nonexistent/dir/log: cannot create it"));
    assert!(rejected(&["send", "--cc", "cubic", "--bytes", "0", "127.0.0.1", "9000"]).contains("--bytes"));
    assert_eq!(
        rejected(&["send", "--cc", "cubic", "--bytes", "18446744073709551615", "127.0.0.1", "9000"]),
        "pantheon-udp: --bytes: 18446744073709551615 bytes are 12600235023025651 datagrams, more than a transfer can count (4294967295)"
    );
    assert!(rejected(&["send", "--cc", "cubic", "--transfer-id", "3", "127.0.0.1", "9000"])
        .contains("required arguments were not provided"));
    assert!(rejected(&["recv", "--transfers-log", "/nonexistent/dir/log", "9000"])
        .starts_with("pantheon-udp: --transfers-log /nonexistent/dir/log: cannot create it"));
}
