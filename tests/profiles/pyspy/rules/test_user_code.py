""" "Your own code": the standard library and installed packages are skipped, on py-spy's
shortened file names and on full paths, plus whatever a run declares as library."""

import pytest

from profiles.pyspy.rules.states import UserCode, is_user_frame


@pytest.mark.parametrize(
    "frame",
    [
        "train_step (train.py:77)",
        "<module> (train.py:3)",
        "Block.forward (model/block.py:40)",
        "run (test.py:3)",  # a script named like the stdlib's test *package*
        "main (/home/me/project/train.py:10)",
        "<module> (<string>:2)",
        "loop (flameshow:6)",
    ],
)
def test_the_users_scripts_and_packages_are_user_code(frame):
    assert is_user_frame(frame)


@pytest.mark.parametrize(
    "frame",
    [
        "Condition.wait (threading.py:331)",
        "Queue.get (queue.py:180)",
        "wait (multiprocessing/connection.py:947)",
        "_run_module_as_main (<frozen runpy>:198)",
        "Linear.forward (torch/nn/modules/linear.py:134)",
        "_exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)",
        "mean (numpy/core/_methods.py:10)",
        "f (/usr/lib/python3.11/threading.py:331)",
        "f (/opt/venv/lib/python3.12/site-packages/mylib/x.py:1)",
        "f (/usr/lib/python3/dist-packages/torch/nn/functional.py:1)",
        "cuLaunchKernel (libcuda.so.1)",  # native frames never are
        "thread (5066): trainer",
    ],
)
def test_the_standard_library_packages_and_native_frames_are_not(frame):
    assert not is_user_frame(frame)


def test_extra_library_entries_name_packages_path_prefixes_or_absolute_prefixes():
    spec = UserCode(["vendorlib", "src/third_party/", "/opt/models/"])
    assert not spec.is_user("f (vendorlib/core.py:1)")
    assert not spec.is_user("f (vendorlib.py:1)")
    assert not spec.is_user("f (src/third_party/x.py:1)")
    assert not spec.is_user("f (/opt/models/llama.py:1)")
    assert not spec.is_user("f (/home/me/app/vendorlib/core.py:1)")
    assert spec.is_user("f (vendorlibrary/x.py:1)")
    assert spec.is_user("f (src/mine.py:1)")
    assert is_user_frame("f (vendorlib/core.py:1)")
    assert not is_user_frame("f (vendorlib/core.py:1)", library=["vendorlib"])
