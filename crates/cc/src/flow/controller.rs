//! The controller a flow runs, as a command line names it (`--cc copa:delta=0.1`, `--flow copa`):
//! built by the registry (`crate::build`) and told the flow's packet size: unless the spec sets
//! `mss_bytes` itself, it gets `mss_bytes=1464`, so that "a packet" in the algorithm's arithmetic
//! — Vegas's α and β, Copa's 1/δ queued packets, every initial and minimum window — is exactly one
//! of our datagrams rather than the registry's default of 1500 bytes.

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

/// The controller `spec` names, for 1464-byte datagrams; the registry's one-line error otherwise.
pub fn build(spec: &str) -> Result<Box<dyn CongestionControl + Send>, SpecError> {
    crate::build(&with_packet_size(spec))
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
    fn mistakes_keep_the_registrys_words() {
        assert_eq!(build("copa:delta=-1").err().unwrap().0, "copa: delta must be > 0, got -1");
        assert!(build("foo").err().unwrap().0.starts_with("unknown cc 'foo'; known: "));
    }
}
