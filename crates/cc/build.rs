//! Builds Indigo's trained weights into the crate (issue 19 §2: committed, so that the scheme
//! `indigo` runs with no file to give): every `NAME.safetensors` in the repository's data/indigo/
//! becomes the built-in model NAME (`indigo:model=NAME`; `indigo` alone takes the model `indigo`,
//! crates/cc/src/indigo/mod.rs). A checkout without them still builds: `indigo` then needs
//! `weights=PATH`. The generated `$OUT_DIR/indigo_models.rs` holds one `include_bytes!` per file;
//! cargo runs this again when data/indigo/ changes.

use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dir = manifest_dir.join("../../data/indigo");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut models: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(&dir).into_iter().flatten() {
        let path = entry.expect("data/indigo/ is readable").path();
        if path.extension().is_none_or(|e| e != "safetensors") {
            continue;
        }
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            // A stray file must not break the build; the warning says why it is not a model.
            println!(
                "cargo::warning={}: not built in (a model's file is NAME.safetensors, NAME of letters, digits, - and _)",
                path.display()
            );
            continue;
        }
        let path = path.canonicalize().expect("the file was just listed");
        models.push((name, path));
    }
    models.sort();
    let mut code = String::from("/// The built-in models, (name, safetensors bytes), sorted by name.\n");
    code.push_str("pub const MODELS: &[(&str, &[u8])] = &[\n");
    for (name, path) in &models {
        code.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("indigo_models.rs");
    fs::write(&out, code).unwrap_or_else(|e| panic!("{}: cannot write: {e}", out.display()));
}
