//! `pantheon-sim tree show|json|write` (docs/cc.md, "Tao"): the rule tree's readable dump, its JSON
//! form and back, and one-line errors with exit status 2.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use support::{sim, Scratch, BIN};

fn fixture(name: &str) -> String {
    format!("{}/../cc/tests/fixtures/tao/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `pantheon-sim tree write OUT` with `json` on standard input.
fn write(out: &std::path::Path, json: &str) -> std::process::Output {
    let mut child = Command::new(BIN)
        .args(["tree", "write", out.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(json.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn show_prints_the_totals_then_one_line_per_rule_in_the_numbering() {
    let file = fixture("three_rules.pb");
    let out = sim(&["tree", "show", &file]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "{file}: 3 rules, 2 levels below the root, generations 0..2; config: no, optimizer: no, configvector: no"
        )
    );
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[4],
        "2: rec_send_ewma=[0, 163840) rec_rec_ewma=[1, 163840) rtt_ratio=[1.2, 163840) \
         slow_rec_rec_ewma=[0, 163840) => cwnd = 0.5 * cwnd - 2, intersend 2 ms, generation 2"
    );
}

#[test]
fn json_and_write_round_trip_the_file_byte_for_byte() {
    let scratch = Scratch::new("tree-json");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let out = sim(&["tree", "json", &fixture("three_rules.pb")]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let given: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("three_rules.json")).unwrap()).unwrap();
    // The fixture's JSON has integer bounds; the output writes every bound as a float.
    assert_eq!(json["children"][1]["children"][1]["leaf"], given["children"][1]["children"][1]["leaf"]);
    assert_eq!(json["children"][0]["domain"]["upper"][2], 1.2);
    let written = scratch.join("back.pb");
    let done = write(&written, &json.to_string());
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert_eq!(std::fs::read(&written).unwrap(), std::fs::read(fixture("three_rules.pb")).unwrap());
}

#[test]
fn bad_files_and_bad_json_are_one_line_and_exit_2() {
    let scratch = Scratch::new("tree-errors");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let empty = scratch.join("empty.pb");
    std::fs::write(&empty, b"").unwrap();
    let out = sim(&["tree", "show", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "pantheon-sim: tao tree {}: empty file (a RemyCC tree is a protobuf WhiskerTree message)\n",
            empty.display()
        )
    );
    let target = scratch.join("never.pb");
    for (json, error) in [
        ("{", "tree write: the input is not valid JSON: EOF while parsing an object at line 1 column 1"),
        (r#"{"domain": {"lower": [0,0,0,0], "upper": [1,1,1,1]}}"#, "tree write: root: needs \"leaf\" or \"children\""),
        (
            r#"{"domain": {"lower": [0,0,0,0], "upper": [1,1,1,1]}, "children": [
                {"domain": {"lower": [0,0,0,0], "upper": [1,1,0.5,1]},
                 "leaf": {"window_increment": 1, "window_multiple": 1, "intersend_ms": 1}}]}"#,
            "tree write: root: the children do not tile the box: no child holds the point \
             rec_send_ewma=0 rec_rec_ewma=0 rtt_ratio=0.5 slow_rec_rec_ewma=0",
        ),
    ] {
        let out = write(&target, json);
        assert_eq!(out.status.code(), Some(2), "{json}");
        assert_eq!(String::from_utf8(out.stderr).unwrap(), format!("pantheon-sim: {error}\n"));
    }
    assert!(!target.exists(), "nothing is written for a bad tree");
}
