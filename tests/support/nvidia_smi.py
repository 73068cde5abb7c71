"""A stand-in `nvidia-smi` for hosts without a GPU: it prints nvidia-smi's documented
CSV formats (`--format=csv,noheader,nounits`) for the two queries flamedeck asks,
replaying a scenario the test describes. Nothing of the product uses it.

    --query-gpu=FIELDS [--loop-ms=N]   one line per GPU per tick: timestamp (local time,
                                       "YYYY/MM/DD HH:MM:SS.mmm"), index, uuid,
                                       utilization.gpu, utilization.memory, memory.used,
                                       memory.total, power.draw, as FIELDS asks
    --query-compute-apps=FIELDS        one line per process: pid, gpu_uuid, used_memory

The scenario is JSON at $FLAMEDECK_NVSMI_SCENARIO:
    {"gpus": [{"index": 0, "uuid": "GPU-…", "util": [90, 0, …] or "[N/A]",
               "mem_used": 40000, "mem_total": 81559, "power": 300.5 or "[N/A]"}],
     "apps": [[pid, "GPU-…", 40000 or "[N/A]"]], "fail": "message (exit 9)"}
`util` is replayed one value a tick, cycling. Each call is appended to $0.calls.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write_scenario(folder: Path, scenario: dict) -> dict[str, str]:
    """A bin folder with `nvidia-smi` in it and the scenario; the env to put it on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "nvidia_smi.py"} "$@"\n')
    script.chmod(0o755)
    path = folder / "scenario.json"
    path.write_text(json.dumps(scenario))
    return {"PATH": f"{folder}:/usr/local/bin:/usr/bin:/bin", "FLAMEDECK_NVSMI_SCENARIO": str(path)}


def _value(gpu: dict, field: str, tick: int) -> str:
    util = gpu.get("util", 0)
    values = {
        "index": gpu["index"],
        "uuid": gpu["uuid"],
        "utilization.gpu": util if isinstance(util, str) else util[tick % len(util)],
        "utilization.memory": gpu.get("mem_util", "[N/A]"),
        "memory.used": gpu.get("mem_used", 0),
        "memory.total": gpu.get("mem_total", 81559),
        "power.draw": gpu.get("power", "[N/A]"),
        "timestamp": datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3],
    }
    return str(values.get(field, "[Not Supported]"))


def main(argv: list[str]) -> int:
    scenario = json.loads(Path(os.environ["FLAMEDECK_NVSMI_SCENARIO"]).read_text())
    with open(os.environ["FLAMEDECK_NVSMI_SCENARIO"] + ".calls", "a") as calls:
        calls.write(" ".join(argv) + "\n")
    if scenario.get("fail"):
        print(scenario["fail"])
        return 9
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    if "--query-compute-apps" in opts:
        for pid, uuid, used in scenario.get("apps", []):
            print(f"{pid}, {uuid}, {used}")
        return 0
    fields = opts["--query-gpu"].split(",")
    loop_ms = int(opts.get("--loop-ms", "0"))
    tick = 0
    while True:
        for gpu in scenario["gpus"]:
            print(", ".join(_value(gpu, f, tick) for f in fields), flush=True)
        if not loop_ms:
            return 0
        tick += 1
        time.sleep(loop_ms / 1000)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
