//! The network a run's flows cross: a few links in series or side by side, and a route per flow
//! (issue 36 §3). Each link is what the single path of every other run is — a pair of
//! `pantheon_link::Path`s, configured by pantheon-emu's own options (`pantheon_cli::path_options`)
//! — and a flow's route is the ordered list of links its data crosses; its acknowledgements cross
//! the same links' other directions in reverse order. A run without a topology is a topology of
//! one link that every flow crosses (`Topology::single`), and runs exactly as it did before there
//! were topologies (simulation.rs's `one_link_topology_is_the_path_bit_for_bit` test).
//!
//! A topology file is TOML (docs/sim.md, "Topologies"; examples in data/topologies/):
//!
//! ```toml
//! description = "parking lot: two 12 Mbit/s hops, a long flow over both"
//! routes = [["hop1", "hop2"], ["hop1"], ["hop2"]]   # flow 0's, flow 1's, ... (records' numbers)
//! log_link = "hop1"                                 # optional: whose link logs; default the first
//!
//! [[link]]
//! name = "hop1"
//! path = ["--delay", "10", "--uplink-rate", "12", "--uplink-queue-bytes", "60000"]
//!
//! [[link]]
//! name = "hop2"
//! path = ["--delay", "10", "--uplink-rate", "12", "--uplink-queue-bytes", "60000"]
//! ```
//!
//! - `path` holds a link's options exactly as a batch job's `path` (the emulator's options: its
//!   uplink is the direction data crosses, its downlink the acknowledgements'), validated by the
//!   code every driver shares, so a mistake reads as the emulator's message, prefixed by the link.
//!   A trace file is found relative to the topology file. `--seed` is the run's, never a link's:
//!   link 0 is seeded with it exactly as a run without a topology seeds its path, link k with
//!   `link_seed(seed, k)`, so links draw their losses and Poisson deliveries independently.
//! - `routes[i]` is flow i's route (flows numbered from 0, as in the records): link names, in the
//!   order its data crosses them, each at most once. A run may have fewer flows than routes (the
//!   rest are unused), not more.
//! - `log_link` names the link whose two directions the link logs describe (datalink.log's
//!   delivery opportunities, and with `--text-logs` uplink.log and downlink.log): the link logs
//!   are one link's, as the emulator's are; the other links log nothing.
//!
//! The same fields, as JSON, make a `TopologySpec` (a batch job's `topology` would be one), so
//! the file is one way of writing a spec, not a format of its own.

use std::path::{Path, PathBuf};

use pantheon_cli::path_options::{PathArgs, PathPair};
use serde::Deserialize;

/// Most links in a topology: parking lots of a few hops and dumbbells with an access link per
/// flow fit well; a topology is a handful of bottlenecks, not a network to route over.
pub const MAX_LINKS: usize = 256;
/// Largest topology file read.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Mixed into the run's seed for link k > 0 (the golden ratio's 64-bit fraction, spreading
/// neighbouring links' seeds across the range).
const LINK_SEED_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// One link as written: its name and its path options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub name: String,
    #[serde(default)]
    pub path: Vec<String>,
}

/// A topology as written (a TOML file's, or a JSON object's fields), before validation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Free text for the reader; the simulation ignores it.
    #[serde(default)]
    pub description: Option<String>,
    /// Per flow (from 0), the names of the links its data crosses, in order.
    pub routes: Vec<Vec<String>>,
    /// The link the link logs describe; the first link if absent.
    #[serde(default)]
    pub log_link: Option<String>,
    #[serde(rename = "link")]
    pub links: Vec<LinkSpec>,
}

/// One validated link: both directions' configurations and seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    pub name: String,
    /// Its uplink carries data, its downlink acknowledgements; `paths.seed` is the link's own
    /// seed (`link_seed`).
    pub paths: PathPair,
}

/// A validated topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub links: Vec<Link>,
    /// Per flow (records' number), the indices in `links` of the links its data crosses, in
    /// order: never empty, no link twice.
    pub routes: Vec<Vec<usize>>,
    /// The index of the link the link logs describe.
    pub log_link: usize,
}

/// The seed of link `k` in a run seeded `seed`: the run's own for link 0 (so a one-link topology
/// draws what the single path of a run without one draws), spread for the others.
pub fn link_seed(seed: u64, k: usize) -> u64 {
    seed.wrapping_add((k as u64).wrapping_mul(LINK_SEED_STEP))
}

impl Topology {
    /// The single path every run without a topology has: one link, named "path", crossed by each
    /// of `flows` flows.
    pub fn single(paths: PathPair, flows: usize) -> Topology {
        Topology { links: vec![Link { name: "path".into(), paths }], routes: vec![vec![0]; flows], log_link: 0 }
    }

    /// The run's seed (link 0's, `link_seed`): the hosts' and the link clock's draws use it.
    pub fn seed(&self) -> u64 {
        self.links[0].paths.seed
    }

    /// The link the link logs describe.
    pub fn logged(&self) -> &Link {
        &self.links[self.log_link]
    }

    /// Reads the topology file at `file` for a run seeded `seed`.
    pub fn read(file: &Path, seed: u64) -> Result<Topology, String> {
        let name = file.display().to_string();
        let at = |e: String| format!("--topology {name}: {e}");
        let size = std::fs::metadata(file).map_err(|e| at(e.to_string()))?.len();
        if size > MAX_FILE_BYTES {
            return Err(at(format!("{size} bytes, more than the {MAX_FILE_BYTES} a topology file may have")));
        }
        let text = std::fs::read_to_string(file).map_err(|e| at(e.to_string()))?;
        let spec = TopologySpec::parse_toml(&text).map_err(at)?;
        spec.build(seed, file.parent()).map_err(at)
    }
}

impl TopologySpec {
    /// A topology file's text; a syntax error or an unknown key is TOML's message on one line.
    pub fn parse_toml(text: &str) -> Result<TopologySpec, String> {
        toml::from_str(text).map_err(|e| {
            let message = e.message().trim().replace('\n', " ");
            match e.span() {
                Some(span) => format!("line {}: {message}", text[..span.start].lines().count().max(1)),
                None => message,
            }
        })
    }

    /// Validates the spec for a run seeded `seed`; relative trace files are found in `dir` (the
    /// topology file's directory) when given.
    pub fn build(&self, seed: u64, dir: Option<&Path>) -> Result<Topology, String> {
        if self.links.is_empty() {
            return Err("no links: give at least one [[link]] with a name and its path options".into());
        }
        if self.links.len() > MAX_LINKS {
            return Err(format!("{} links, more than the {MAX_LINKS} a topology may have", self.links.len()));
        }
        let mut links: Vec<Link> = Vec::with_capacity(self.links.len());
        for (k, spec) in self.links.iter().enumerate() {
            let name = spec.name.trim();
            if name.is_empty() {
                return Err(format!("link {}: give it a name (name = \"...\")", k + 1));
            }
            if links.iter().any(|l| l.name == name) {
                return Err(format!("two links are named '{name}': each link needs a name of its own"));
            }
            let paths = link_paths(&spec.path, link_seed(seed, k), dir).map_err(|e| format!("link {name}: {e}"))?;
            links.push(Link { name: name.to_string(), paths });
        }
        let index = |name: &str| links.iter().position(|l| l.name == name.trim());
        let known = || links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ");
        if self.routes.is_empty() {
            return Err("no routes: give routes = [[\"link\", ...], ...], one per flow, flow 0's first".into());
        }
        let mut routes = Vec::with_capacity(self.routes.len());
        for (flow, names) in self.routes.iter().enumerate() {
            if names.is_empty() {
                return Err(format!("the route of flow {flow} is empty: name the links its data crosses"));
            }
            let mut route: Vec<usize> = Vec::with_capacity(names.len());
            for name in names {
                let Some(k) = index(name) else {
                    return Err(format!("the route of flow {flow}: no link named '{name}' (the links: {})", known()));
                };
                if route.contains(&k) {
                    return Err(format!("the route of flow {flow} crosses link '{name}' twice"));
                }
                route.push(k);
            }
            routes.push(route);
        }
        let log_link = match &self.log_link {
            None => 0,
            Some(name) => {
                index(name).ok_or_else(|| format!("log_link: no link named '{name}' (the links: {})", known()))?
            }
        };
        Ok(Topology { links, routes, log_link })
    }
}

/// A link's path options validated as the emulator's, seeded with `seed`.
fn link_paths(words: &[String], seed: u64, dir: Option<&Path>) -> Result<PathPair, String> {
    let mut words = words.to_vec();
    for i in 0..words.len() {
        let word = words[i].trim();
        if word == "--seed" || word.starts_with("--seed=") {
            return Err("--seed is the run's (pantheon-sim run --seed N), not a link's".into());
        }
        let Some(dir) = dir else { continue };
        // A trace named after --uplink-trace / --downlink-trace, or as --uplink-trace=FILE.
        let (option, file) = match word.split_once('=') {
            Some((option, file)) if option.ends_with("-trace") => (Some(option.to_string()), file.to_string()),
            _ if i > 0 && words[i - 1].trim().ends_with("-trace") && !word.starts_with("--") => {
                (None, word.to_string())
            }
            _ => continue,
        };
        let file = PathBuf::from(file);
        if file.is_relative() {
            let resolved = dir.join(&file).display().to_string();
            words[i] = match option {
                Some(option) => format!("{option}={resolved}"),
                None => resolved,
            };
        }
    }
    let mut paths = PathArgs::validate_words(&words)?;
    paths.seed = seed;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARKING_LOT: &str = r#"
        routes = [["hop1", "hop2"], ["hop1"], ["hop2"]]
        log_link = "hop2"

        [[link]]
        name = "hop1"
        path = ["--delay", "10", "--uplink-rate", "12", "--uplink-queue-bytes", "60000"]

        [[link]]
        name = "hop2"
        path = ["--delay", "5", "--uplink-rate", "6", "--uplink-queue-bytes", "30000"]
    "#;

    fn built(text: &str) -> Result<Topology, String> {
        TopologySpec::parse_toml(text)?.build(7, None)
    }

    #[test]
    fn a_parking_lot_reads_into_links_and_routes() {
        let t = built(PARKING_LOT).unwrap();
        assert_eq!(t.links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["hop1", "hop2"]);
        assert_eq!(t.routes, [vec![0, 1], vec![0], vec![1]]);
        assert_eq!((t.log_link, t.logged().name.as_str()), (1, "hop2"));
        assert_eq!((t.links[0].paths.uplink.delay_us, t.links[1].paths.uplink.delay_us), (10_000, 5_000));
        // Link 0 has the run's seed, as a run without a topology; link 1 another.
        assert_eq!((t.seed(), t.links[1].paths.seed), (7, link_seed(7, 1)));
        assert_ne!(link_seed(7, 1), 7);
    }

    #[test]
    fn a_one_link_file_is_the_single_path() {
        let text = r#"
            routes = [["path"], ["path"]]
            [[link]]
            name = "path"
            path = ["--delay", "20", "--uplink-queue-bytes", "60000"]
        "#;
        let words: Vec<String> =
            ["--delay", "20", "--uplink-queue-bytes", "60000", "--seed", "7"].map(String::from).to_vec();
        let single = Topology::single(PathArgs::validate_words(&words).unwrap(), 2);
        assert_eq!(built(text).unwrap(), single);
    }

    #[test]
    fn mistakes_are_one_line_naming_the_place() {
        let e = built(&PARKING_LOT.replace("[\"hop1\"], [\"hop2\"]]", "[\"hop3\"]]")).unwrap_err();
        assert_eq!(e, "the route of flow 1: no link named 'hop3' (the links: hop1, hop2)");
        let e = built(&PARKING_LOT.replace("\"6\"", "\"0\"")).unwrap_err();
        assert_eq!(e, "link hop2: --uplink-rate: rate must be positive, got '0'");
        let e = built(&PARKING_LOT.replace("[\"hop1\", \"hop2\"]", "[\"hop1\", \"hop1\"]")).unwrap_err();
        assert_eq!(e, "the route of flow 0 crosses link 'hop1' twice");
        let e = built(&PARKING_LOT.replace("name = \"hop2\"", "name = \"hop1\"")).unwrap_err();
        assert_eq!(e, "two links are named 'hop1': each link needs a name of its own");
        let e = built(&PARKING_LOT.replace("\"--delay\", \"5\"", "\"--seed\", \"5\"")).unwrap_err();
        assert_eq!(e, "link hop2: --seed is the run's (pantheon-sim run --seed N), not a link's");
        let e = built(&PARKING_LOT.replace("log_link", "log_links")).unwrap_err();
        assert!(e.starts_with("line 3: unknown field `log_links`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = built(&PARKING_LOT.replace("log_link = \"hop2\"", "log_link = \"hop9\"")).unwrap_err();
        assert_eq!(e, "log_link: no link named 'hop9' (the links: hop1, hop2)");
    }

    #[test]
    fn traces_are_found_beside_the_file() {
        let dir = std::env::temp_dir().join(format!("pantheon-topology-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("steps.trace"), "1\n1\n2\n").unwrap();
        let text = r#"
            routes = [["a", "b"]]
            [[link]]
            name = "a"
            path = ["--uplink-trace", "steps.trace"]
            [[link]]
            name = "b"
            path = ["--downlink-trace=steps.trace"]
        "#;
        std::fs::write(dir.join("t.toml"), text).unwrap();
        let t = Topology::read(&dir.join("t.toml"), 0).unwrap();
        let rate = |c: &pantheon_link::PathConfig| c.delivery.mean_rate_mbps().unwrap();
        // Three 1500-byte opportunities every 2 ms: 18 Mbit/s.
        assert!((rate(&t.links[0].paths.uplink) - 18.0).abs() < 1e-9);
        assert!((rate(&t.links[1].paths.downlink) - 18.0).abs() < 1e-9);
        let e = TopologySpec::parse_toml(text).unwrap().build(0, None).unwrap_err();
        assert!(e.starts_with("link a: --uplink-trace steps.trace: cannot read the trace"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
