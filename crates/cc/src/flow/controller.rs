//! The controller a flow runs, as a command line names it (`--cc copa:delta=0.1`, `--flow copa`):
//! built by the registry (`crate::build`) and told the flow's packet size: unless the spec sets
//! `mss_bytes` itself, it gets `mss_bytes=1464`, so that "a packet" in the algorithm's arithmetic
//! — Vegas's α and β, Copa's 1/δ queued packets, every initial and minimum window — is exactly one
//! of our datagrams rather than the registry's default of 1500 bytes.
//!
//! A spec may also carry the flow's own option `ecn=1` (or `0`, `true`, `false`): the flow's
//! datagrams are then ECN-capable, ECT(0), and a CE mark is answered as a loss once per RTT
//! (RFC 3168; `Flow::with_ecn`). It is the flow's, not the controller's, so `build` leaves it out of
//! what the registry sees, and every driver reads it with `ecn`: `--cc cubic:ecn=1` for
//! pantheon-udp, `--flow cubic:ecn=1` for pantheon-sim, `{"cc": "cubic:ecn=1"}` in a batch job.

use super::datagram::PACKET_BYTES;
use crate::{CongestionControl, SpecError};

/// `spec` with `mss_bytes` set to the datagram size if it does not set it.
pub fn with_packet_size(spec: &str) -> String {
    let spec = spec.trim();
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let sets_mss = params.split(',').any(|item| item.split_once('=').is_some_and(|(key, _)| key.trim() == "mss_bytes"));
    match (sets_mss, params.trim().is_empty()) {
        (true, _) => spec.to_string(),
        (false, true) => format!("{name}:mss_bytes={PACKET_BYTES}"),
        (false, false) => format!("{name}:{params},mss_bytes={PACKET_BYTES}"),
    }
}

/// `spec` without the flow's `ecn` option, and whether it turns ECN on.
fn split_ecn(spec: &str) -> Result<(String, bool), SpecError> {
    let spec = spec.trim();
    let Some((name, params)) = spec.split_once(':') else { return Ok((spec.to_string(), false)) };
    let mut ecn = false;
    let mut rest = Vec::new();
    for item in params.split(',') {
        match item.split_once('=').map(|(key, value)| (key.trim(), value.trim())) {
            Some(("ecn", value)) => {
                ecn = match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(SpecError(format!("{name}: ecn must be 1 or 0, got '{value}'"))),
                }
            }
            _ => rest.push(item),
        }
    }
    let rest = rest.join(",");
    Ok((if rest.trim().is_empty() { name.to_string() } else { format!("{name}:{rest}") }, ecn))
}

/// Whether `spec` turns the flow's classic ECN on (`ecn=1`); the one-line error for a bad value.
pub fn ecn(spec: &str) -> Result<bool, SpecError> {
    split_ecn(spec).map(|(_, ecn)| ecn)
}

/// The controller `spec` names, for 1464-byte datagrams; the registry's one-line error otherwise.
pub fn build(spec: &str) -> Result<Box<dyn CongestionControl + Send>, SpecError> {
    crate::build(&with_packet_size(&split_ecn(spec)?.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_size_is_added_unless_given() {
        assert_eq!(with_packet_size("copa"), "copa:mss_bytes=1464");
        assert_eq!(with_packet_size(" copa:delta=0.1 "), "copa:delta=0.1,mss_bytes=1464");
        assert_eq!(with_packet_size("cubic:mss_bytes=1200"), "cubic:mss_bytes=1200");
        assert_eq!(with_packet_size("vegas: alpha=2, mss_bytes = 1000"), "vegas: alpha=2, mss_bytes = 1000");
    }

    #[test]
    fn every_registered_controller_takes_the_packet_size() {
        for &name in crate::KNOWN {
            assert_eq!(build(&crate::testing::buildable(name)).map(|cc| cc.name()), Ok(name));
        }
    }

    #[test]
    fn ecn_is_the_flows_option_not_the_controllers() {
        assert_eq!(split_ecn("cubic:ecn=1").unwrap(), ("cubic".to_string(), true));
        assert_eq!(split_ecn(" copa:delta=0.1, ecn=0 ").unwrap(), ("copa:delta=0.1".to_string(), false));
        assert_eq!(split_ecn("vegas:alpha=2").unwrap(), ("vegas:alpha=2".to_string(), false));
        assert!(ecn("reno:ecn=true").unwrap() && !ecn("reno").unwrap());
        assert_eq!(build("cubic:ecn=1").map(|cc| cc.name()), Ok("cubic"));
        assert_eq!(ecn("cubic:ecn=yes").err().unwrap().0, "cubic: ecn must be 1 or 0, got 'yes'");
    }

    #[test]
    fn mistakes_keep_the_registrys_words() {
        assert_eq!(build("copa:delta=-1").err().unwrap().0, "copa: delta must be > 0, got -1");
        assert!(build("foo").err().unwrap().0.starts_with("unknown cc 'foo'; known: "));
    }
}
