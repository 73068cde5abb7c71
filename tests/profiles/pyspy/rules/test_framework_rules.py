"""The default framework-step table (rules/framework_rules.py): it compiles, and each row
matches its framework's frame as py-spy prints it, and only there."""

import pytest

from profiles.pyspy.core.frames import is_python
from profiles.pyspy.rules.framework import FrameworkRules, default_framework_rules
from profiles.pyspy.rules.framework_rules import DEFAULT_FRAMEWORK_RULES
from profiles.pyspy.rules.state_rules import StateRule

# One frame per row, as py-spy names it by default (`name (package/file.py:line)`), from
# the dumps the table's evidence names: transformers 5.25, accelerate 1.16, lightning 2.6.
HF, ACC, PL = "transformers/trainer.py", "accelerate/accelerator.py", "lightning/pytorch"
DS = "deepspeed/runtime/engine.py"
FRAMES = {
    "Trainer._inner_training_loop": f"Trainer._inner_training_loop ({HF}:1675)",
    "Trainer.get_batch_samples": f"Trainer.get_batch_samples ({HF}:2340)",
    "Trainer.training_step": f"Trainer.training_step ({HF}:2412)",
    "Trainer.evaluate": f"Trainer.evaluate ({HF}:3126)",
    "Trainer.evaluation_loop": f"Trainer.evaluation_loop ({HF}:3260)",
    "Trainer.prediction_step": f"Trainer.prediction_step ({HF}:3445)",
    "CallbackHandler.on_*": "CallbackHandler.on_step_end (transformers/trainer_callback.py:520)",
    "Accelerator.backward": f"Accelerator.backward ({ACC}:2740)",
    "Accelerator.gather": f"Accelerator.gather ({ACC}:3012)",
    "Accelerator.gather_for_metrics": f"Accelerator.gather_for_metrics ({ACC}:3080)",
    "Accelerator.reduce": f"Accelerator.reduce ({ACC}:3170)",
    "AcceleratedOptimizer.step": "AcceleratedOptimizer.step (accelerate/optimizer.py:179)",
    "DataLoaderShard.__iter__": "DataLoaderShard.__iter__ (accelerate/data_loader.py:577)",
    "_FitLoop.run": f"_FitLoop.run ({PL}/loops/fit_loop.py:216)",
    "_TrainingEpochLoop.advance":
        f"_TrainingEpochLoop.advance ({PL}/loops/training_epoch_loop.py:297)",
    "Strategy.training_step": f"Strategy.training_step ({PL}/strategies/strategy.py:390)",
    "*Strategy.training_step": f"DDPStrategy.training_step ({PL}/strategies/ddp.py:338)",
    "Strategy.backward": f"Strategy.backward ({PL}/strategies/strategy.py:212)",
    "*Strategy.backward": f"DDPStrategy.backward ({PL}/strategies/ddp.py:301)",
    "Strategy.optimizer_step": f"Strategy.optimizer_step ({PL}/strategies/strategy.py:239)",
    "*Strategy.optimizer_step":
        f"DeepSpeedStrategy.optimizer_step ({PL}/strategies/deepspeed.py:640)",
    "_EvaluationLoop.run": f"_EvaluationLoop.run ({PL}/loops/evaluation_loop.py:145)",
    "_call_callback_hooks": f"_call_callback_hooks ({PL}/trainer/call.py:222)",
    "re:_\\w*DataFetcher.__next__": f"_PrefetchDataFetcher.__next__ ({PL}/loops/fetchers.py:134)",
    "_TrainingEpochLoop._broadcast_sigterm_tensor":
        f"_TrainingEpochLoop._broadcast_sigterm_tensor ({PL}/loops/training_epoch_loop.py:420)",
    "DeepSpeedEngine.forward": f"DeepSpeedEngine.forward ({DS}:1899)",
    "DeepSpeedEngine.backward": f"DeepSpeedEngine.backward ({DS}:2046)",
    "DeepSpeedEngine.step": f"DeepSpeedEngine.step ({DS}:2213)",
    "DistributedDataParallel.forward":
        "DistributedDataParallel.forward (torch/nn/parallel/distributed.py:1643)",
    "Tensor.backward": "Tensor.backward (torch/_tensor.py:623)",
    "_BaseDataLoaderIter.__next__":
        "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:733)",
    "c10d::Reducer::*": "c10d::Reducer::autograd_hook (libtorch_cpu.so)",
}  # fmt: skip
ROWS = list(enumerate(DEFAULT_FRAMEWORK_RULES))


def row_id(row):
    return f"{row[1].framework}:{row[1].name}"


def test_the_table_compiles_and_every_row_has_its_framework_phase_and_kind():
    rules = default_framework_rules()
    assert isinstance(rules, FrameworkRules)
    assert rules.rules == DEFAULT_FRAMEWORK_RULES
    for rule in DEFAULT_FRAMEWORK_RULES:
        assert isinstance(rule, StateRule)
        assert rule.state in ("step", "phase")
        assert rule.framework in ("transformers", "accelerate", "lightning", "deepspeed", "torch")
        assert rule.phase.strip() and rule.kind in ("python", "native")
        assert rule.kind == "native" or rule.file, "a Python row names its file"


def test_every_row_has_a_sample_frame_here():
    assert sorted(FRAMES) == sorted(rule.name for rule in DEFAULT_FRAMEWORK_RULES)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_each_row_matches_its_frameworks_frame_as_py_spy_prints_it(row):
    index, rule = row
    frame = FRAMES[rule.name]
    assert is_python(frame) == (rule.kind == "python")
    assert default_framework_rules().match(frame) == index
    full_path = frame.replace(" (", " (/venv/lib/python3.11/site-packages/", 1)
    if rule.kind == "python":
        assert default_framework_rules().match(full_path) == index


@pytest.mark.parametrize("row", [r for r in ROWS if r[1].kind == "python"], ids=row_id)
def test_the_same_function_in_the_users_own_file_matches_no_row(row):
    _, rule = row
    name = FRAMES[rule.name].split(" (")[0]
    assert default_framework_rules().match(f"{name} (train.py:10)") == -1


def test_a_step_row_names_the_step_only_for_its_own_framework_and_a_phase_row_never():
    rules = default_framework_rules()
    step = rules.match(FRAMES["Trainer.training_step"])
    assert rules.names_step(step, FRAMES["Trainer.training_step"], "transformers")
    assert not rules.names_step(step, FRAMES["Trainer.training_step"], "accelerate")
    phase = rules.match(FRAMES["_call_callback_hooks"])
    assert not rules.names_step(phase, FRAMES["_call_callback_hooks"], "lightning")


def test_native_names_match_without_their_parameter_lists():
    rules = default_framework_rules()
    frame = "c10d::Reducer::mark_variable_ready(c10d::Reducer::VariableIndex) (libtorch_cpu.so)"
    assert rules.rules[rules.match(frame)].phase == "DDP backward"
