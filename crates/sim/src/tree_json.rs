//! Tao's rule tree as JSON (`pantheon-sim tree json|write`, issue 37): the form the Python
//! optimiser (python/pantheon/remy) reads and writes, mirroring the file's `WhiskerTree`
//! (crates/cc/src/tao/tree_file.rs) field for field. A node is
//!
//! ```text
//! {"domain": {"lower": [4 numbers], "upper": [4 numbers]}, "children": [node, ...]}
//! {"domain": {...}, "leaf": {"window_increment": int, "window_multiple": number,
//!                            "intersend_ms": number, "generation": int}}
//! ```
//!
//! the top-level object is the root node, plus, when the file has them, `"config"`,
//! `"optimizer"` and `"configvector"`: dna.proto's `ConfigRange`, `OptimizationSettings` and
//! `ConfigVector` as objects keyed by the schema's field names (the tables below), passed through
//! (a field the schema does not have is left out of the JSON; the file keeps it).
//! Memories are `[rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma]`; bounds are finite
//! (163840, `MEMORY_MAX`, is the top of the space, as in the original; JSON has no infinity).
//! `generation` may be left out (0). Any other key, a missing one, a wrong type or a tree that
//! fails `Tree::new`'s checks is a one-line error.

use pantheon_cc::tao::tree_file::wire::{self, Reader, Value as Wire, Writer};
use pantheon_cc::tao::{Body, Domain, Extras, Node, Rule, Tree, AXES, MAX_DEPTH};
use serde_json::{json, Map, Value};

/// The tree as JSON.
pub fn to_json(tree: &Tree) -> Value {
    let mut root = node_json(tree.root());
    let object = root.as_object_mut().expect("a node is an object");
    let extras = tree.extras();
    for (name, payload, fields) in [
        ("config", &extras.config, CONFIG_RANGE),
        ("optimizer", &extras.optimizer, OPTIMIZATION_SETTINGS),
        ("configvector", &extras.configvector, CONFIG_VECTOR),
    ] {
        if let Some(payload) = payload {
            // Checked well-formed when read; a field of the wrong type is left out.
            object.insert(name.to_string(), Value::Object(decode(payload, fields)));
        }
    }
    root
}

/// A tree from JSON, checked.
pub fn from_json(value: &Value) -> Result<Tree, String> {
    let mut extras = Extras::default();
    let root = node(value, "root", 0, Some(&mut extras))?;
    Tree::new(root, extras).map_err(|e| e.0)
}

fn node_json(node: &Node) -> Value {
    let domain = json!({"lower": node.domain.lower, "upper": node.domain.upper});
    match &node.body {
        Body::Leaf(rule) => json!({
            "domain": domain,
            "leaf": {
                "window_increment": rule.window_increment,
                "window_multiple": rule.window_multiple,
                "intersend_ms": rule.intersend_ms,
                "generation": rule.generation,
            },
        }),
        Body::Children(children) => {
            json!({"domain": domain, "children": children.iter().map(node_json).collect::<Vec<_>>()})
        }
    }
}

fn object<'a>(value: &'a Value, at: &str, keys: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let map = value.as_object().ok_or_else(|| format!("{at}: expected an object, got {}", kind(value)))?;
    if let Some(extra) = map.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!("{at}: unknown key '{extra}' (known: {})", keys.join(", ")));
    }
    Ok(map)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn node(value: &Value, at: &str, depth: usize, extras: Option<&mut Extras>) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!("{at}: nested deeper than {MAX_DEPTH} levels"));
    }
    let keys: &[&str] = if extras.is_some() {
        &["domain", "children", "leaf", "config", "optimizer", "configvector"]
    } else {
        &["domain", "children", "leaf"]
    };
    let map = object(value, at, keys)?;
    let domain = map.get("domain").ok_or_else(|| format!("{at}: no \"domain\""))?;
    let domain = domain_of(domain, &format!("{at}.domain"))?;
    let body = match (map.get("leaf"), map.get("children")) {
        (Some(_), Some(_)) => return Err(format!("{at}: has both \"leaf\" and \"children\"")),
        (None, None) => return Err(format!("{at}: needs \"leaf\" or \"children\"")),
        (Some(leaf), None) => Body::Leaf(rule(leaf, &format!("{at}.leaf"))?),
        (None, Some(children)) => {
            let list = children.as_array().ok_or_else(|| format!("{at}.children: expected an array"))?;
            let nodes = list
                .iter()
                .enumerate()
                .map(|(i, child)| node(child, &format!("{at}.{i}"), depth + 1, None))
                .collect::<Result<Vec<_>, _>>()?;
            Body::Children(nodes)
        }
    };
    if let Some(extras) = extras {
        for (name, fields) in
            [("config", CONFIG_RANGE), ("optimizer", OPTIMIZATION_SETTINGS), ("configvector", CONFIG_VECTOR)]
        {
            if let Some(value) = map.get(name) {
                let payload = encode(value, fields, name)?;
                match name {
                    "config" => extras.config = Some(payload),
                    "optimizer" => extras.optimizer = Some(payload),
                    _ => extras.configvector = Some(payload),
                }
            }
        }
    }
    Ok(Node { domain, body })
}

fn domain_of(value: &Value, at: &str) -> Result<Domain, String> {
    let map = object(value, at, &["lower", "upper"])?;
    let bound = |name: &str| -> Result<[f64; AXES], String> {
        let list = map.get(name).and_then(Value::as_array).ok_or_else(|| format!("{at}: \"{name}\" must be a list"))?;
        let numbers: Vec<f64> = list.iter().filter_map(Value::as_f64).collect();
        <[f64; AXES]>::try_from(numbers)
            .ok()
            .filter(|_| list.len() == AXES)
            .ok_or_else(|| format!("{at}.{name}: expected {AXES} numbers, got {}", Value::Array(list.clone())))
    };
    Ok(Domain { lower: bound("lower")?, upper: bound("upper")? })
}

fn rule(value: &Value, at: &str) -> Result<Rule, String> {
    let map = object(value, at, &["window_increment", "window_multiple", "intersend_ms", "generation"])?;
    let number =
        |name: &str| map.get(name).and_then(Value::as_f64).ok_or_else(|| format!("{at}: \"{name}\" must be a number"));
    let integer = |name: &str, default: Option<i64>| match map.get(name) {
        None => default.ok_or_else(|| format!("{at}: no \"{name}\"")),
        Some(v) => v.as_i64().ok_or_else(|| format!("{at}: \"{name}\" must be a whole number, got {v}")),
    };
    let window_increment = integer("window_increment", None)?;
    let generation = integer("generation", Some(0))?;
    Ok(Rule {
        window_increment: i32::try_from(window_increment)
            .map_err(|_| format!("{at}: window_increment must fit 32 bits (sint32), got {window_increment}"))?,
        window_multiple: number("window_multiple")?,
        intersend_ms: number("intersend_ms")?,
        generation: u32::try_from(generation)
            .map_err(|_| format!("{at}: generation must be from 0 to {}, got {generation}", u32::MAX))?,
    })
}

/// A field of the schema's messages that a tree carries besides its rules.
struct Field {
    number: u32,
    name: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Double,
    UInt32,
    Message(&'static [Field]),
    Repeated(&'static [Field]),
}

const fn f(number: u32, name: &'static str, kind: Kind) -> Field {
    Field { number, name, kind }
}

/// dna.proto's `Range`.
const RANGE: &[Field] = &[f(61, "low", Kind::Double), f(62, "high", Kind::Double), f(63, "incr", Kind::Double)];
/// dna.proto's `ConfigRange` (the root's `config`).
const CONFIG_RANGE: &[Field] = &[
    f(71, "link_packets_per_ms", Kind::Message(RANGE)),
    f(72, "rtt", Kind::Message(RANGE)),
    f(73, "num_senders", Kind::Message(RANGE)),
    f(74, "buffer_size", Kind::Message(RANGE)),
    f(75, "mean_off_duration", Kind::Message(RANGE)),
    f(76, "mean_on_duration", Kind::Message(RANGE)),
    f(77, "simulation_ticks", Kind::UInt32),
    f(78, "stochastic_loss_rate", Kind::Message(RANGE)),
];
/// dna.proto's `OptimizationSetting`.
const OPTIMIZATION_SETTING: &[Field] = &[
    f(41, "min_value", Kind::Double),
    f(42, "max_value", Kind::Double),
    f(43, "min_change", Kind::Double),
    f(44, "max_change", Kind::Double),
    f(45, "multiplier", Kind::Double),
    f(46, "default_value", Kind::Double),
];
/// dna.proto's `OptimizationSettings` (the root's `optimizer`).
const OPTIMIZATION_SETTINGS: &[Field] = &[
    f(51, "window_increment", Kind::Message(OPTIMIZATION_SETTING)),
    f(52, "window_multiple", Kind::Message(OPTIMIZATION_SETTING)),
    f(53, "intersend", Kind::Message(OPTIMIZATION_SETTING)),
    f(54, "lambda", Kind::Message(OPTIMIZATION_SETTING)),
];
/// dna.proto's `NetConfig`.
const NET_CONFIG: &[Field] = &[
    f(1, "mean_on_duration", Kind::Double),
    f(2, "mean_off_duration", Kind::Double),
    f(3, "num_senders", Kind::UInt32),
    f(4, "link_ppt", Kind::Double),
    f(5, "delay", Kind::Double),
    f(6, "buffer_size", Kind::UInt32),
    f(7, "stochastic_loss_rate", Kind::Double),
];
/// dna.proto's `ConfigVector` (the root's `configvector`).
const CONFIG_VECTOR: &[Field] = &[f(81, "config", Kind::Repeated(NET_CONFIG))];

/// A message's known fields as JSON (unknown fields and fields of the wrong wire type are left
/// out: the message was checked well-formed when the file was read).
fn decode(bytes: &[u8], fields: &[Field]) -> Map<String, Value> {
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while let Ok(Some((number, value))) = reader.next_field() {
        let Some(field) = fields.iter().find(|f| f.number == number) else { continue };
        let json = match (field.kind, value) {
            (Kind::Double, Wire::Fixed64(bits)) => json!(f64::from_bits(bits)),
            (Kind::UInt32, Wire::Varint(v)) => json!(v),
            (Kind::Message(inner), Wire::Bytes(b)) => Value::Object(decode(b, inner)),
            (Kind::Repeated(inner), Wire::Bytes(b)) => {
                let list = out.entry(field.name).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.push(Value::Object(decode(b, inner)));
                }
                continue;
            }
            _ => continue,
        };
        out.insert(field.name.to_string(), json);
    }
    out
}

/// JSON back to a message's bytes, fields in number order.
fn encode(value: &Value, fields: &[Field], at: &str) -> Result<Vec<u8>, String> {
    let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
    let map = object(value, at, &names)?;
    let mut w = Writer::default();
    for field in fields {
        let Some(v) = map.get(field.name) else { continue };
        let here = format!("{at}.{}", field.name);
        match field.kind {
            Kind::Double => w.double(field.number, v.as_f64().ok_or_else(|| format!("{here}: expected a number"))?),
            Kind::UInt32 => {
                let n = v.as_u64().filter(|&n| n <= u64::from(u32::MAX));
                w.varint(
                    field.number,
                    n.ok_or_else(|| format!("{here}: expected a whole number from 0 to {}", u32::MAX))?,
                )
            }
            Kind::Message(inner) => w.bytes(field.number, &encode(v, inner, &here)?),
            Kind::Repeated(inner) => {
                let items = v.as_array().ok_or_else(|| format!("{here}: expected a list"))?;
                for (i, item) in items.iter().enumerate() {
                    w.bytes(field.number, &encode(item, inner, &format!("{here}.{i}"))?);
                }
            }
        }
    }
    wire::check(&w.bytes).expect("the writer writes well-formed fields");
    Ok(w.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pantheon_cc::tao::MEMORY_MAX;

    fn two_rule_tree() -> Tree {
        let half = |lo: f64, hi: f64| {
            let mut d = Domain::FULL;
            d.lower[2] = lo;
            d.upper[2] = hi;
            d
        };
        let leaf = |d: Domain, b: i32| Node {
            domain: d,
            body: Body::Leaf(Rule { window_increment: b, window_multiple: 0.5, intersend_ms: 0.25, generation: 3 }),
        };
        let root = Node {
            domain: Domain::FULL,
            body: Body::Children(vec![leaf(half(0.0, 1.5), 4), leaf(half(1.5, MEMORY_MAX), -2)]),
        };
        let mut optimizer = Writer::default();
        let mut setting = Writer::default();
        setting.double(41, 0.0);
        setting.double(42, 256.0);
        optimizer.bytes(51, &setting.bytes);
        Tree::new(root, Extras { optimizer: Some(optimizer.bytes), ..Extras::default() }).unwrap()
    }

    #[test]
    fn json_mirrors_the_file_and_reads_back_identically() {
        let tree = two_rule_tree();
        let json = to_json(&tree);
        assert_eq!(json["children"][1]["leaf"]["window_increment"], -2);
        assert_eq!(json["children"][0]["domain"]["upper"], json!([MEMORY_MAX, MEMORY_MAX, 1.5, MEMORY_MAX]));
        assert_eq!(json["optimizer"], json!({"window_increment": {"min_value": 0.0, "max_value": 256.0}}));
        let back = from_json(&json).unwrap();
        assert_eq!(back, tree);
        assert_eq!(back.to_bytes(), tree.to_bytes());
    }

    #[test]
    fn bad_json_is_one_line_naming_the_place() {
        let mut json = to_json(&two_rule_tree());
        json["children"][1]["domain"]["lower"][2] = json!(1.0);
        let e = from_json(&json).unwrap_err();
        assert_eq!(e, "root.0: the children do not tile the box: children 0 and 1 overlap at rec_send_ewma=0 rec_rec_ewma=0 rtt_ratio=1 slow_rec_rec_ewma=0".replace("root.0", "root"));
        let mut json = to_json(&two_rule_tree());
        json["children"][0]["leaf"]["intersend"] = json!(1.0);
        assert!(from_json(&json).unwrap_err().starts_with("root.0.leaf: unknown key 'intersend'"));
        let mut json = to_json(&two_rule_tree());
        json["children"][0]["domain"]["upper"] = json!([1, 2, 3]);
        assert_eq!(from_json(&json).unwrap_err(), "root.0.domain.upper: expected 4 numbers, got [1,2,3]");
        assert_eq!(from_json(&json!([])).unwrap_err(), "root: expected an object, got an array");
        let mut json = to_json(&two_rule_tree());
        json["optimizer"]["window_increment"]["min_value"] = json!("zero");
        assert_eq!(from_json(&json).unwrap_err(), "optimizer.window_increment.min_value: expected a number");
    }
}
