"""Golden-file helper: compare with `<case>.expected.json`, rewrite on request.

Set FLAMEDECK_UPDATE_GOLDEN=1 to rewrite the expected files, then review the diff.
"""

import json
import os
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "pyspy"


def check_golden(case: str, actual: object, data: Path = DATA) -> None:
    path = data / f"{case}.expected.json"
    text = json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("FLAMEDECK_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text)
