"""DAgger (Ross, Gordon & Bagnell, "A reduction of imitation learning and structured prediction to
no-regret online learning", AISTATS 2011, Algorithm 3.1), as Indigo trained (Yan et al., ATC 2018,
§6): roll out a policy on every training path, label every decision it met with the expert's
action, add the labelled episodes to one data set, train the network on the whole set, repeat.

- Iteration 0 rolls out the expert itself (β₁ = 1 in the paper's mixture; the controller's
  `policy=expert`), later iterations the network just trained (β_i = 0 for i > 1, the common
  choice), so the data set grows with the states the network itself reaches — the mistakes a
  learner trained on the expert's states alone would compound.
- Exploration: beside the network itself, each later iteration rolls out `explore` copies of it
  with Gaussian noise on every weight (`explore_noise` × the tensor's RMS; parameter-space noise,
  Plappert et al., ICLR 2018), labelled and aggregated the same way: on a deterministic path one
  network makes one trajectory, and the states just off it — which the network meets as soon as
  it errs a little elsewhere — would otherwise come in one at a time (the same aim as DART's
  noise, Laskey et al., CoRL 2017). Only the unperturbed rollouts are measured.
- Recovery (issue 38 §2): beside those, each iteration rolls out `halvings` more episodes per
  path of the same policy with one ÷2 forced at a decision drawn from `HALVE_AT_DECISIONS` (the
  controller's `halve_at_decision`), after the ramp, with the rest of the episode to come back.
  Started from 10 packets on paths it tracks, a network rarely sees its window well under the
  oracle's once it has seen the path's rate, and the weights trained without these episodes
  held it there: on the demo's path (12 Mbit/s, 20 ms, 60 kB) a start-up that fell to 25 packets of a
  40-packet BDP stayed at 25, "+0" every decision, in 27 of 200 seeds. The halved episodes are
  labelled, aggregated and measured like the others; their tracking counts in the selection.
- Seeds: every episode its own (the iteration, the path, the copy), so the simulator's link
  clock stands at another phase for each (docs/sim.md, "What differs from the emulator") and the
  min RTT a flow measures is not the same floor in every rollout.
- The expert (oracle.py, crates/cc's `expert_action`): the action that brings the window closest
  to the path's best fixed window. Every rollout runs with `record=1` and the oracle given, so the
  controller returns, per decision, the network's input, the window, the action taken and the
  expert's.
- Training: cross-entropy of the expert's actions over whole episodes, the LSTM run from zero
  state through each (backpropagation through time, model.py), Adam (Kingma & Ba 2015) with the
  gradient's norm clipped at 1, a fixed number of minibatch steps per iteration from the previous
  iteration's weights, a fresh optimiser each time (so a resumed run is the same run).
- Held out, and when to stop: each iteration's new rollouts are the network's first sight of the
  states it reached, so before they join the set they measure it — the share of decisions where
  it chose the expert's action (agreement) and the loss on them. Validation paths (off the
  training grid, with oracles of their own, never added to the data set) are rolled out beside
  them and measure how the network generalises. What decides is the window's distance from the
  oracle, mean |window − oracle| / oracle over the episodes' last half, on the training and
  validation paths together, from 10 packets and halved (each path counting once in each):
  training stops when it has not improved
  for `patience` iterations, or after `iterations`, and the weights kept are those that tracked
  best. Not agreement: an action sequence that holds the window as well as the expert's
  (+10 then −10 for +0 twice) disagrees twice, and a network at 52% agreement held the window
  within 5% of the oracles on the validation paths.

Checkpoints: after each iteration the work directory holds the data set, the weights, and the
history (state.json); the same command again resumes after the last finished iteration.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from pantheon.errors import PantheonError
from pantheon.indigo import model
from pantheon.indigo.oracle import Oracle, score
from pantheon.indigo.paths import TrainingPath
from pantheon.sim.batch import FlowSpec, Job, Result
from pantheon.sim.runner import Runner, model_file

STEP_MS = 10.0
"""Time between decisions (crates/cc/src/indigo): an episode has at most runtime / 10 ms."""
SHORTEST_EPISODE_S = 0.25
"""An episode the simulator refuses (a window grown without bound: more than a million packets in
flight) runs again for half as long, down to this: its decisions up to the runaway are the
states the expert's ÷2 must be learned in."""
STEADY_SHARE = 0.5
"""Window tracking is measured over an episode's last half: the first is the ramp to the oracle."""
HALVE_AT_DECISIONS = (20, 0.3)
"""A halved episode's ÷2 falls on a decision drawn uniformly from the 20th (after the ramp from 10
packets to the largest oracle, ~2 700 packets: 8 doublings and a few steps) to 0.3 of the episode's decisions
(so the recovery ends before the last half, over which tracking is measured)."""
SEEDS_PER_ITERATION = 1000
"""Episode seeds: (seed + iteration) × this + the episode's index in the iteration."""


@dataclass(frozen=True)
class Settings:
    """What one training run is; its digest names the checkpoints it may resume (the iterations
    and the patience are left out of it: more of them continue the same run)."""
    paths: list[TrainingPath]
    validation: list[TrainingPath] = field(default_factory=list)
    """Rolled out and measured each iteration, never trained on."""
    runtime_s: float = 10.0
    hidden: int = 32
    iterations: int = 60
    """The most DAgger iterations (each: rollouts, then training)."""
    patience: int = 12
    """Iterations without better held-out agreement before stopping."""
    steps: int = 150
    """Adam steps per iteration."""
    batch: int = 16
    """Episodes per step."""
    learning_rate: float = 3e-3
    explore: int = 2
    """Perturbed copies of the network rolled out per iteration, beside it."""
    explore_noise: float = 0.1
    """Their noise, relative to each tensor's RMS."""
    halvings: int = 1
    """Episodes per path per iteration with one ÷2 forced after the ramp (the module's header)."""
    seed: int = 0

    def digest(self) -> str:
        about = {k: v for k, v in asdict(self).items() if k not in ("iterations", "patience")}
        return hashlib.sha256(json.dumps(about, sort_keys=True, default=list).encode()).hexdigest()[:12]

    @property
    def max_decisions(self) -> int:
        return int(self.runtime_s * 1e3 / STEP_MS) + 1


@dataclass
class Episodes:
    """Labelled episodes, padded to one length T."""
    inputs: np.ndarray
    """[N, T, 9] f32: the network's inputs, as the controller computed them."""
    expert: np.ndarray
    """[N, T] int32: the expert's action at each decision."""
    actions: np.ndarray
    """[N, T] int32: the action taken."""
    cwnd_packets: np.ndarray
    """[N, T] f64: the window before each action."""
    mask: np.ndarray
    """[N, T] f32: 1 where a decision was recorded."""
    path: np.ndarray
    """[N] int32: index of the episode's training path."""

    @staticmethod
    def empty(length: int) -> Episodes:
        return Episodes(np.zeros((0, length, model.INPUTS), np.float32), np.zeros((0, length), np.int32),
                        np.zeros((0, length), np.int32), np.zeros((0, length)), np.zeros((0, length), np.float32),
                        np.zeros(0, np.int32))

    def __len__(self) -> int:
        return len(self.path)

    def plus(self, other: Episodes) -> Episodes:
        return Episodes(*(np.concatenate([a, b]) for a, b in zip(self.arrays(), other.arrays())))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.inputs, self.expert, self.actions, self.cwnd_packets, self.mask, self.path

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, *self.arrays())
        tmp.replace(path)

    @staticmethod
    def load(path: Path) -> Episodes:
        with np.load(path) as data:
            return Episodes(*(data[f"arr_{i}"] for i in range(6)))

    def part(self, which: slice) -> Episodes:
        return Episodes(*(a[which] for a in self.arrays()))

    def agreement(self) -> float:
        """Share of decisions where the action taken was the expert's."""
        return float(((self.actions == self.expert) * self.mask).sum() / max(self.mask.sum(), 1.0))

    def tracking_error(self, oracles: list[Oracle]) -> float:
        """Mean over episodes of mean |window − oracle| / oracle over each episode's last half."""
        errors = []
        for n in range(len(self)):
            count = int(self.mask[n].sum())
            oracle = oracles[self.path[n]].cwnd_packets
            steady = self.cwnd_packets[n, int(count * (1 - STEADY_SHARE)):count]
            if len(steady):
                errors.append(float(np.mean(np.abs(steady - oracle) / oracle)))
        return float(np.mean(errors)) if errors else math.nan


def spec(policy: str, oracle: Oracle, weights: str = model_file(), halve_at_decision: int | None = None) -> str:
    halve = "" if halve_at_decision is None else f",halve_at_decision={halve_at_decision}"
    return f"indigo:weights={weights},policy={policy},oracle_cwnd_packets={oracle.cwnd_packets},record=1{halve}"


def episodes(results: list[Result], path_index: list[int], length: int) -> Episodes:
    """The recorded decisions of each result's one flow, padded to `length`."""
    n = len(results)
    out = Episodes(np.zeros((n, length, model.INPUTS), np.float32), np.zeros((n, length), np.int32),
                   np.zeros((n, length), np.int32), np.zeros((n, length)), np.zeros((n, length), np.float32),
                   np.asarray(path_index, np.int32))
    for i, result in enumerate(results):
        if not result.ok:
            raise PantheonError(f"indigo: the simulator refused an episode: {result.error}")
        record = result.flows[0].decisions
        assert record is not None and record.expert_actions is not None, "every rollout records, with an oracle"
        count = min(len(record.actions), length)
        out.inputs[i, :count] = np.asarray(record.inputs[:count], np.float32)
        out.expert[i, :count] = record.expert_actions[:count]
        out.actions[i, :count] = record.actions[:count]
        out.cwnd_packets[i, :count] = record.cwnd_packets[:count]
        out.mask[i, :count] = 1.0
    return out


@dataclass
class Iteration:
    """What one iteration measured."""
    iteration: int
    policy: str
    episodes: int
    rollout_s: float
    agreement: float
    """Held out: on the rollouts of the network being measured (for iteration 0, the expert's)."""
    heldout_loss: float
    tracking_error: float
    """Mean |window − oracle| / oracle over the rollouts' last halves."""
    score: float
    """The rollouts' mean log(throughput) − log(p95 delay)."""
    validation_agreement: float | None = None
    validation_tracking_error: float | None = None
    validation_score: float | None = None
    all_tracking_error: float = math.nan
    """Over the training and validation paths together, the episodes from 10 packets and the
    halved ones (each path once in each): what selects the weights."""
    halved_tracking_error: float | None = None
    """The halved episodes' on the training paths."""
    train_loss: float | None = None
    train_s: float | None = None


@dataclass
class State:
    """The checkpoint: the history; the data set and weights are files beside it."""
    digest: str
    oracles: list[int]
    history: list[Iteration] = field(default_factory=list)

    def best(self) -> Iteration | None:
        """The iteration whose rolled-out network tracked the oracles best (iteration 0 rolls out
        the expert, not a network)."""
        measured = [h for h in self.history if h.policy == "network"]
        return min(measured, key=lambda h: h.all_tracking_error, default=None)

    def stalled(self, patience: int) -> bool:
        best = self.best()
        return best is not None and self.history[-1].iteration - best.iteration >= patience


class Trainer:
    """One training run in `work_dir` (resumed when it holds the same settings' checkpoint)."""

    def __init__(self, settings: Settings, oracles: list[Oracle], work_dir: Path, runner: Runner) -> None:
        """`oracles`: of the training paths, then of the validation paths."""
        self.settings, self.oracles, self.work_dir, self.runner = settings, oracles, work_dir, runner
        self.state_file = work_dir / "state.json"
        self.data_file = work_dir / "dataset.npz"
        self.state = State(settings.digest(), [o.cwnd_packets for o in oracles])
        self.data = Episodes.empty(settings.max_decisions)
        self.params: model.Params = model.init(settings.hidden, settings.seed)
        """In the space of standardised inputs (`mean`, `std`); `controller()` is the weights file's."""
        self.mean = np.zeros(model.INPUTS)
        self.std = np.ones(model.INPUTS)
        if self.state_file.exists():
            self._resume()

    def weights_file(self, iteration: int) -> Path:
        """The network trained in `iteration` (rolled out in the next)."""
        return self.work_dir / f"iteration-{iteration}.safetensors"

    def controller(self) -> model.Params:
        return model.fold(self.params, self.mean, self.std)

    def _resume(self) -> None:
        saved = json.loads(self.state_file.read_text())
        if saved.get("digest") != self.state.digest:
            raise PantheonError(f"{self.work_dir} holds a training with other settings; give another --work-dir "
                                f"or remove it")
        self.state.history = [Iteration(**h) for h in saved["history"]]
        if self.state.history:
            self.data = Episodes.load(self.data_file)
            with np.load(self.network_file) as network:
                self.mean, self.std = network["mean"], network["std"]
                self.params = {name: network[name] for name in model.TENSORS}

    @property
    def network_file(self) -> Path:
        return self.work_dir / "network.npz"

    def _checkpoint(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.data.save(self.data_file)
        tmp = self.network_file.with_name("network.tmp.npz")
        np.savez(tmp, mean=self.mean, std=self.std, **self.params)
        tmp.replace(self.network_file)
        model.save(self.controller(), self.weights_file(self.state.history[-1].iteration))
        tmp = self.state_file.with_name("state.json.tmp")
        tmp.write_text(json.dumps({"digest": self.state.digest, "oracles": self.state.oracles,
                                   "history": [asdict(h) for h in self.state.history]}, indent=1) + "\n")
        tmp.replace(self.state_file)

    def done(self) -> bool:
        history = self.state.history
        return bool(history) and (history[-1].iteration >= self.settings.iterations
                                  or self.state.stalled(self.settings.patience))

    def next_iteration(self) -> int:
        return self.state.history[-1].iteration + 1 if self.state.history else 0

    def rollout(self, policy: str, params: model.Params, seed: int,
                halve_at: list[int] | None = None) -> tuple[Episodes, list[Result], float]:
        """One episode per training and validation path with `policy` and the network `params`
        (one batch), path i's seeded `seed + i` and halved at decision `halve_at[i]` when given;
        (episodes, results, wall s), episodes' `path` indexing `oracles`."""
        s = self.settings
        every = s.paths + s.validation
        halves: list[int | None] = list(halve_at) if halve_at is not None else [None] * len(every)
        jobs = [Job([FlowSpec(spec(policy, o, halve_at_decision=h))], p.options, s.runtime_s, seed + i)
                for i, (p, o, h) in enumerate(zip(every, self.oracles, halves))]
        started = time.monotonic()
        weights = weights_bytes(params)
        results = self.runner.run(jobs, [weights])
        while failed := [i for i, r in enumerate(results) if not r.ok and jobs[i].runtime_s / 2 >= SHORTEST_EPISODE_S]:
            jobs = [replace(job, runtime_s=job.runtime_s / 2) if i in failed else job for i, job in enumerate(jobs)]
            for i, result in zip(failed, self.runner.run([jobs[i] for i in failed], [weights])):
                results[i] = result
        return episodes(results, list(range(len(jobs))), s.max_decisions), results, time.monotonic() - started

    def iterate(self, on_loss: Callable[[int, float], None]) -> Iteration:
        """One DAgger iteration: rollouts, measures, aggregation, training (unless it is the
        last), checkpoint. `on_loss(step, loss)` is told the training loss as it goes."""
        s = self.settings
        k = self.next_iteration()
        policy = "expert" if k == 0 else "network"
        base_seed = (s.seed + k) * SEEDS_PER_ITERATION
        every = len(s.paths) + len(s.validation)
        rolled, results, rollout_s = self.rollout(policy, self.controller(), base_seed)
        trained = len(s.paths)
        new = rolled.part(slice(0, trained))
        held = float(_loss_fn()(self.controller(), new.inputs, new.expert, new.mask))
        scores = [score(r.flows[0]) for r in results]
        record = Iteration(k, policy, len(rolled), rollout_s, new.agreement(), held, new.tracking_error(self.oracles),
                           float(np.mean(scores[:trained])), all_tracking_error=rolled.tracking_error(self.oracles))
        if s.validation and policy == "network":
            validation = rolled.part(slice(trained, None))
            record.validation_agreement = validation.agreement()
            record.validation_tracking_error = validation.tracking_error(self.oracles)
            record.validation_score = float(np.mean(scores[trained:]))
        self.data = self.data.plus(new)
        rng = np.random.default_rng([s.seed, k])
        first, last = HALVE_AT_DECISIONS[0], max(HALVE_AT_DECISIONS[0], int(HALVE_AT_DECISIONS[1] * s.max_decisions))
        halved_errors = []
        for copy in range(s.halvings):
            halve_at = [int(d) for d in rng.integers(first, last + 1, every)]
            halved, _, halved_s = self.rollout(policy, self.controller(), base_seed + (1 + copy) * every, halve_at)
            self.data = self.data.plus(halved.part(slice(0, trained)))
            halved_errors.append(halved.tracking_error(self.oracles))
            record.episodes += len(halved)
            record.rollout_s += halved_s
            if copy == 0:
                record.halved_tracking_error = halved.part(slice(0, trained)).tracking_error(self.oracles)
        if halved_errors:
            record.all_tracking_error = float(np.mean([record.all_tracking_error, *halved_errors]))
        if policy == "network":
            for copy in range(s.explore):
                noisy = model.fold(perturbed(self.params, s.explore_noise, rng), self.mean, self.std)
                more, _, more_s = self.rollout(policy, noisy, base_seed + (1 + s.halvings + copy) * every)
                self.data = self.data.plus(more.part(slice(0, trained)))
                record.episodes += len(more)
                record.rollout_s += more_s
        self.state.history.append(record)
        if k == 0:
            self.mean, self.std = standardisation(self.data)
        if k < s.iterations and not self.state.stalled(s.patience):
            started = time.monotonic()
            self.params, record.train_loss = train(self.params, self.data, self.mean, self.std, s, s.seed + k,
                                                   on_loss)
            record.train_s = time.monotonic() - started
        self._checkpoint()
        return record

    def best_weights(self) -> Path:
        """The weights with the best held-out agreement (those rolled out in that iteration)."""
        best = self.state.best()
        if best is None:
            return self.weights_file(self.state.history[-1].iteration)
        return self.weights_file(best.iteration - 1)


def perturbed(params: model.Params, noise: float, rng: np.random.Generator) -> model.Params:
    """Each tensor plus Gaussian noise of `noise` times its RMS, drawn in the tensors' name order
    (not the dict's, which differs between trained and reloaded weights: a resumed run is the same)."""
    return {name: params[name] + rng.normal(0.0, noise * float(np.sqrt(np.mean(np.square(params[name])))),
                                            params[name].shape)
            for name in sorted(params)}


def standardisation(data: Episodes) -> tuple[np.ndarray, np.ndarray]:
    """Each input's mean and standard deviation over the recorded decisions (1 where constant)."""
    x = data.inputs[data.mask > 0].astype(np.float64)
    std = x.std(axis=0)
    return x.mean(axis=0), np.where(std > 1e-9, std, 1.0)


def weights_bytes(params: model.Params) -> bytes:
    from safetensors.numpy import save

    return save({name: np.ascontiguousarray(params[name], dtype=np.float32) for name in model.TENSORS})


@functools.cache
def _loss_fn():
    import jax

    return jax.jit(model.loss)


@functools.cache
def _updater(learning_rate: float):
    """One jitted Adam step (compiled once per process and shape, not per iteration)."""
    import jax
    import optax

    optimiser = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))

    @jax.jit
    def update(p, opt_state, x, y, m):
        value, grads = jax.value_and_grad(model.loss)(p, x, y, m)
        updates, opt_state = optimiser.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, value

    return optimiser, update


def train(params: model.Params, data: Episodes, mean: np.ndarray, std: np.ndarray, s: Settings, seed: int,
          on_loss: Callable[[int, float], None]) -> tuple[model.Params, float]:
    """`s.steps` Adam steps on minibatches of `s.batch` episodes, drawn in turn from seeded
    shuffles of the data set, inputs standardised by `mean` and `std`; the new weights (numpy, in
    that standardised space) and the mean loss of the last tenth of the steps."""
    import jax.numpy as jnp

    optimiser, update = _updater(s.learning_rate)
    rng = np.random.default_rng(seed)
    p = {name: jnp.asarray(value) for name, value in params.items()}
    opt_state = optimiser.init(p)
    order: list[int] = []
    losses = []
    for step in range(s.steps):
        while len(order) < s.batch:
            order += list(rng.permutation(len(data)))
        pick, order = np.asarray(order[:s.batch]), order[s.batch:]
        x = ((data.inputs[pick] - mean) / std).astype(np.float32)
        p, opt_state, value = update(p, opt_state, x, data.expert[pick], data.mask[pick])
        losses.append(value)
        if step % 10 == 9 or step == s.steps - 1:
            on_loss(step + 1, float(value))
    tail = [float(v) for v in losses[-max(1, s.steps // 10):]]
    return {name: np.asarray(value) for name, value in p.items()}, float(np.mean(tail))
