//! The original's rule-tree file: one `WhiskerTree` message of the remy project's published
//! schema (github.com/tcpexmachina/remy, protobufs/dna.proto, package `RemyBuffers`), in protobuf's
//! binary wire format (protobuf.dev/programming-guides/encoding), nothing before or after it —
//! what remy writes with `SerializeToFileDescriptor` and its RemyCC files (`*.dna`) hold. Read and
//! written here by hand: the few messages below need a varint, a 64-bit double and a
//! length-delimited field, and a protobuf crate would bring a code generator (prost-build) or a
//! runtime schema for them.
//!
//! The messages and the fields this file reads (number, wire type; `L` length-delimited, `D` a
//! little-endian double, `V` a varint):
//!
//! | message        | fields                                                                          |
//! |----------------|---------------------------------------------------------------------------------|
//! | `WhiskerTree`  | domain 1 L (`MemoryRange`), children 2 L (repeated `WhiskerTree`), leaf 3 L (`Whisker`), config 4 L, optimizer 5 L, configvector 6 L |
//! | `MemoryRange`  | lower 11 L (`Memory`), upper 12 L (`Memory`), active_axis 13 V (repeated enum, packed or not) |
//! | `Memory`       | rec_send_ewma 21 D, rec_rec_ewma 22 D, rtt_ratio 23 D, slow_rec_rec_ewma 24 D (rtt_diff 25, queueing_delay 26: skipped) |
//! | `Whisker`      | window_increment 31 V (sint32, zigzag), window_multiple 32 D, intersend 33 D (ms), domain 34 L; Pantheon's generation 1000 V |
//!
//! - A bound a `Memory` leaves out is 0 below and `MEMORY_MAX` above (the original's "wildcard").
//! - `active_axis`, absent in the 2014 RemyCCs, means the four axes above; a file that lists
//!   others (later remy versions' rtt_diff, queueing_delay) or fewer is refused: this runtime
//!   keeps the 2014 memory only.
//! - `config`, `optimizer` and `configvector` of the root are kept as their payloads
//!   (`tree::Extras`, checked to be well-formed) and written back; the controller does not use them.
//! - `generation` is Pantheon's: the schema has no field for it (the original keeps it in memory
//!   only); field 1000 of `Whisker`, a number the schema does not use, which the original's
//!   parser keeps as an unknown field and ignores, so it reads Pantheon's files.
//! - Unknown fields are skipped by their wire type, as protobuf requires (groups too). A field
//!   the tree needs given twice, or with the wrong wire type, is an error, not merged.
//!
//! The writer writes fields in number order, every bound of every box (all four axes), a leaf's
//! box again as its `Whisker.domain` (the original's optimiser reads a rule's box from there),
//! and `generation` when it is not 0, so `Tree::from_bytes(&tree.to_bytes()) == tree`.

use std::path::Path;

use super::tree::{Body, Domain, Extras, Memory, Node, Rule, Tree, TreeError, AXES, AXIS_NAMES, MAX_DEPTH, MEMORY_MAX};

/// Pantheon's field of `Whisker` for `Rule::generation` (see the header).
pub const GENERATION_FIELD: u32 = 1000;

/// Protobuf's wire format: reading fields one by one, and writing them.
pub mod wire {
    /// A field's value as the wire gives it.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum Value<'a> {
        Varint(u64),
        Fixed64(u64),
        Bytes(&'a [u8]),
        Fixed32(u32),
        /// A group (wire types 3 and 4, deprecated), skipped whole.
        Group,
    }

    impl Value<'_> {
        /// The wire type's name, for errors.
        pub fn kind(&self) -> &'static str {
            match self {
                Value::Varint(_) => "varint",
                Value::Fixed64(_) => "64-bit",
                Value::Bytes(_) => "length-delimited",
                Value::Fixed32(_) => "32-bit",
                Value::Group => "group",
            }
        }
    }

    /// Groups nested deeper than this are refused (protobuf's own parsers stop at 100).
    const MAX_GROUP_DEPTH: usize = 64;

    /// The fields of one message, in order.
    pub struct Reader<'a> {
        bytes: &'a [u8],
        pos: usize,
    }

    impl<'a> Reader<'a> {
        pub fn new(bytes: &'a [u8]) -> Self {
            Reader { bytes, pos: 0 }
        }

        /// The next field (number, value), `None` at the message's end; errors are one line.
        pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, String> {
            if self.pos == self.bytes.len() {
                return Ok(None);
            }
            let (number, value) = self.field(0)?;
            match value {
                Some(value) => Ok(Some((number, value))),
                None => Err(format!("an end-group marker (field {number}) outside any group")),
            }
        }

        /// One field; `None` for an end-group marker.
        fn field(&mut self, depth: usize) -> Result<(u32, Option<Value<'a>>), String> {
            let tag = self.varint()?;
            let number = tag >> 3;
            if number == 0 || number > u64::from(u32::MAX >> 3) {
                return Err(format!("field number {number} is not a valid protobuf field number"));
            }
            let number = number as u32;
            let value = match tag & 7 {
                0 => Value::Varint(self.varint()?),
                1 => Value::Fixed64(u64::from_le_bytes(self.take(8, number)?.try_into().expect("8 bytes"))),
                2 => {
                    let len = self.varint()?;
                    let len = usize::try_from(len).map_err(|_| format!("field {number}: length {len} is too large"))?;
                    Value::Bytes(self.take(len, number)?)
                }
                3 => {
                    if depth >= MAX_GROUP_DEPTH {
                        return Err(format!("field {number}: groups nested deeper than {MAX_GROUP_DEPTH}"));
                    }
                    loop {
                        if self.pos == self.bytes.len() {
                            return Err(format!("truncated: group {number} has no end"));
                        }
                        match self.field(depth + 1)? {
                            (end, None) if end == number => break,
                            (end, None) => return Err(format!("group {number} ended by end-group {end}")),
                            _ => {}
                        }
                    }
                    Value::Group
                }
                4 => return Ok((number, None)),
                5 => Value::Fixed32(u32::from_le_bytes(self.take(4, number)?.try_into().expect("4 bytes"))),
                other => return Err(format!("field {number}: wire type {other} does not exist")),
            };
            Ok((number, Some(value)))
        }

        fn take(&mut self, len: usize, number: u32) -> Result<&'a [u8], String> {
            let end = self.pos.checked_add(len).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
                format!("truncated: field {number} needs {len} bytes, {} are left", self.bytes.len() - self.pos)
            })?;
            let out = &self.bytes[self.pos..end];
            self.pos = end;
            Ok(out)
        }

        fn varint(&mut self) -> Result<u64, String> {
            let mut value = 0u64;
            for i in 0..10 {
                let Some(&byte) = self.bytes.get(self.pos) else {
                    return Err("truncated: the data ends inside a varint".to_string());
                };
                self.pos += 1;
                if i == 9 && byte > 1 {
                    return Err("a varint longer than 64 bits".to_string());
                }
                value |= u64::from(byte & 0x7f) << (7 * i);
                if byte & 0x80 == 0 {
                    return Ok(value);
                }
            }
            Err("a varint longer than 10 bytes".to_string())
        }
    }

    /// The varints of a packed repeated field's payload, back to back.
    pub fn packed_varints(bytes: &[u8]) -> Result<Vec<u64>, String> {
        let mut reader = Reader::new(bytes);
        let mut out = Vec::new();
        while reader.pos < reader.bytes.len() {
            out.push(reader.varint()?);
        }
        Ok(out)
    }

    /// Checks that `bytes` is a well-formed sequence of fields (submessages are not looked into).
    pub fn check(bytes: &[u8]) -> Result<(), String> {
        let mut reader = Reader::new(bytes);
        while reader.next_field()?.is_some() {}
        Ok(())
    }

    /// A message being written.
    #[derive(Debug, Default)]
    pub struct Writer {
        pub bytes: Vec<u8>,
    }

    impl Writer {
        pub fn varint(&mut self, number: u32, value: u64) {
            self.tag(number, 0);
            self.raw_varint(value);
        }

        pub fn double(&mut self, number: u32, value: f64) {
            self.tag(number, 1);
            self.bytes.extend_from_slice(&value.to_le_bytes());
        }

        /// A `sint32` (zigzag: 0, -1, 1, -2, … become 0, 1, 2, 3, …).
        pub fn sint32(&mut self, number: u32, value: i32) {
            self.varint(number, u64::from(((value << 1) ^ (value >> 31)) as u32));
        }

        pub fn bytes(&mut self, number: u32, payload: &[u8]) {
            self.tag(number, 2);
            self.raw_varint(payload.len() as u64);
            self.bytes.extend_from_slice(payload);
        }

        fn tag(&mut self, number: u32, wire_type: u8) {
            self.raw_varint((u64::from(number) << 3) | u64::from(wire_type));
        }

        fn raw_varint(&mut self, mut value: u64) {
            while value >= 0x80 {
                self.bytes.push((value as u8) | 0x80);
                value >>= 7;
            }
            self.bytes.push(value as u8);
        }
    }

    /// A `sint32` from its zigzag varint; `None` when it does not fit 32 bits.
    pub fn sint32(value: u64) -> Option<i32> {
        let value = u32::try_from(value).ok()?;
        Some(((value >> 1) as i32) ^ -((value & 1) as i32))
    }
}

use wire::{Reader, Value, Writer};

impl Tree {
    /// Reads and checks a tree file; errors are one line starting with the path.
    pub fn load(path: &Path) -> Result<Tree, TreeError> {
        let bytes =
            std::fs::read(path).map_err(|e| TreeError(format!("tao tree {}: cannot read: {e}", path.display())))?;
        Tree::from_bytes(&bytes).map_err(|e| TreeError(format!("tao tree {}: {}", path.display(), e.0)))
    }

    /// Parses and checks the bytes of a tree file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tree, TreeError> {
        if bytes.is_empty() {
            return Err(TreeError("empty file (a RemyCC tree is a protobuf WhiskerTree message)".into()));
        }
        let (root, extras) = node(bytes, "root", 0).map_err(TreeError)?;
        Tree::new(root, extras)
    }

    /// The tree as a file's bytes (the header says what is written).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        write_node(&mut w, self.root());
        let extras = self.extras();
        for (number, payload) in [(4, &extras.config), (5, &extras.optimizer), (6, &extras.configvector)] {
            if let Some(payload) = payload {
                w.bytes(number, payload);
            }
        }
        w.bytes
    }
}

fn wrong_type(name: &str, number: u32, value: &Value, want: &str) -> String {
    format!("field {number} ({name}) is {}, the schema's is {want}", value.kind())
}

/// A `WhiskerTree` at `at` (the path of child indices, for errors), and its extras.
fn node(bytes: &[u8], at: &str, depth: usize) -> Result<(Node, Extras), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{at}: nested deeper than {MAX_DEPTH} levels"));
    }
    let mut reader = Reader::new(bytes);
    let (mut domain, mut rule, mut children, mut extras) = (None, None, Vec::new(), Extras::default());
    while let Some((number, value)) = reader.next_field().map_err(|e| format!("{at}: {e}"))? {
        match (number, value) {
            (1, Value::Bytes(b)) if domain.is_none() => {
                domain = Some(range(b).map_err(|e| format!("{at}: domain: {e}"))?)
            }
            (1, Value::Bytes(_)) => return Err(format!("{at}: domain given twice")),
            (2, Value::Bytes(b)) => {
                children.push(node(b, &format!("{at}.{}", children.len()), depth + 1)?.0);
            }
            (3, Value::Bytes(b)) if rule.is_none() => rule = Some(whisker(b).map_err(|e| format!("{at}: leaf: {e}"))?),
            (3, Value::Bytes(_)) => return Err(format!("{at}: leaf given twice")),
            (4..=6, Value::Bytes(b)) => {
                let name = ["config", "optimizer", "configvector"][number as usize - 4];
                wire::check(b).map_err(|e| format!("{at}: {name}: {e}"))?;
                let slot = match number {
                    4 => &mut extras.config,
                    5 => &mut extras.optimizer,
                    _ => &mut extras.configvector,
                };
                if slot.replace(b.to_vec()).is_some() {
                    return Err(format!("{at}: {name} given twice"));
                }
            }
            (1..=6, v) => {
                let name = ["domain", "children", "leaf", "config", "optimizer", "configvector"][number as usize - 1];
                return Err(format!("{at}: {}", wrong_type(name, number, &v, "length-delimited")));
            }
            _ => {}
        }
    }
    let domain = domain.unwrap_or(Domain::FULL);
    let body = match (rule, children.is_empty()) {
        (Some(_), false) => return Err(format!("{at}: has both a rule (leaf) and children")),
        (Some((rule, own)), true) => {
            if own.is_some_and(|own| own != domain) {
                return Err(format!("{at}: the rule's own box (Whisker.domain) differs from its node's"));
            }
            Body::Leaf(rule)
        }
        (None, false) => Body::Children(children),
        (None, true) => {
            return Err(format!(
                "{at}: neither a rule (field 3, leaf) nor children (field 2): not a RemyCC WhiskerTree"
            ))
        }
    };
    Ok((Node { domain, body }, extras))
}

/// A `MemoryRange`.
fn range(bytes: &[u8]) -> Result<Domain, String> {
    let mut reader = Reader::new(bytes);
    let (mut lower, mut upper) = (None, None);
    let mut axes: Vec<u64> = Vec::new();
    while let Some((number, value)) = reader.next_field()? {
        match (number, value) {
            (11, Value::Bytes(b)) if lower.is_none() => {
                lower = Some(memory(b, 0.0).map_err(|e| format!("lower: {e}"))?)
            }
            (12, Value::Bytes(b)) if upper.is_none() => {
                upper = Some(memory(b, MEMORY_MAX).map_err(|e| format!("upper: {e}"))?)
            }
            (11 | 12, Value::Bytes(_)) => return Err(format!("field {number} given twice")),
            (13, Value::Varint(axis)) => axes.push(axis),
            (13, Value::Bytes(packed)) => {
                axes.extend(wire::packed_varints(packed).map_err(|e| format!("active_axis: {e}"))?)
            }
            (11..=13, v) => {
                let want = if number == 13 { "varint" } else { "length-delimited" };
                let name = if number == 13 {
                    "active_axis"
                } else if number == 11 {
                    "lower"
                } else {
                    "upper"
                };
                return Err(wrong_type(name, number, &v, want));
            }
            _ => {}
        }
    }
    if !axes.is_empty() {
        let mut sorted = axes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted != [0, 1, 2, 3] {
            return Err(format!(
                "active_axis lists {axes:?}: only the 2014 RemyCCs' memory is supported, all of axes 0-3 \
                 (rec_send_ewma, rec_rec_ewma, rtt_ratio, slow_rec_rec_ewma) and no other"
            ));
        }
    }
    Ok(Domain { lower: lower.unwrap_or([0.0; AXES]), upper: upper.unwrap_or([MEMORY_MAX; AXES]) })
}

/// A `Memory`, each axis it leaves out `missing`.
fn memory(bytes: &[u8], missing: f64) -> Result<Memory, String> {
    let mut out = [missing; AXES];
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        match (number, value) {
            (21..=24, Value::Fixed64(bits)) => out[number as usize - 21] = f64::from_bits(bits),
            (21..=24, v) => {
                return Err(wrong_type(AXIS_NAMES[number as usize - 21], number, &v, "a 64-bit double"));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A `Whisker`: its rule and its own box, if it gives one.
fn whisker(bytes: &[u8]) -> Result<(Rule, Option<Domain>), String> {
    let mut rule = Rule { window_increment: 0, window_multiple: 0.0, intersend_ms: 0.0, generation: 0 };
    let mut domain = None;
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        match (number, value) {
            (31, Value::Varint(v)) => {
                rule.window_increment =
                    wire::sint32(v).ok_or_else(|| format!("window_increment: {v} is not a zigzag sint32"))?
            }
            (32, Value::Fixed64(bits)) => rule.window_multiple = f64::from_bits(bits),
            (33, Value::Fixed64(bits)) => rule.intersend_ms = f64::from_bits(bits),
            (34, Value::Bytes(b)) => domain = Some(range(b).map_err(|e| format!("domain: {e}"))?),
            (GENERATION_FIELD, Value::Varint(v)) => {
                rule.generation = u32::try_from(v).map_err(|_| format!("generation {v} is past 32 bits"))?
            }
            (31..=34 | GENERATION_FIELD, v) => {
                let (name, want) = match number {
                    31 => ("window_increment", "varint"),
                    32 => ("window_multiple", "a 64-bit double"),
                    33 => ("intersend", "a 64-bit double"),
                    34 => ("domain", "length-delimited"),
                    _ => ("generation", "varint"),
                };
                return Err(wrong_type(name, number, &v, want));
            }
            _ => {}
        }
    }
    Ok((rule, domain))
}

fn write_node(w: &mut Writer, node: &Node) {
    w.bytes(1, &range_bytes(&node.domain));
    match &node.body {
        Body::Children(children) => {
            for child in children {
                let mut c = Writer::default();
                write_node(&mut c, child);
                w.bytes(2, &c.bytes);
            }
        }
        Body::Leaf(rule) => {
            let mut l = Writer::default();
            l.sint32(31, rule.window_increment);
            l.double(32, rule.window_multiple);
            l.double(33, rule.intersend_ms);
            l.bytes(34, &range_bytes(&node.domain));
            if rule.generation != 0 {
                l.varint(GENERATION_FIELD, u64::from(rule.generation));
            }
            w.bytes(3, &l.bytes);
        }
    }
}

fn range_bytes(domain: &Domain) -> Vec<u8> {
    let mut w = Writer::default();
    for (number, bound) in [(11, &domain.lower), (12, &domain.upper)] {
        let mut m = Writer::default();
        for (i, &value) in bound.iter().enumerate() {
            m.double(21 + i as u32, value);
        }
        w.bytes(number, &m.bytes);
    }
    w.bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tao_fixture;

    fn fixture_bytes() -> Vec<u8> {
        std::fs::read(tao_fixture()).unwrap()
    }

    fn err(bytes: &[u8]) -> String {
        Tree::from_bytes(bytes).unwrap_err().0
    }

    /// A node cut on rtt_ratio at `cuts` (each child a leaf).
    fn split_on_rtt_ratio(cuts: &[(f64, f64)]) -> Node {
        let children = cuts
            .iter()
            .map(|&(lo, hi)| {
                let mut domain = Domain::FULL;
                (domain.lower[2], domain.upper[2]) = (lo, hi);
                let rule = Rule { window_increment: 1, window_multiple: 1.0, intersend_ms: 1.0, generation: 0 };
                Node { domain, body: Body::Leaf(rule) }
            })
            .collect();
        Node { domain: Domain::FULL, body: Body::Children(children) }
    }

    #[test]
    fn a_hand_encoded_rule_reads_as_the_schema_says() {
        // WhiskerTree { leaf: Whisker { window_increment: -2, window_multiple: 0.5, intersend: 3 } },
        // no domain (the whole space). Tags: (31 << 3) | 0 = 248 = f8 01; (32 << 3) | 1 = 81 02;
        // (33 << 3) | 1 = 89 02; sint32 −2 is zigzag 3.
        let mut whisker = vec![0xf8, 0x01, 0x03, 0x81, 0x02];
        whisker.extend_from_slice(&0.5f64.to_le_bytes());
        whisker.extend_from_slice(&[0x89, 0x02]);
        whisker.extend_from_slice(&3.0f64.to_le_bytes());
        let mut file = vec![0x1a, whisker.len() as u8];
        file.extend_from_slice(&whisker);
        let tree = Tree::from_bytes(&file).unwrap();
        let rule = Rule { window_increment: -2, window_multiple: 0.5, intersend_ms: 3.0, generation: 0 };
        assert_eq!(tree, Tree::single(rule));
        // Unknown fields of every wire type are skipped: a varint (field 7), a 32-bit (8), a
        // group (9, holding a varint), a length-delimited (10), in the tree and in the rule.
        let unknown = [0x38, 0x96, 0x01, 0x45, 1, 2, 3, 4, 0x4b, 0x08, 0x01, 0x4c, 0x52, 0x02, 0xaa, 0xbb];
        let mut whisker2 = whisker.clone();
        whisker2.extend_from_slice(&unknown);
        let mut file2 = unknown.to_vec();
        file2.extend_from_slice(&[0x1a, whisker2.len() as u8]);
        file2.extend_from_slice(&whisker2);
        assert_eq!(Tree::from_bytes(&file2).unwrap(), tree);
        // The writer's bytes for it: the box (4 + 4 doubles) written out, then the same rule.
        assert_eq!(Tree::from_bytes(&tree.to_bytes()).unwrap(), tree);
    }

    #[test]
    fn the_writer_reads_back_identically_and_writes_the_fixture_byte_for_byte() {
        let bytes = fixture_bytes();
        let tree = Tree::from_bytes(&bytes).unwrap();
        assert_eq!(tree.to_bytes(), bytes);
        // The root box as the original writes it: domain (1) { lower (11) { 4 doubles },
        // upper (12) { 4 doubles } }, 163840 = 0x4104000000000000.
        assert_eq!(&bytes[..4], &[0x0a, 0x54, 0x5a, 0x28]);
        assert_eq!(&bytes[0x2c..0x30], &[0x62, 0x28, 0xa9, 0x01]);
        assert_eq!(&bytes[0x30..0x38], &MEMORY_MAX.to_le_bytes());
        // Extras, generations and negative increments survive.
        let mut root = split_on_rtt_ratio(&[(0.0, 1.5), (1.5, MEMORY_MAX)]);
        if let Body::Children(children) = &mut root.body {
            children[1].body =
                Body::Leaf(Rule { window_increment: -7, window_multiple: 0.25, intersend_ms: 0.1, generation: 9 });
        }
        let mut config = Writer::default();
        config.varint(77, 1_000_000);
        let extras = Extras { config: Some(config.bytes), optimizer: None, configvector: Some(vec![0x8a, 0x05, 0x00]) };
        let tree = Tree::new(root, extras).unwrap();
        assert_eq!(Tree::from_bytes(&tree.to_bytes()).unwrap(), tree);
    }

    #[test]
    fn packed_and_unpacked_active_axes_of_the_four_are_read_and_others_refused() {
        let with_axes = |axes: &[u8]| {
            let tree = Tree::from_bytes(&fixture_bytes()).unwrap();
            let mut bytes = tree.to_bytes();
            // The root's domain is its first field: grow its payload by the axes.
            assert_eq!(bytes[0..2], [0x0a, 0x54]);
            bytes[1] += axes.len() as u8;
            bytes.splice(2 + 0x54..2 + 0x54, axes.iter().copied());
            Tree::from_bytes(&bytes).map(|_| ()).map_err(|e| e.0)
        };
        assert_eq!(with_axes(&[0x68, 0, 0x68, 1, 0x68, 2, 0x68, 3]), Ok(()));
        assert_eq!(with_axes(&[0x6a, 4, 3, 2, 1, 0]), Ok(()));
        let e = with_axes(&[0x6a, 3, 0, 1, 4]).unwrap_err();
        assert!(e.starts_with("root: domain: active_axis lists [0, 1, 4]: only the 2014 RemyCCs' memory"), "{e}");
    }

    #[test]
    fn bad_input_is_one_line_saying_what_is_wrong() {
        assert_eq!(err(b""), "empty file (a RemyCC tree is a protobuf WhiskerTree message)");
        let bytes = fixture_bytes();
        assert_eq!(err(&bytes[..bytes.len() - 3]), "root: truncated: field 2 needs 494 bytes, 491 are left");
        assert_eq!(err(&bytes[..1]), "root: truncated: the data ends inside a varint");
        // Another protobuf: field 1 a varint, or fields the tree does not have.
        assert_eq!(err(&[0x08, 0x96, 0x01]), "root: field 1 (domain) is varint, the schema's is length-delimited");
        assert_eq!(
            err(&[0x3a, 0x01, 0x00]),
            "root: neither a rule (field 3, leaf) nor children (field 2): not a RemyCC WhiskerTree"
        );
        assert_eq!(err(&[0x0f]), "root: field 1: wire type 7 does not exist");
        assert_eq!(err(&[0x00]), "root: field number 0 is not a valid protobuf field number");
        let safetensors = std::fs::read(crate::testing::indigo_fixture()).unwrap();
        let e = err(&safetensors);
        assert!(e.starts_with("root: ") && !e.contains('\n'), "{e}");
        // A rule and children at once.
        let leaf = Tree::single(Rule { window_increment: 1, window_multiple: 1.0, intersend_ms: 1.0, generation: 0 })
            .to_bytes();
        let mut both = fixture_bytes();
        // The single rule's file is its box (2 + 0x54 bytes), then its leaf field.
        both.extend_from_slice(&leaf[0x56..]);
        assert_eq!(err(&both), "root: has both a rule (leaf) and children");
        // Children that do not tile their parent: a gap, an overlap.
        let gap = Tree::new(split_on_rtt_ratio(&[(0.0, 1.2), (1.3, MEMORY_MAX)]), Extras::default()).unwrap_err().0;
        assert_eq!(
            gap,
            "root: the children do not tile the box: no child holds the point \
             rec_send_ewma=0 rec_rec_ewma=0 rtt_ratio=1.2 slow_rec_rec_ewma=0"
        );
        let overlap = Tree::new(split_on_rtt_ratio(&[(0.0, 1.3), (1.2, MEMORY_MAX)]), Extras::default()).unwrap_err().0;
        assert_eq!(
            overlap,
            "root: the children do not tile the box: children 0 and 1 overlap at \
             rec_send_ewma=0 rec_rec_ewma=0 rtt_ratio=1.2 slow_rec_rec_ewma=0"
        );
        let outside = Tree::new(split_on_rtt_ratio(&[(0.0, 1.2), (1.2, 2e5)]), Extras::default()).unwrap_err().0;
        assert!(outside.starts_with("root.1: the box (") && outside.ends_with(") reaches outside its parent's (rec_send_ewma=[0, 163840) rec_rec_ewma=[0, 163840) rtt_ratio=[0, 163840) slow_rec_rec_ewma=[0, 163840))"), "{outside}");
        // An empty child (the original's median split can make one) is allowed, never matched.
        let with_empty = Tree::new(split_on_rtt_ratio(&[(0.0, 0.0), (0.0, MEMORY_MAX)]), Extras::default()).unwrap();
        assert_eq!(with_empty.rule_index(&[0.0; 4]), 1);
        // Numbers that are not finite, written by the writer so that only the value is wrong.
        let nan = Rule { window_increment: 1, window_multiple: f64::NAN, intersend_ms: 1.0, generation: 0 };
        let root = Node { domain: Domain::FULL, body: Body::Leaf(nan) };
        let mut w = Writer::default();
        write_node(&mut w, &root);
        assert_eq!(err(&w.bytes), "root: window_multiple must be finite, got NaN");
        let mut domain = Domain::FULL;
        domain.upper[1] = f64::INFINITY;
        let root = Node { domain, body: Body::Leaf(Rule { window_multiple: 1.0, ..nan }) };
        let mut w = Writer::default();
        write_node(&mut w, &root);
        assert_eq!(err(&w.bytes), "root: rec_rec_ewma bounds must be finite, got [0, inf)");
        let negative = Rule { window_increment: 1, window_multiple: 1.0, intersend_ms: -1.0, generation: 0 };
        let e = Tree::new(Node { domain: Domain::FULL, body: Body::Leaf(negative) }, Extras::default()).unwrap_err().0;
        assert_eq!(e, "root: intersend must be a finite number of ms >= 0, got -1");
    }

    #[test]
    fn a_file_s_error_names_it() {
        let dir = std::env::temp_dir().join(format!("tao-tree-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.pb");
        std::fs::write(&path, [0x08, 0x01]).unwrap();
        let e = Tree::load(&path).unwrap_err().0;
        assert_eq!(
            e,
            format!("tao tree {}: root: field 1 (domain) is varint, the schema's is length-delimited", path.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let e = Tree::load(Path::new("/no/such/tree.pb")).unwrap_err().0;
        assert!(e.starts_with("tao tree /no/such/tree.pb: cannot read: "), "{e}");
    }

    #[test]
    fn nesting_past_the_limit_is_refused_not_a_stack_overflow() {
        // WhiskerTree { children: WhiskerTree { children: ... } } 200 deep, innermost a leaf.
        let mut bytes =
            Tree::single(Rule { window_increment: 1, window_multiple: 1.0, intersend_ms: 0.0, generation: 0 })
                .to_bytes();
        for _ in 0..200 {
            let mut w = Writer::default();
            w.bytes(2, &bytes);
            bytes = w.bytes;
        }
        let e = err(&bytes);
        assert!(e.ends_with(&format!(": nested deeper than {MAX_DEPTH} levels")), "{e}");
        assert!(e.len() < 300, "{e}");
    }
}
