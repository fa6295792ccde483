"""Indigo's network in JAX, for training: the same LSTM step as the controller's
(crates/cc/src/indigo/lstm.rs — gate rows i, f, g, o, one bias per row, then a linear head to
the five actions' scores), run over whole episodes with `jax.lax.scan` so that the gradient flows
back through every decision of an episode (backpropagation through time), and its weights
written in the controller's format (crates/cc/src/indigo/weights.rs: five f32 tensors in a
safetensors file, read and written here with the `safetensors` package's numpy API).

The parameters are a dict keyed by the file's tensor names, so a checkpoint is the weights file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pantheon.errors import PantheonError

INPUTS = 9
"""Per decision: queueing delay, delivery rate, sending rate, window, previous action one-hot
(crates/cc/src/indigo/state.rs)."""
ACTIONS = 5
"""÷2, −10, +0, +10, ×2 (crates/cc/src/indigo/mod.rs)."""
TENSORS = ("lstm.weight_ih", "lstm.weight_hh", "lstm.bias", "head.weight", "head.bias")
FORGET_BIAS = 1.0
"""Added to the f rows' bias at initialisation, so that a new cell keeps its state (Gers,
Schmidhuber & Cummins 2000; the released code's TensorFlow cell adds the same 1.0 at every step)."""

Params = dict[str, Any]
"""Tensor name -> array (numpy or jax), shapes as in weights.rs."""


def init(hidden: int, seed: int) -> Params:
    """Uniform(−1/√H, 1/√H) weights (the usual LSTM initialisation), f32, seeded."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(hidden)
    shapes = {"lstm.weight_ih": (4 * hidden, INPUTS), "lstm.weight_hh": (4 * hidden, hidden),
              "lstm.bias": (4 * hidden,), "head.weight": (ACTIONS, hidden), "head.bias": (ACTIONS,)}
    params = {name: rng.uniform(-bound, bound, shape).astype(np.float32) for name, shape in shapes.items()}
    params["lstm.bias"][hidden:2 * hidden] += FORGET_BIAS
    return params


def fold(params: Params, mean: np.ndarray, std: np.ndarray) -> Params:
    """The controller's weights for a network trained on standardised inputs (x − mean) / std: the
    standardisation moved into the first layer, W·(x − μ)/σ + b = (W/σ)·x + (b − (W/σ)·μ), exactly
    (up to f32 rounding). The controller's inputs span orders of magnitude (a queueing delay of
    1 ms is 0.005, state.rs), which a network learns from slowly unscaled."""
    w = np.asarray(params["lstm.weight_ih"], np.float64) / std
    b = np.asarray(params["lstm.bias"], np.float64) - w @ mean
    return {**{k: np.asarray(v, np.float32) for k, v in params.items()},
            "lstm.weight_ih": w.astype(np.float32), "lstm.bias": b.astype(np.float32)}


def hidden_units(params: Params) -> int:
    return int(params["lstm.weight_hh"].shape[1])


def scores(params: Params, inputs):
    """The action scores [B, T, 5] of a batch of episodes' inputs [B, T, 9], each episode from
    zero state, one lstm.rs step per decision."""
    import jax
    import jax.numpy as jnp

    hidden = hidden_units(params)
    w_ih, w_hh, bias = params["lstm.weight_ih"], params["lstm.weight_hh"], params["lstm.bias"]

    def step(carry, x):
        h, c = carry
        z = x @ w_ih.T + h @ w_hh.T + bias
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    batch = inputs.shape[0]
    zeros = jnp.zeros((batch, hidden), jnp.float32)
    _, hs = jax.lax.scan(step, (zeros, zeros), jnp.swapaxes(inputs, 0, 1))
    return jnp.swapaxes(hs, 0, 1) @ params["head.weight"].T + params["head.bias"]


def loss(params: Params, inputs, labels, mask):
    """Mean cross-entropy of the expert's actions `labels` [B, T] under the scores, over the
    decisions `mask` [B, T] marks (episodes are padded to one length)."""
    import jax
    import jax.numpy as jnp

    logits = scores(params, inputs)
    log_p = jax.nn.log_softmax(logits)
    picked = jnp.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]
    return -(picked * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def save(params: Params, path: Path) -> None:
    """Writes the weights file the controller loads (`indigo:weights=PATH`)."""
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file({name: np.ascontiguousarray(params[name], dtype=np.float32) for name in TENSORS}, str(tmp))
    tmp.replace(path)


def load(path: Path) -> Params:
    """The weights in a file `save` (or any trainer of weights.rs's format) wrote."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        params = load_file(str(path))
    except (OSError, SafetensorError) as e:
        raise PantheonError(f"indigo weights {path}: cannot read ({e})") from None
    if sorted(params) != sorted(TENSORS):
        raise PantheonError(f"indigo weights {path}: holds {', '.join(sorted(params))}, not {', '.join(TENSORS)}")
    return params
