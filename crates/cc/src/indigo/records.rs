//! What a trainer needs from an episode (issue 19 §2, DAgger: Ross, Gordon & Bagnell, AISTATS
//! 2011, §3 — every state the learner visits, labelled with the expert's action): one record per
//! decision, kept only when asked (`record=1`), in columns, as the batch result carries them.

use super::INPUTS;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Records {
    /// The network's input at each decision, exactly what `Lstm::step` got (state.rs's scaling).
    pub inputs: Vec<[f32; INPUTS]>,
    /// The window before each decision's action, packets.
    pub cwnd_packets: Vec<f64>,
    /// The action each decision took, index into `ACTION_NAMES`.
    pub actions: Vec<usize>,
    /// The expert's action at each decision (`expert_action`); `None` when the controller was
    /// given no oracle window.
    pub expert_actions: Option<Vec<usize>>,
}

impl Records {
    pub fn new(with_expert: bool) -> Self {
        Records { expert_actions: with_expert.then(Vec::new), ..Records::default() }
    }

    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    pub(super) fn push(&mut self, input: [f32; INPUTS], cwnd_packets: f64, action: usize, expert: Option<usize>) {
        self.inputs.push(input);
        self.cwnd_packets.push(cwnd_packets);
        self.actions.push(action);
        if let (Some(column), Some(expert)) = (&mut self.expert_actions, expert) {
            column.push(expert);
        }
    }
}
