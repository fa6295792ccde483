//! Indigo's policy network, one step at a time: one LSTM layer (Hochreiter & Schmidhuber, Neural
//! Computation 1997, with the forget gate of Gers, Schmidhuber & Cummins 2000 — the common form)
//! and a linear layer from its hidden state to one score per action. The paper's network is this
//! (Yan et al., USENIX ATC 2018, §6: "a single layer LSTM"); its released code (StanfordSNR/indigo,
//! dagger/models.py) uses 32 units and a linear head.
//!
//! One step, x the 9 inputs (state.rs), h and c the hidden and cell states carried from the
//! previous step (zero at the flow's start), σ the logistic function, rows of the weights in gate
//! order i, f, g, o (weights.rs):
//!
//! ```text
//! z = W_ih·x + W_hh·h + b            (4H values; z_i, z_f, z_g, z_o its four quarters)
//! i = σ(z_i)   f = σ(z_f)   g = tanh(z_g)   o = σ(z_o)
//! c ← f⊙c + i⊙g
//! h ← o⊙tanh(c)
//! scores = W_head·h + b_head         (5 values; the action is the argmax, greedy as the
//!                                     released code runs it)
//! ```
//!
//! All buffers are allocated once, when the network is built: a step allocates nothing. Arithmetic
//! is f32, as the weights are.

use super::state::INPUTS;
use super::weights::Weights;
use super::ACTIONS;

#[derive(Debug, Clone)]
pub struct Lstm {
    weights: Weights,
    /// Hidden state h, H values in (−1, 1).
    hidden: Vec<f32>,
    /// Cell state c, H values.
    cell: Vec<f32>,
    /// The gates' pre-activations z of the step under way, 4H values (scratch).
    gates: Vec<f32>,
    /// The scores of the last step, one per action.
    scores: [f32; ACTIONS],
}

impl Lstm {
    pub fn new(weights: Weights) -> Self {
        let h = weights.hidden;
        Lstm { weights, hidden: vec![0.0; h], cell: vec![0.0; h], gates: vec![0.0; 4 * h], scores: [0.0; ACTIONS] }
    }

    /// The LSTM's units, H.
    pub fn units(&self) -> usize {
        self.weights.hidden
    }

    /// Zeroes the hidden and cell states, as at a flow's start.
    pub fn reset(&mut self) {
        self.hidden.fill(0.0);
        self.cell.fill(0.0);
    }

    /// One step on input `x`; returns the index of the highest score (the first on a tie).
    pub fn step(&mut self, x: &[f32; INPUTS]) -> usize {
        let h = self.weights.hidden;
        let w = &self.weights;
        for (row, z) in self.gates.iter_mut().enumerate() {
            let from_input = dot(&w.weight_ih[row * INPUTS..(row + 1) * INPUTS], x);
            let from_hidden = dot(&w.weight_hh[row * h..(row + 1) * h], &self.hidden);
            *z = w.bias[row] + from_input + from_hidden;
        }
        let (z_i, rest) = self.gates.split_at(h);
        let (z_f, rest) = rest.split_at(h);
        let (z_g, z_o) = rest.split_at(h);
        for k in 0..h {
            let c = sigmoid(z_f[k]) * self.cell[k] + sigmoid(z_i[k]) * z_g[k].tanh();
            self.cell[k] = c;
            self.hidden[k] = sigmoid(z_o[k]) * c.tanh();
        }
        for (a, score) in self.scores.iter_mut().enumerate() {
            *score = w.head_bias[a] + dot(&w.head_weight[a * h..(a + 1) * h], &self.hidden);
        }
        let mut best = 0;
        for (a, &s) in self.scores.iter().enumerate() {
            if s > self.scores[best] {
                best = a;
            }
        }
        best
    }

    /// The hidden state after the last step.
    pub fn hidden(&self) -> &[f32] {
        &self.hidden
    }

    /// The action scores of the last step.
    pub fn scores(&self) -> &[f32; ACTIONS] {
        &self.scores
    }
}

/// Eight running sums, so that the compiler may keep them in one vector register (one sum in
/// order forbids it: f32 addition is not associative).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for k in 0..8 {
            sums[k] += x[k] * y[k];
        }
    }
    sums.iter().sum::<f32>() + tail
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}
