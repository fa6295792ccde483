//! The registry: a controller named on a command line as `name[:key=value,...]`
//! (`copa`, `copa:delta=0.1`, `cubic:mss_bytes=1200`) becomes a boxed controller, or a one-line
//! error that says what is wrong (`unknown cc 'foo'; known: bbr, copa, ...`,
//! `copa: delta must be > 0, got -1`). Each algorithm reads its own keys from `Params`
//! (params.rs); a key no algorithm read is an error, so a typo never silently runs the defaults.

use crate::bbr::{Bbr, BbrConfig};
use crate::copa::{Copa, CopaConfig};
use crate::cubic::{Cubic, CubicConfig};
use crate::ledbat::{Ledbat, LedbatConfig};
use crate::params::{Params, SpecError};
use crate::pcc::allegro::{Allegro, AllegroConfig};
use crate::pcc::vivace::{Vivace, VivaceConfig};
use crate::reno::{Reno, RenoConfig};
use crate::scream::{Scream, ScreamConfig};
use crate::sprout::{Sprout, SproutConfig};
use crate::vegas::{Vegas, VegasConfig};
use crate::verus::{Verus, VerusConfig};
use crate::CongestionControl;

/// Every name `build` accepts.
pub const KNOWN: &[&str] =
    &["allegro", "bbr", "copa", "cubic", "ledbat", "reno", "scream", "sprout", "vegas", "verus", "vivace"];

/// Builds the controller a spec names, e.g. `copa:delta=0.1`.
pub fn build(spec: &str) -> Result<Box<dyn CongestionControl + Send>, SpecError> {
    let spec = spec.trim();
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let name = name.trim();
    let mut p = Params::parse(name, params)?;
    let cc: Box<dyn CongestionControl + Send> = match name {
        "allegro" => Box::new(Allegro::new(AllegroConfig::from_params(&mut p)?)),
        "bbr" => Box::new(Bbr::new(BbrConfig::from_params(&mut p)?)),
        "copa" => Box::new(Copa::new(CopaConfig::from_params(&mut p)?)),
        "cubic" => Box::new(Cubic::new(CubicConfig::from_params(&mut p)?)),
        "ledbat" => Box::new(Ledbat::new(LedbatConfig::from_params(&mut p)?)),
        "reno" => Box::new(Reno::new(RenoConfig::from_params(&mut p)?)),
        "scream" => Box::new(Scream::new(ScreamConfig::from_params(&mut p)?)),
        "sprout" => Box::new(Sprout::new(SproutConfig::from_params(&mut p)?)),
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

    fn err(spec: &str) -> String {
        build(spec).err().expect("spec should be rejected").0
    }

    #[test]
    fn every_known_name_builds_with_defaults() {
        for &name in KNOWN {
            assert_eq!(build(name).unwrap().name(), name);
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
        assert!(err("foo").contains("bbr, copa, cubic"));
        assert_eq!(err("copa:delta=-1"), "copa: delta must be > 0, got -1");
        assert_eq!(err("copa:delta=x"), "copa: delta must be a number, got 'x'");
        assert_eq!(err("copa:delta"), "copa: expected key=value, got 'delta'");
        assert_eq!(err("copa:delta=1,delta=2"), "copa: parameter 'delta' given twice");
        assert!(err("copa:detla=0.1").starts_with("copa: unknown parameter 'detla'; known: delta"));
        assert_eq!(err("reno:mss_bytes=0"), "reno: mss_bytes must be >= 1, got 0");
    }
}
