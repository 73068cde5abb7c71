"""The framework's step (framework.py, framework_rules.py): which frame of a training
framework a stack stands in, in dumps and in recorded samples, and rows a user adds."""

import json

import pytest

from profiles.pyspy import AnalysisOptions, analyze
from profiles.pyspy.errors import ProfileError
from profiles.pyspy.formats.raw import parse_raw_lines as parse_raw
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.rules.framework import (
    default_framework_rules,
    rules_of,
    site_text,
    stack_framework,
)
from profiles.pyspy.rules.rule_table import load_state_rules
from profiles.pyspy.rules.user_code import UserCode

# A rank of bench/targets/hf_job.py waiting in the Trainer's batch fetch, as py-spy dumped it
# (root first; transformers 5.25, accelerate 1.16).
HF_WAIT = (
    "<module> (hf_job.py:137)",
    "main (hf_job.py:132)",
    "Trainer.train (transformers/trainer.py:1591)",
    "Trainer._inner_training_loop (transformers/trainer.py:1675)",
    "Trainer._run_epoch (transformers/trainer.py:1918)",
    "Trainer.get_batch_samples (transformers/trainer.py:2340)",
    "Trainer._get_num_items_in_batch (transformers/trainer.py:2387)",
    "Accelerator.gather (accelerate/accelerator.py:3012)",
    "gather (accelerate/utils/operations.py:429)",
    "all_gather (torch/distributed/distributed_c10d.py:4287)",
    "c10d::Work::wait (libtorch_cpu.so)",
    "pthread_cond_wait (libc.so.6)",
)
HF_CALLBACK = (
    "<module> (hf_job.py:137)",
    "main (hf_job.py:132)",
    "Trainer.train (transformers/trainer.py:1591)",
    "Trainer._inner_training_loop (transformers/trainer.py:1675)",
    "Trainer._run_epoch (transformers/trainer.py:1994)",
    "CallbackHandler.on_step_end (transformers/trainer_callback.py:520)",
    "CallbackHandler.call_event (transformers/trainer_callback.py:545)",
    "Clock.on_step_end (hf_job.py:88)",
    "wait_for_lock (hf_job.py:73)",
    "clock_nanosleep (libc.so.6)",
)
DDP_BACKWARD = (
    "train_step (train.py:79)",
    "Tensor.backward (torch/_tensor.py:623)",
    "backward (torch/autograd/__init__.py:354)",
    "torch::autograd::Engine::execute (libtorch_cpu.so)",
    "c10d::Reducer::autograd_hook (libtorch_cpu.so)",
    "std::condition_variable::wait (libstdc++.so.6.0.30)",
)


def framework_of(frames, rules=None):
    return stack_framework(frames, rules or default_framework_rules(), UserCode().is_user)


def test_the_outer_framework_names_its_innermost_step_and_the_innermost_row_the_phase():
    found = framework_of(HF_WAIT)
    assert found == {
        "frame": "Trainer.get_batch_samples (transformers/trainer.py:2340)",
        "function": "Trainer.get_batch_samples",
        "framework": "transformers",
        "phase": "gather",  # accelerate's gather inside the Trainer's batch fetch
        "user_inside": False,
    }
    assert site_text("main (hf_job.py:132)", found) == (
        "`Trainer.get_batch_samples` (gather), called from `main (hf_job.py:132)`"
    )


def test_a_callback_of_the_users_is_called_from_the_framework_frame():
    found = framework_of(HF_CALLBACK)
    assert (found["function"], found["phase"], found["user_inside"]) == (
        "CallbackHandler.on_step_end", "callback", True)  # fmt: skip
    assert site_text("wait_for_lock (hf_job.py:73)", found) == (
        "`wait_for_lock (hf_job.py:73)`, called from `CallbackHandler.on_step_end` (callback)"
    )


def test_ddps_reducer_is_a_phase_under_the_backward_and_no_native_frame_is_named():
    found = framework_of(DDP_BACKWARD)
    assert (found["function"], found["phase"]) == ("Tensor.backward", "DDP backward")


def test_a_stack_without_framework_frames_has_none_and_the_sentence_is_the_users_frame():
    assert framework_of(("main (train.py:3)", "work (train.py:9)")) is None
    assert site_text("work (train.py:9)", None) == "`work (train.py:9)`"


def test_recorded_samples_carry_their_framework_frame_per_state_and_user_caller():
    lines = [
        "thread (1): MainThread;" + ";".join(HF_WAIT) + " 30",
        "thread (1): MainThread;" + ";".join(HF_CALLBACK) + " 10",
        "thread (1): MainThread;main (hf_job.py:132);work (hf_job.py:9) 5",
    ]
    stats = analyze(parse_raw(lines), AnalysisOptions(include_flamegraph=False))
    states = {s["state"]: s for s in stats["threads"][0]["states"]}
    (waits,) = states["collective"]["framework_callers"]
    assert waits["function"] == "Trainer.get_batch_samples" and waits["samples"] == 30
    assert waits["user_frame"] == "main (hf_job.py:132)" and waits["user_inside"] is False
    (idle,) = states["idle"]["framework_callers"]
    assert idle["user_frame"] == "wait_for_lock (hf_job.py:73)" and idle["user_inside"]
    assert "framework_callers" not in states["compute"]  # work() stands in no framework
    whole = {s["state"]: s for s in stats["states"]}
    assert whole["collective"]["framework_callers"][0]["percent"] == round(100 * 30 / 45, 2)


# The Trainer's batch fetch on the slow rank of bench/targets/hf_job.py: its dataset's
# __getitem__ spends all of its time in make_features (root first, as py-spy recorded it).
HF_FETCH = (
    *HF_WAIT[:5],
    "Trainer.get_batch_samples (transformers/trainer.py:2336)",
    "DataLoaderShard.__iter__ (accelerate/data_loader.py:587)",
    "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)",
    "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)",
    "Tokens.__getitem__ (hf_job.py:81)",
    "make_features (hf_job.py:67)",
)
HF_STEP = (
    *HF_WAIT[:4],
    "Trainer._run_epoch (transformers/trainer.py:1954)",
    "Trainer.training_step (transformers/trainer.py:2163)",
    "Tensor.backward (torch/_tensor.py:623)",
    "torch::autograd::Engine::execute (libtorch_cpu.so)",
)


def test_a_straggler_in_a_dataset_is_explained_by_its_innermost_function_and_the_fetch():
    def rank(*stacks):
        lines = ["thread (1): MainThread;" + ";".join(frames) + f" {n}" for frames, n in stacks]
        return dict(analyze(parse_raw(lines), AnalysisOptions(include_flamegraph=False)))

    waits = rank((HF_WAIT, 650), (HF_STEP, 350))
    slow = rank(
        (HF_FETCH, 400),
        ((*HF_FETCH, "make_features.<locals>.<genexpr> (hf_job.py:67)"), 300),
        (HF_STEP, 250),
        (HF_WAIT, 50),
    )
    report = analyze_job([("rank-0", waits), ("rank-1", slow)])
    straggler = report["straggler"]
    assert straggler["name"] == "rank-1", report
    # __getitem__ and make_features share 70%: the one whose own lines run comes first.
    first, second = straggler["explanation"][:2]
    assert first["function"] == "make_features (hf_job.py)" and first["delta"] == 70.0
    assert second["function"] == "Tokens.__getitem__ (hf_job.py)" and second["delta"] == 70.0
    fetch = first["framework_frame"]
    assert (fetch["function"], fetch["phase"], fetch["user_inside"]) == (
        "Trainer.get_batch_samples",
        "DataLoader fetch",
        True,
    )
    (finding,) = [f for f in report["findings"] if f["rule"] == "straggler"]
    assert (
        "+70.0 pts more than them in `make_features (hf_job.py)`, called from "
        "`Trainer.get_batch_samples` (DataLoader fetch)" in finding["advice"]
    ), finding["advice"]


@pytest.mark.parametrize("form", ["json", "text"])
def test_a_user_adds_a_framework_row_in_the_state_rules_file(tmp_path, form):
    path = tmp_path / f"rules.{form}"
    if form == "json":
        path.write_text(json.dumps([{"state": "step", "framework": "mytrainer",
                                     "phase": "training step", "name": "Loop.train_step",
                                     "file": "mytrainer/loop.py"}]))  # fmt: skip
    else:
        path.write_text("step mytrainer (training step): Loop.train_step in mytrainer/loop.py\n")
    rules = load_state_rules(path)
    stack = ("main (run.py:5)", "Loop.train_step (mytrainer/loop.py:40)", "time_sleep (libc.so.6)")
    found = framework_of(stack, rules_of(rules))
    assert (found["framework"], found["function"], found["phase"]) == (
        "mytrainer", "Loop.train_step", "training step")  # fmt: skip
    assert framework_of(stack) is None  # not a built-in row
    assert all(r.state not in ("step", "phase") for r in rules.rules)  # no state rule


def test_a_framework_row_without_its_framework_or_phase_is_refused(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"state": "step", "name": "Loop.train_step"}]))
    with pytest.raises(ProfileError, match="needs a framework and a phase"):
        load_state_rules(path)
