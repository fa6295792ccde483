//! Builds the learned controllers' committed files into the crate, so that their schemes run with
//! no file to give:
//! - Indigo's trained weights (issue 19 §2): every `NAME.safetensors` in the repository's
//!   data/indigo/ becomes the built-in model NAME (`indigo:model=NAME`; `indigo` alone takes the
//!   model `indigo`, crates/cc/src/indigo/mod.rs), in `$OUT_DIR/indigo_models.rs`;
//! - Tao's rule trees (issue 37): every `NAME.pb` in data/tao/ becomes the built-in tree NAME
//!   (`tao:model=NAME`; `tao` alone takes `tao-100x`, crates/cc/src/tao/mod.rs), in
//!   `$OUT_DIR/tao_trees.rs`.
//!
//! A checkout without them still builds: `indigo` then needs `weights=PATH` and `tao`
//! `tree=PATH`. Each generated file holds one `include_bytes!` per file; cargo runs this again
//! when either folder changes.

use std::fs;
use std::path::{Path, PathBuf};

/// The files of `dir` named `NAME.extension`, as (NAME, absolute path), sorted by name.
fn named_files(dir: &Path, extension: &str) -> Vec<(String, PathBuf)> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap_or_else(|e| panic!("{}: cannot list: {e}", dir.display())).path();
        if path.extension().is_none_or(|e| e != extension) {
            continue;
        }
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            // A stray file must not break the build; the warning says why it is not built in.
            println!(
                "cargo::warning={}: not built in (a built-in file is NAME.{extension}, NAME of letters, digits, - and _)",
                path.display()
            );
            continue;
        }
        let path = path.canonicalize().expect("the file was just listed");
        files.push((name, path));
    }
    files.sort();
    files
}

/// Writes `$OUT_DIR/out_file`: `pub const CONSTANT: &[(&str, &[u8])]`, (name, bytes) per file.
fn write_table(out_file: &str, constant: &str, doc: &str, files: &[(String, PathBuf)]) {
    let mut code = format!("/// {doc}, (name, bytes), sorted by name.\n");
    code.push_str(&format!("pub const {constant}: &[(&str, &[u8])] = &[\n"));
    for (name, path) in files {
        code.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join(out_file);
    fs::write(&out, code).unwrap_or_else(|e| panic!("{}: cannot write: {e}", out.display()));
}

fn main() {
    let data = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../../data");
    let models = named_files(&data.join("indigo"), "safetensors");
    write_table("indigo_models.rs", "MODELS", "The built-in models", &models);
    let trees = named_files(&data.join("tao"), "pb");
    write_table("tao_trees.rs", "TREES", "The built-in rule trees", &trees);
}
