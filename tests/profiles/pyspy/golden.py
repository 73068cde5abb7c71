"""Golden-file helper: compare with `<case>.expected.json`, rewrite on request.

Set FLAMEDECK_UPDATE_GOLDEN=1 to write or rewrite the expected files, then review the
diff. Without it a missing expected file fails the test: a golden test that writes its
own expectation would pass on whatever the code gives.
"""

import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "pyspy"
UPDATE = "FLAMEDECK_UPDATE_GOLDEN"


def check_golden(case: str, actual: object, data: Path = DATA) -> None:
    path = data / f"{case}.expected.json"
    text = json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get(UPDATE) == "1":
        path.write_text(text, encoding="utf-8")
    elif not path.exists():
        pytest.fail(f"{path} is missing: write it with {UPDATE}=1, then review it", pytrace=False)
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text)
