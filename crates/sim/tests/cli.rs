//! The command line's contract (docs/sim.md): determinism, the emulator's messages for bad path
//! options, the registry's for bad controller specs, and the files' formats.

mod support;

use pantheon_cli::path_options::PathArgs;
use support::{body, run_ok, sim, Scratch};

const PATH: &[&str] = &["--delay", "20", "--uplink-queue-bytes", "60000", "--runtime-s", "5"];

fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut names: Vec<_> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap())).collect()
}

#[test]
fn the_same_seed_gives_byte_identical_files_and_another_seed_other_losses() {
    let scratch = Scratch::new("determinism");
    let lossy: Vec<&str> = [PATH, &["--flow", "cubic", "--flow", "bbr@1", "--uplink-loss", "0.02"]].concat();
    let run = |name: &str, seed: &str| {
        let dir = scratch.join(name);
        let summary = run_ok(&dir, &[&lossy[..], &["--seed", seed]].concat());
        (files(&dir), summary["flows"].clone())
    };
    let (a, metrics_a) = run("a", "1");
    let (b, metrics_b) = run("b", "1");
    let (c, metrics_c) = run("c", "2");
    assert_eq!(a.len(), 13, "four tunnel logs per flow, two link logs, the records and two merged logs");
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between two runs with the same seed");
    }
    assert_eq!(metrics_a, metrics_b);
    let uplink = |f: &[(String, Vec<u8>)]| f.iter().find(|(n, _)| n == "uplink.log").unwrap().1.clone();
    assert_ne!(uplink(&a), uplink(&c), "another seed must drop other packets");
    assert_ne!(metrics_a, metrics_c);
}

#[test]
fn without_text_logs_a_run_writes_the_records_and_the_merged_logs_alone() {
    let scratch = Scratch::new("records-only");
    let dir = scratch.join("run");
    let out = sim(&[&["run", "--out", dir.to_str().unwrap(), "--flow", "cubic"], PATH].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names: Vec<String> = files(&dir).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["acklink.log", "datalink.log", "records.parquet"]);
    let with_logs = scratch.join("with-logs");
    run_ok(&with_logs, &[PATH, &["--flow", "cubic"]].concat());
    for name in &names {
        assert!(
            std::fs::read(dir.join(name)).unwrap() == std::fs::read(with_logs.join(name)).unwrap(),
            "{name} does not depend on --text-logs"
        );
    }
}

/// What pantheon-emu says of the same options (its path options are this code), after its own prefix.
fn emulator_message(args: &[&str]) -> String {
    PathArgs::validate_words(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()).unwrap_err()
}

#[test]
fn a_bad_path_option_is_the_emulators_one_line() {
    let scratch = Scratch::new("bad-path");
    let out_dir = scratch.join("run");
    let cases: &[&[&str]] = &[
        &["--uplink-rate", "0"],
        &["--downlink-rate", "fast"],
        &["--uplink-loss", "1.5"],
        &["--delay", "-1"],
        &["--uplink-queue", "droptail"],
        &["--uplink-policer", "12"],
        &["--uplink-trace", "/nonexistent/x.trace"],
        &["--seed", "x"],
        // Issue 18: these ran until the OOM killer ended pantheon-sim, or wrapped model time.
        &["--uplink-trace", "/dev/zero"],
        &["--downlink-trace", "/"],
        &["--delay", "1e300"],
        &["--delay", "1.9e16"],
        &["--delay", "1e17"],
        &["--uplink-rate", "1e300"],
        &["--downlink-queue-bytes", "99999999999999"],
    ];
    for args in cases {
        let argv = [&["run", "--out", out_dir.to_str().unwrap(), "--flow", "cubic"], *args].concat();
        let out = sim(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr, format!("pantheon-sim: {}\n", emulator_message(args)), "{args:?}");
    }
    assert!(!out_dir.exists(), "a refused run creates nothing");
}

#[test]
fn runtimes_and_job_counts_beyond_their_bounds_are_one_line() {
    let scratch = Scratch::new("bounds");
    let out_dir = scratch.join("run");
    let out = sim(&["run", "--out", out_dir.to_str().unwrap(), "--flow", "cubic", "--runtime-s", "inf"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        "pantheon-sim: --runtime-s: expected a positive number of seconds up to 86400 (one day), got inf\n"
    );
    let out = sim(&["batch", "--jobs", "1000000"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr, "pantheon-sim: --jobs: expected a whole number from 1 to 1024, got '1000000'\n");
    assert!(!out_dir.exists());
}

#[test]
fn a_bad_spec_is_the_registrys_one_line() {
    let scratch = Scratch::new("bad-spec");
    let out_dir = scratch.join("run");
    for spec in ["copa:delta=-1", "foo", "cubic:beta=2,beta=3"] {
        let registry = pantheon_cc::flow::controller::build(spec).err().expect("a bad spec").0;
        let out = sim(&["run", "--out", out_dir.to_str().unwrap(), "--flow", "cubic", "--flow", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(&format!("pantheon-sim: --flow {spec}: flow 2")), "{stderr}");
        assert!(stderr.trim_end().ends_with(&registry), "{stderr} should end with {registry}");
    }
    let out = sim(&["run", "--out", out_dir.to_str().unwrap(), "--flow", "cubic@31"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!out_dir.exists());
}

#[test]
fn logs_are_the_tunnels_and_the_emulators_formats() {
    let scratch = Scratch::new("formats");
    let dir = scratch.join("run");
    run_ok(&dir, &[PATH, &["--flow", "cubic"]].concat());
    let header = std::fs::read_to_string(dir.join("flow0.sender.ingress.log")).unwrap();
    assert!(header.contains("# base: t_us 0 is 0000000000000000 us since the Unix epoch"));
    // IW10: ten 1464-byte datagrams at time 0, uids 0..9. They reach the link after 20 ms and
    // leave at its opportunities, one per 1500 bytes at 12 Mbit/s: every 1000 µs of the link's
    // clock, which in this run (seed 0) is 1 208 992 µs ahead of the run's (link_clock.rs: the
    // emulator's lead), 992 µs past an opportunity, so at 20 008, 21 008, ... µs of the run's.
    assert_eq!(pantheon_sim::link_clock::link_phase_us(0), 1_208_992);
    let sent = body(&dir.join("flow0.sender.ingress.log"));
    assert_eq!(sent[..2], ["0 0 1464 0", "0 1 1464 0"]);
    let received = body(&dir.join("flow0.receiver.egress.log"));
    assert_eq!(received[..2], ["20008 0 1464 0", "21008 1 1464 0"]);
    // Each is acknowledged (60 bytes) a host's wake-up later (at least 15 µs, host.rs)...
    let acks = body(&dir.join("flow0.receiver.ingress.log"));
    let ack_sent_us: u64 = acks[0].strip_suffix(" 0 60 0").unwrap().parse().unwrap();
    assert!((20_023..21_008).contains(&ack_sent_us), "{}", acks[0]);
    // ... so, 20 ms later, it just misses the downlink's opportunity at 40 008 µs and takes the
    // next (96 bytes on the path).
    let acked = body(&dir.join("flow0.sender.egress.log"));
    assert_eq!(acked[0], "41008 0 60 0");
    let uplink = body(&dir.join("uplink.log"));
    assert_eq!(uplink[0], "0 + 0 1500");
    assert!(uplink.contains(&"20008 - 0 1500 20008 0".to_string()), "departure line with delay and lateness");
    assert!(uplink.contains(&"1008 # 1500".to_string()), "idle opportunities are logged");
}

#[test]
fn a_link_phase_of_zero_puts_the_flows_start_on_the_links_clock() {
    // A replay's setting: the first datagram, sent at 0, leaves the delay line at 20 000 µs, an
    // opportunity of the link's own clock, and goes at once; the second waits for 21 000.
    let scratch = Scratch::new("phase-zero");
    let dir = scratch.join("run");
    run_ok(&dir, &[PATH, &["--flow", "cubic", "--link-phase-us", "0"]].concat());
    let received = body(&dir.join("flow0.receiver.egress.log"));
    assert_eq!(received[..2], ["20000 0 1464 0", "21000 1 1464 0"]);
    // Beyond a minute is no emulator's lead: refused.
    let out = sim(&["run", "--out", dir.to_str().unwrap(), "--flow", "cubic", "--link-phase-us", "60000001"]);
    assert_eq!(out.status.code(), Some(2));
}
