"""The default framework-step table: which frames of known training frameworks mark
the phases of their step (plain records, read by framework.py).

A user extends it in the state-rules file (docs/states.md, "Framework steps"): rows
with `state` "step" or "phase" and a `framework` and `phase`. The fields are those of
state_rules.StateRule (name and file globs or `re:`, `kind`), plus:
- `state`: "step" for a frame that names where in the framework's step a thread is
  (`Trainer.training_step`); "phase" for a frame that only says more about what happens
  inside it (`c10d::Reducer::*` is DDP's backward all-reduce);
- `framework`: the framework the frame belongs to (transformers, lightning, ...);
- `phase`: the words a sentence shows beside it ("training step", "DDP backward").
On a stack, the framework of the outermost matching frame owns the step: its innermost
"step" frame is the one named, and the innermost matching frame of any framework gives
the phase: `Trainer.training_step` (DDP backward). Native frames never name the step.
Evidence: py-spy dumps of bench/targets/hf_job.py (transformers 5.25, accelerate 1.16) and
bench/targets/lightning_job.py (lightning 2.6), both on gloo; the DDP rows from
bench/targets/hang_train.py (tests/data/dumps).
"""

from __future__ import annotations

from .state_rules import StateRule

_HF = "transformers/trainer.py"
_ACC = "accelerate/*.py"
_PL = "lightning/pytorch/*"


def _step(framework: str, phase: str, names: str, file: str, state: str = "step"):
    return tuple(
        StateRule(state, n, file=file, kind="python", framework=framework, phase=phase)
        for n in names.split()
    )


DEFAULT_FRAMEWORK_RULES: tuple[StateRule, ...] = (
    # Hugging Face Trainer (transformers): the loop, the batch fetch (which also gathers
    # the token count across ranks: a collective), the step, evaluation, callbacks.
    *_step("transformers", "training loop", "Trainer._inner_training_loop", _HF),
    *_step("transformers", "batch fetch", "Trainer.get_batch_samples", _HF),
    *_step("transformers", "training step", "Trainer.training_step", _HF),
    *_step("transformers", "evaluation", "Trainer.evaluate Trainer.evaluation_loop", _HF),
    *_step("transformers", "evaluation step", "Trainer.prediction_step", _HF),
    *_step("transformers", "callback", "CallbackHandler.on_*", "transformers/trainer_callback.py"),
    # accelerate: named on its own in a hand-written accelerate loop, a phase under Trainer.
    *_step("accelerate", "backward", "Accelerator.backward", _ACC),
    *_step("accelerate", "gather", "Accelerator.gather Accelerator.gather_for_metrics", _ACC),
    *_step("accelerate", "reduce", "Accelerator.reduce", _ACC),
    *_step("accelerate", "optimizer step", "AcceleratedOptimizer.step", _ACC),
    *_step("accelerate", "DataLoader fetch", "DataLoaderShard.__iter__", _ACC),
    # Lightning: fit loop, a training batch, the step, backward and optimizer step of
    # the strategy, the validation loop; callbacks, the batch fetch and the per-batch
    # SIGTERM broadcast (a collective on every batch) as phases.
    *_step("lightning", "fit loop", "_FitLoop.run", _PL),
    *_step("lightning", "training batch", "_TrainingEpochLoop.advance", _PL),
    *_step("lightning", "training step", "Strategy.training_step *Strategy.training_step", _PL),
    *_step("lightning", "backward", "Strategy.backward *Strategy.backward", _PL),
    *_step("lightning", "optimizer step", "Strategy.optimizer_step *Strategy.optimizer_step", _PL),
    *_step("lightning", "validation loop", "_EvaluationLoop.run", _PL),
    *_step("lightning", "callback", "_call_callback_hooks", _PL, "phase"),
    *_step("lightning", "DataLoader fetch", "re:_\\w*DataFetcher.__next__", _PL, "phase"),
    *_step(
        "lightning",
        "SIGTERM broadcast",
        "_TrainingEpochLoop._broadcast_sigterm_tensor",
        _PL,
        "phase",
    ),  # fmt: skip
    # DeepSpeed's engine.
    *_step("deepspeed", "engine forward", "DeepSpeedEngine.forward", "deepspeed/runtime/engine.py"),
    *_step("deepspeed", "engine backward", "DeepSpeedEngine.backward", "deepspeed/runtime/*.py"),
    *_step("deepspeed", "engine step", "DeepSpeedEngine.step", "deepspeed/runtime/engine.py"),
    # torch: DDP's forward, the backward (DDP's reducer all-reduces inside it), the
    # DataLoader's fetch.
    *_step("torch", "DDP forward", "DistributedDataParallel.forward", "torch/nn/parallel/*.py"),
    *_step("torch", "backward", "Tensor.backward", "torch/_tensor.py"),
    *_step("torch", "DataLoader fetch", "_BaseDataLoaderIter.__next__", "torch/utils/data/*.py"),
    StateRule("phase", "c10d::Reducer::*", kind="native", framework="torch", phase="DDP backward"),
)
"""Framework rows, after any of the user's (the first matching row of a frame wins)."""
