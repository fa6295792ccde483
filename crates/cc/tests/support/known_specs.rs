//! A spec that builds for each registered name, for the tests that run every controller (the
//! registry's and the flow's unit tests, tests/no_alloc.rs): the name alone where its defaults
//! do, and the parameters it cannot do without otherwise.

/// The test network (tests/fixtures/indigo/lstm32.safetensors): random weights, 32 units.
pub fn indigo_fixture() -> String {
    format!("{}/tests/fixtures/indigo/lstm32.safetensors", env!("CARGO_MANIFEST_DIR"))
}

/// The test rule tree (tests/fixtures/tao/three_rules.pb, written by `pantheon-sim tree write`
/// from three_rules.json beside it): three rules, two levels.
pub fn tao_fixture() -> String {
    format!("{}/tests/fixtures/tao/three_rules.pb", env!("CARGO_MANIFEST_DIR"))
}

/// `name` with what it must be given: `cbr` a rate (6 Mbit/s, half of the tests' usual 12 Mbit/s
/// link, so that it neither starves nor floods it), `fixed` a window, `indigo` weights (and, since the test
/// network's own choices are arbitrary, the expert's policy, whose window settles at its oracle),
/// `tao` a rule tree unless one is built in.
pub fn buildable(name: &str) -> String {
    match name {
        "cbr" => "cbr:rate_mbps=6".to_string(),
        "fixed" => "fixed:cwnd_packets=20".to_string(),
        "indigo" => format!("indigo:weights={},policy=expert,oracle_cwnd_packets=40", indigo_fixture()),
        "tao" => format!("tao:tree={}", tao_fixture()),
        _ => name.to_string(),
    }
}
