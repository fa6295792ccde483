//! Indigo's network weights, read from a safetensors file (github.com/huggingface/safetensors:
//! an 8-byte little-endian header length, a JSON header `{name: {dtype, shape, data_offsets}}`,
//! then the raw little-endian data), parsed by the `safetensors` crate.
//!
//! The file holds exactly these five f32 tensors, row-major, H the LSTM's units (32 as the paper
//! trained it, 128 also loads; H is read from the file) and `INPUTS` = 9 (state.rs):
//!
//! | name             | shape      | meaning                                                  |
//! |------------------|------------|----------------------------------------------------------|
//! | `lstm.weight_ih` | [4H, 9]    | input → gates, rows in gate order i, f, g, o (lstm.rs)   |
//! | `lstm.weight_hh` | [4H, H]    | previous hidden state → gates, same row order            |
//! | `lstm.bias`      | [4H]       | one bias per gate row (see below)                        |
//! | `head.weight`    | [5, H]     | hidden state → one score per action (mod.rs's order)     |
//! | `head.bias`      | [5]        | the scores' bias                                         |
//!
//! A trainer whose LSTM has two biases (PyTorch's `bias_ih` and `bias_hh`) writes their sum; one
//! with a constant forget bias (TensorFlow's BasicLSTMCell, the released code's, adds 1.0 and
//! orders its gate rows i, g, f, o) adds it to the f rows and reorders the rows to i, f, g, o.
//!
//! Any other tensor, a missing one, another dtype or shape, or a value that is not finite is a
//! one-line error naming the tensor: a file for another model must not load as this one.

use std::fmt;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::state::INPUTS;
use super::ACTIONS;

/// A weights file that cannot be used, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsError(pub String);

impl fmt::Display for WeightsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WeightsError {}

/// The tensor names, in the order the table above gives them.
pub const TENSOR_NAMES: [&str; 5] = ["lstm.weight_ih", "lstm.weight_hh", "lstm.bias", "head.weight", "head.bias"];

/// The network's parameters, each row-major as in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// The LSTM's units, H.
    pub hidden: usize,
    /// [4H, INPUTS].
    pub weight_ih: Vec<f32>,
    /// [4H, H].
    pub weight_hh: Vec<f32>,
    /// [4H].
    pub bias: Vec<f32>,
    /// [ACTIONS, H].
    pub head_weight: Vec<f32>,
    /// [ACTIONS].
    pub head_bias: Vec<f32>,
}

impl Weights {
    /// Reads and checks a weights file; errors start with the path.
    pub fn load(path: &Path) -> Result<Self, WeightsError> {
        let bytes = std::fs::read(path)
            .map_err(|e| WeightsError(format!("indigo weights {}: cannot read: {e}", path.display())))?;
        Self::from_bytes(&bytes).map_err(|e| WeightsError(format!("indigo weights {}: {}", path.display(), e.0)))
    }

    /// Parses and checks the bytes of a weights file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WeightsError> {
        let file =
            SafeTensors::deserialize(bytes).map_err(|e| WeightsError(format!("not a safetensors file: {}", e)))?;
        if let Some(extra) = file.names().into_iter().find(|n| !TENSOR_NAMES.contains(n)) {
            return Err(WeightsError(format!(
                "unexpected tensor '{extra}' (an Indigo weights file holds exactly {})",
                TENSOR_NAMES.join(", ")
            )));
        }
        let (weight_hh, hh_shape) = tensor(&file, "lstm.weight_hh", None)?;
        let hidden = hh_shape.get(1).copied().unwrap_or(0);
        let gates = 4 * hidden;
        if hidden == 0 || hh_shape != [gates, hidden] {
            return Err(WeightsError(format!(
                "tensor 'lstm.weight_hh': shape must be [4H, H] with H >= 1, got {hh_shape:?}"
            )));
        }
        Ok(Weights {
            hidden,
            weight_ih: tensor(&file, "lstm.weight_ih", Some(&[gates, INPUTS]))?.0,
            weight_hh,
            bias: tensor(&file, "lstm.bias", Some(&[gates]))?.0,
            head_weight: tensor(&file, "head.weight", Some(&[ACTIONS, hidden]))?.0,
            head_bias: tensor(&file, "head.bias", Some(&[ACTIONS]))?.0,
        })
    }
}

/// The values and shape of tensor `name`, checked to be finite f32 of shape `shape` when given.
fn tensor(file: &SafeTensors, name: &str, shape: Option<&[usize]>) -> Result<(Vec<f32>, Vec<usize>), WeightsError> {
    let err = |what: String| WeightsError(format!("tensor '{name}': {what}"));
    let view = file.tensor(name).map_err(|_| err("missing".into()))?;
    if view.dtype() != Dtype::F32 {
        return Err(err(format!("dtype must be F32, got {:?}", view.dtype())));
    }
    if let Some(want) = shape.filter(|&want| want != view.shape()) {
        return Err(err(format!("shape must be {want:?}, got {:?}", view.shape())));
    }
    let values: Vec<f32> = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(err(format!("value {i} is {}", values[i])));
    }
    Ok((values, view.shape().to_vec()))
}
