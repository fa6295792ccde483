//! A RemyCC's rule tree (Winstein & Balakrishnan, SIGCOMM 2013, §4.3 "rule table"; the remy
//! project's `WhiskerTree`): a box over the memory space, cut into smaller boxes, each leaf box
//! holding one rule (the original's "whisker"): the action of every acknowledgement whose memory
//! falls in it.
//!
//! - Boxes are half-open on every axis, as the original's `MemoryRange::contains`: a memory `m`
//!   is in `[lower, upper)` when `lower[i] <= m[i] < upper[i]` for each axis `i`.
//! - A node's children tile its box: every point of the parent is in exactly one child, and no
//!   child reaches outside it (checked when a tree is built, `Tree::new`). A child may be empty
//!   (zero width on an axis): the original's median split makes one when the median equals the
//!   box's lower bound, and it is kept, never matched.
//! - THE rule numbering: rules are numbered from 0 in depth-first order, children in file order
//!   (`Tree::rules`). Training records (`RuleTally`), `pantheon-sim tree show`, the JSON form and
//!   the Python optimiser all index rules this way.
//! - Lookup (`Tree::rule_index`) clamps the memory into the root's box first, so every memory
//!   finds a rule; the original exits with "No whisker found" instead (deviation 3 of mod.rs).

use std::fmt;

/// The memory's axes, in the schema's order (dna.proto's `Memory` fields 21–24).
pub const AXES: usize = 4;
/// The axes' names, as the schema names them; every memory is `[f64; AXES]` in this order.
pub const AXIS_NAMES: [&str; AXES] = ["rec_send_ewma", "rec_rec_ewma", "rtt_ratio", "slow_rec_rec_ewma"];
/// The top of the memory space: the original's `MAX_MEMORY` (163840 on every axis), the upper
/// bound of a root box and of a bound a file leaves out. Bounds are finite; there is no infinity.
pub const MEMORY_MAX: f64 = 163_840.0;
/// Deepest nesting a tree may have (a file that nests deeper is refused before recursion could
/// exhaust the stack; the original's trees are a few levels deep).
pub const MAX_DEPTH: usize = 64;
/// Most grid cells the tiling check of one node may visit (the product over axes of the distinct
/// boundaries of its children); a median split on four axes makes 16.
const MAX_TILING_CELLS: usize = 1 << 20;

/// A memory: `[rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma]` (`AXIS_NAMES`).
pub type Memory = [f64; AXES];

/// A box of the memory space, `[lower, upper)` on every axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Domain {
    pub lower: Memory,
    pub upper: Memory,
}

impl Domain {
    /// The whole memory space, `[0, MEMORY_MAX)` on every axis (the original's default root).
    pub const FULL: Domain = Domain { lower: [0.0; AXES], upper: [MEMORY_MAX; AXES] };

    pub fn contains(&self, m: &Memory) -> bool {
        (0..AXES).all(|i| self.lower[i] <= m[i] && m[i] < self.upper[i])
    }

    /// Zero width on some axis: contains nothing.
    pub fn is_empty(&self) -> bool {
        (0..AXES).any(|i| self.lower[i] >= self.upper[i])
    }

    fn within(&self, outer: &Domain) -> bool {
        (0..AXES).all(|i| outer.lower[i] <= self.lower[i] && self.upper[i] <= outer.upper[i])
    }

    /// `m` moved to the nearest point of the box (which must not be empty).
    fn clamp(&self, m: &Memory) -> Memory {
        let mut out = *m;
        for i in 0..AXES {
            out[i] = if m[i].is_nan() || m[i] < self.lower[i] {
                self.lower[i]
            } else if m[i] >= self.upper[i] {
                self.upper[i].next_down()
            } else {
                m[i]
            };
        }
        out
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in AXIS_NAMES.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}=[{}, {})", self.lower[i], self.upper[i])?;
        }
        Ok(())
    }
}

/// A rule's action (the original's `Whisker`): on each acknowledgement whose memory is in the
/// rule's box, `cwnd = window_multiple * cwnd + window_increment` packets, and at most one packet
/// every `intersend_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Packets added to the scaled window (the schema's `sint32 window_increment`).
    pub window_increment: i32,
    /// The window's scale (the schema's `window_multiple`).
    pub window_multiple: f64,
    /// Least time between two sends, ms (the schema's `intersend`; 0: no pacing).
    pub intersend_ms: f64,
    /// The optimiser round that last changed the rule (the original's `Action::_generation`,
    /// which its files do not carry; tree_file.rs stores it in a field of Pantheon's own).
    pub generation: u32,
}

/// A node: a box and either one rule (a leaf) or the children that tile it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub domain: Domain,
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Leaf(Rule),
    Children(Vec<Node>),
}

/// What a file carries besides the rules, kept so that a tree read and written again keeps it:
/// each the payload (the serialized message) of the root's field of that name in dna.proto,
/// checked to be well-formed protobuf but not interpreted by the controller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// `ConfigRange config = 4`: the network configurations the tree was trained for.
    pub config: Option<Vec<u8>>,
    /// `OptimizationSettings optimizer = 5`: the optimiser's step sizes and bounds.
    pub optimizer: Option<Vec<u8>>,
    /// `ConfigVector configvector = 6`: the configurations actually drawn.
    pub configvector: Option<Vec<u8>>,
}

/// A tree that cannot be used, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeError(pub String);

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TreeError {}

/// One node of the flattened tree the lookup walks.
#[derive(Debug, Clone, PartialEq)]
struct Flat {
    domain: Domain,
    /// Leaf: the rule's number. Otherwise: the children's positions in `Tree::flat`.
    kind: FlatKind,
}

#[derive(Debug, Clone, PartialEq)]
enum FlatKind {
    Leaf(usize),
    Children(std::ops::Range<usize>),
}

/// A checked rule tree, ready for lookups.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    root: Node,
    extras: Extras,
    /// Every node, root first, each node's children in contiguous places.
    flat: Vec<Flat>,
    /// The rules in THE numbering, with their boxes.
    rules: Vec<(Domain, Rule)>,
}

impl Tree {
    /// Checks `root` — finite numbers, `lower <= upper`, a root box not empty, children tiling
    /// their parent, at least one child per inner node, `intersend_ms >= 0`, depth at most
    /// `MAX_DEPTH` — and prepares lookups. Errors name the node by its path of child indices from
    /// the root (`root.2.0`).
    pub fn new(root: Node, extras: Extras) -> Result<Tree, TreeError> {
        check(&root, "root", 0)?;
        if root.domain.is_empty() {
            return Err(TreeError(format!("root: the box is empty ({})", root.domain)));
        }
        let mut rules = Vec::new();
        collect_rules(&root, &mut rules);
        let mut flat = vec![Flat { domain: root.domain, kind: FlatKind::Leaf(0) }];
        flatten(&root, 0, &mut flat, &mut 0);
        Ok(Tree { root, extras, flat, rules })
    }

    /// A tree of one rule over the whole memory space.
    ///
    /// # Panics
    /// When the rule's numbers are not finite or `intersend_ms` is negative (`Tree::new`'s checks).
    pub fn single(rule: Rule) -> Tree {
        Tree::new(Node { domain: Domain::FULL, body: Body::Leaf(rule) }, Extras::default())
            .expect("one finite rule over the full space is a tree")
    }

    pub fn root(&self) -> &Node {
        &self.root
    }

    pub fn extras(&self) -> &Extras {
        &self.extras
    }

    /// The rules with their boxes, in THE numbering (depth-first, children in file order).
    pub fn rules(&self) -> &[(Domain, Rule)] {
        &self.rules
    }

    /// The number of the rule whose box holds `memory` (clamped into the root's box first).
    pub fn rule_index(&self, memory: &Memory) -> usize {
        let m = self.flat[0].domain.clamp(memory);
        let mut at = 0;
        loop {
            match &self.flat[at].kind {
                FlatKind::Leaf(rule) => return *rule,
                FlatKind::Children(range) => {
                    // The children tile the parent (checked), so exactly one holds `m`.
                    at = range.clone().find(|&c| self.flat[c].domain.contains(&m)).expect("children tile their parent");
                }
            }
        }
    }

    pub fn rule(&self, index: usize) -> &Rule {
        &self.rules[index].1
    }
}

/// Fills `flat[at]` for `node` and its subtree: a node's children take contiguous places, and
/// leaves are numbered as the recursion meets them, depth-first in file order (THE numbering).
fn flatten(node: &Node, at: usize, flat: &mut Vec<Flat>, next_rule: &mut usize) {
    match &node.body {
        Body::Leaf(_) => {
            flat[at].kind = FlatKind::Leaf(*next_rule);
            *next_rule += 1;
        }
        Body::Children(children) => {
            let start = flat.len();
            flat.extend(children.iter().map(|c| Flat { domain: c.domain, kind: FlatKind::Leaf(0) }));
            flat[at].kind = FlatKind::Children(start..flat.len());
            for (offset, child) in children.iter().enumerate() {
                flatten(child, start + offset, flat, next_rule);
            }
        }
    }
}

fn collect_rules(node: &Node, out: &mut Vec<(Domain, Rule)>) {
    match &node.body {
        Body::Leaf(rule) => out.push((node.domain, *rule)),
        Body::Children(children) => children.iter().for_each(|c| collect_rules(c, out)),
    }
}

fn check(node: &Node, at: &str, depth: usize) -> Result<(), TreeError> {
    let err = |what: String| Err(TreeError(format!("{at}: {what}")));
    if depth > MAX_DEPTH {
        return err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let d = &node.domain;
    for (i, name) in AXIS_NAMES.iter().enumerate() {
        let (lo, hi) = (d.lower[i], d.upper[i]);
        if !lo.is_finite() || !hi.is_finite() {
            return err(format!("{name} bounds must be finite, got [{lo}, {hi})"));
        }
        if lo > hi {
            return err(format!("{name} lower bound {lo} is above the upper bound {hi}"));
        }
    }
    match &node.body {
        Body::Leaf(rule) => {
            if !rule.window_multiple.is_finite() {
                return err(format!("window_multiple must be finite, got {}", rule.window_multiple));
            }
            if !(rule.intersend_ms.is_finite() && rule.intersend_ms >= 0.0) {
                return err(format!("intersend must be a finite number of ms >= 0, got {}", rule.intersend_ms));
            }
            Ok(())
        }
        Body::Children(children) if children.is_empty() => err("a node needs a rule or children, has neither".into()),
        Body::Children(children) => {
            for (i, child) in children.iter().enumerate() {
                let child_at = format!("{at}.{i}");
                check(child, &child_at, depth + 1)?;
                if !child.domain.within(d) {
                    return Err(TreeError(format!(
                        "{child_at}: the box ({}) reaches outside its parent's ({d})",
                        child.domain
                    )));
                }
            }
            check_tiling(d, children)
                .map_err(|what| TreeError(format!("{at}: the children do not tile the box: {what}")))
        }
    }
}

/// Every point of `parent` in exactly one child (the children are inside it, checked before):
/// the children's bounds cut the parent into grid cells, each of which lies wholly inside or
/// wholly outside each child, so checking each cell's lower corner is exact.
fn check_tiling(parent: &Domain, children: &[Node]) -> Result<(), String> {
    if parent.is_empty() {
        return Ok(());
    }
    let mut cuts: [Vec<f64>; AXES] = Default::default();
    for (i, axis) in cuts.iter_mut().enumerate() {
        axis.push(parent.lower[i]);
        axis.push(parent.upper[i]);
        axis.extend(children.iter().flat_map(|c| [c.domain.lower[i], c.domain.upper[i]]));
        axis.sort_by(f64::total_cmp);
        axis.dedup();
    }
    let cells: usize = cuts.iter().map(|a| a.len() - 1).product();
    if cells > MAX_TILING_CELLS {
        return Err(format!("{} children cut it into more than {MAX_TILING_CELLS} cells to check", children.len()));
    }
    let mut index = [0usize; AXES];
    for _ in 0..cells {
        let corner: Memory = std::array::from_fn(|i| cuts[i][index[i]]);
        let holders: Vec<usize> = (0..children.len()).filter(|&c| children[c].domain.contains(&corner)).collect();
        match holders.as_slice() {
            [_] => {}
            [] => return Err(format!("no child holds the point {}", point(&corner))),
            [a, b, ..] => return Err(format!("children {a} and {b} overlap at {}", point(&corner))),
        }
        for i in 0..AXES {
            index[i] += 1;
            if index[i] < cuts[i].len() - 1 {
                break;
            }
            index[i] = 0;
        }
    }
    Ok(())
}

fn point(m: &Memory) -> String {
    let parts: Vec<String> = (0..AXES).map(|i| format!("{}={}", AXIS_NAMES[i], m[i])).collect();
    parts.join(" ")
}
