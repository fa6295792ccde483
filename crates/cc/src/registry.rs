//! The registry: a controller named on a command line as `name[:key=value,...]`
//! (`copa`, `copa:delta=0.1`, `cubic:mss_bytes=1200`) becomes a boxed controller, or a one-line
//! error that says what is wrong (`unknown cc 'foo'; known: bbr, copa, ...`,
//! `copa: delta must be > 0, got -1`). Each algorithm reads its own keys from `Params`
//! (params.rs); a key no algorithm read is an error, so a typo never silently runs the defaults.

use crate::bbr::{Bbr, BbrConfig};
use crate::cbr::{Cbr, CbrConfig};
use crate::copa::{Copa, CopaConfig};
use crate::cubic::{Cubic, CubicConfig};
use crate::dctcp::{Dctcp, DctcpConfig};
use crate::fixed::{Fixed, FixedConfig};
use crate::indigo::{Indigo, IndigoConfig};
use crate::ledbat::{Ledbat, LedbatConfig};
use crate::params::{Params, SpecError};
use crate::pcc::allegro::{Allegro, AllegroConfig};
use crate::pcc::vivace::{Vivace, VivaceConfig};
use crate::prague::{Prague, PragueConfig};
use crate::reno::{Reno, RenoConfig};
use crate::scream::{Scream, ScreamConfig};
use crate::sprout::{Sprout, SproutConfig};
use crate::tao::{Tao, TaoConfig};
use crate::vegas::{Vegas, VegasConfig};
use crate::verus::{Verus, VerusConfig};
use crate::CongestionControl;

/// Every name `build` accepts.
pub const KNOWN: &[&str] = &[
    "allegro", "bbr", "cbr", "copa", "cubic", "dctcp", "fixed", "indigo", "ledbat", "prague", "reno", "scream",
    "sprout", "tao", "vegas", "verus", "vivace",
];

/// Builds the controller a spec names, e.g. `copa:delta=0.1`.
pub fn build(spec: &str) -> Result<Box<dyn CongestionControl + Send>, SpecError> {
    let spec = spec.trim();
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let name = name.trim();
    let mut p = Params::parse(name, params)?;
    let cc: Box<dyn CongestionControl + Send> = match name {
        "allegro" => Box::new(Allegro::new(AllegroConfig::from_params(&mut p)?)),
        "bbr" => Box::new(Bbr::new(BbrConfig::from_params(&mut p)?)),
        "cbr" => Box::new(Cbr::new(CbrConfig::from_params(&mut p)?)),
        "copa" => Box::new(Copa::new(CopaConfig::from_params(&mut p)?)),
        "cubic" => Box::new(Cubic::new(CubicConfig::from_params(&mut p)?)),
        "dctcp" => Box::new(Dctcp::new(DctcpConfig::from_params(&mut p)?)),
        "fixed" => Box::new(Fixed::new(FixedConfig::from_params(&mut p)?)),
        "indigo" => {
            let weights = crate::indigo::weights_from_params(&mut p)?;
            Box::new(Indigo::new(IndigoConfig::from_params(&mut p)?, weights))
        }
        "ledbat" => Box::new(Ledbat::new(LedbatConfig::from_params(&mut p)?)),
        "prague" => Box::new(Prague::new(PragueConfig::from_params(&mut p)?)),
        "reno" => Box::new(Reno::new(RenoConfig::from_params(&mut p)?)),
        "scream" => Box::new(Scream::new(ScreamConfig::from_params(&mut p)?)),
        "sprout" => Box::new(Sprout::new(SproutConfig::from_params(&mut p)?)),
        "tao" => {
            let tree = crate::tao::tree_from_params(&mut p)?;
            Box::new(Tao::new(TaoConfig::from_params(&mut p)?, tree))
        }
        "vegas" => Box::new(Vegas::new(VegasConfig::from_params(&mut p)?)),
        "verus" => Box::new(Verus::new(VerusConfig::from_params(&mut p)?)),
        "vivace" => Box::new(Vivace::new(VivaceConfig::from_params(&mut p)?)),
        _ => return Err(SpecError(format!("unknown cc '{name}'; known: {}", KNOWN.join(", ")))),
    };
    p.finish()?;
    Ok(cc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{buildable, indigo_fixture, tao_fixture};

    fn err(spec: &str) -> String {
        build(spec).err().expect("spec should be rejected").0
    }

    #[test]
    fn every_known_name_builds() {
        for &name in KNOWN {
            assert_eq!(build(&buildable(name)).unwrap().name(), name);
        }
        // All with their defaults alone but `cbr` and `fixed`, `indigo` unless trained weights are
        // built in, and `tao` unless its tree is.
        let need_more: Vec<&str> = KNOWN.iter().copied().filter(|&name| build(name).is_err()).collect();
        let mut expected = vec!["cbr", "fixed"];
        if !crate::indigo::built_in_models().any(|m| m == crate::indigo::DEFAULT_MODEL) {
            expected.push("indigo");
        }
        if !crate::tao::built_in_trees().any(|t| t == crate::tao::DEFAULT_TREE) {
            expected.push("tao");
        }
        assert_eq!(need_more, expected);
    }

    #[test]
    fn fixed_and_indigo_say_what_they_need() {
        assert_eq!(err("fixed"), "fixed: give cwnd_packets=N (the window, packets)");
        assert_eq!(err("fixed:cwnd_packets=0.5"), "fixed: cwnd_packets must be >= 1, got 0.5");
        assert_eq!(err("fixed:cwnd_packets=0"), "fixed: cwnd_packets must be > 0, got 0");
        assert!(build("fixed:cwnd_packets=2.5").is_ok());
        let w = indigo_fixture();
        assert_eq!(
            err(&format!("indigo:weights={w},policy=expert")),
            "indigo: policy=expert needs oracle_cwnd_packets=X (the oracle's window, packets)"
        );
        assert_eq!(
            err(&format!("indigo:weights={w},policy=greedy")),
            "indigo: policy must be network, expert or random, got 'greedy'"
        );
        assert_eq!(
            err(&format!("indigo:weights={w},oracle_cwnd_packets=-3")),
            "indigo: oracle_cwnd_packets must be > 0, got -3"
        );
        assert_eq!(err(&format!("indigo:weights={w},record=yes")), "indigo: record must be true or false, got 'yes'");
        assert!(
            err(&format!("indigo:weights={w},polcy=random")).starts_with("indigo: unknown parameter 'polcy'; known: ")
        );
        let missing = err("indigo:weights=/no/such.safetensors");
        assert!(missing.starts_with("indigo weights /no/such.safetensors: cannot read"), "{missing}");
        assert!(!missing.contains('\n'));
        for spec in ["policy=random,seed=3", "policy=expert,oracle_cwnd_packets=12.5,record=1", "record=0"] {
            assert_eq!(build(&format!("indigo:weights={w},{spec}")).unwrap().name(), "indigo");
        }
    }

    #[test]
    fn tao_says_what_it_needs() {
        let t = tao_fixture();
        assert_eq!(build(&format!("tao:tree={t},record=1,mss_bytes=1464")).unwrap().name(), "tao");
        assert_eq!(err(&format!("tao:tree={t},model=tao-100x")), "tao: give tree=PATH or model=NAME, not both");
        assert_eq!(err(&format!("tao:tree={t},record=yes")), "tao: record must be true or false, got 'yes'");
        assert!(err(&format!("tao:tree={t},window=3")).starts_with("tao: unknown parameter 'window'; known: "));
        let missing = err("tao:tree=/no/such.pb");
        assert!(missing.starts_with("tao tree /no/such.pb: cannot read"), "{missing}");
        assert!(!missing.contains('\n'));
        if !crate::tao::built_in_trees().any(|t| t == crate::tao::DEFAULT_TREE) {
            assert_eq!(
                err("tao"),
                "tao: give tree=PATH (a RemyCC rule tree; no built-in tree 'tao-100x' in this build)"
            );
        }
    }

    #[test]
    fn parameters_reach_the_controller() {
        let copa = build(" copa : delta=0.1 ").unwrap();
        assert_eq!(copa.name(), "copa");
        assert!(build("cubic:mss_bytes=1200").is_ok());
    }

    #[test]
    fn mistakes_are_one_line_and_say_what_to_do() {
        assert_eq!(err("foo"), format!("unknown cc 'foo'; known: {}", KNOWN.join(", ")));
        assert!(err("foo").contains("bbr, cbr, copa, cubic"));
        assert_eq!(err("copa:delta=-1"), "copa: delta must be > 0, got -1");
        assert_eq!(err("copa:delta=x"), "copa: delta must be a number, got 'x'");
        assert_eq!(err("copa:delta"), "copa: expected key=value, got 'delta'");
        assert_eq!(err("copa:delta=1,delta=2"), "copa: parameter 'delta' given twice");
        assert!(err("copa:detla=0.1").starts_with("copa: unknown parameter 'detla'; known: delta"));
        assert_eq!(err("reno:mss_bytes=0"), "reno: mss_bytes must be >= 1, got 0");
        assert_eq!(err("dctcp:g=2"), "dctcp: g must be <= 1, got 2");
        assert_eq!(err("dctcp:ect1=maybe"), "dctcp: ect1 must be true or false, got 'maybe'");
        assert_eq!(err("prague:rtt_virt_ms=0"), "prague: rtt_virt_ms must be > 0, got 0");
    }
}
