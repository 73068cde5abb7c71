"""A big speedscope file is read as a stream: memory grows with distinct stacks, not samples.

The parse runs in a fresh child process and reads its own peak RSS (VmHWM: ru_maxrss
would carry over the forking test process's peak through exec); the bound is generous
(a multiple of the file size) and does not depend on timing.
"""

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
THREADS = 8
SAMPLES_PER_THREAD = 12_000
DISTINCT_STACKS = 250  # py-spy repeats a few hundred stacks in time order
PEAK_GROWTH_LIMIT = 1.0
"""Peak RSS growth of the parse, as a multiple of the (uncompressed) file size.
Holding the decoded document took 10x; the stream keeps ~8 bytes a sample."""

CHILD = """
import json, sys
from pathlib import Path
from profiles import pyspy

def peak_kb():
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0])

before = peak_kb()
profile = pyspy.read_profile(sys.argv[1])
after = peak_kb()
print(json.dumps({"growth_kb": after - before, "samples": sum(profile.self_count),
                  "skipped": profile.skipped_lines}))
"""


def _pyspy_like_speedscope(path: Path) -> int:
    """py-spy's shape: profiles before shared, one per thread, deep stacks repeated in
    time order, weights in seconds. Returns the uncompressed size."""
    rng = random.Random(7)
    frames = [
        {"name": f"f{i}", "file": f"/src/m{i % 50}.py", "line": i, "col": None} for i in range(3000)
    ]
    stacks = [
        ",".join(str(rng.randrange(3000)) for _ in range(rng.randrange(20, 80)))
        for _ in range(DISTINCT_STACKS)
    ]
    profiles = []
    for thread in range(THREADS):
        samples = ",".join(f"[{rng.choice(stacks)}]" for _ in range(SAMPLES_PER_THREAD))
        weights = ",".join(["0.01"] * SAMPLES_PER_THREAD)
        profiles.append(
            f'{{"type":"sampled","name":"Thread {thread} \\"w{thread}\\"","unit":"seconds",'
            f'"startValue":0.0,"endValue":250.0,"samples":[{samples}],"weights":[{weights}]}}'
        )
    text = (
        '{"$schema":"https://www.speedscope.app/file-format-schema.json",'
        f'"profiles":[{",".join(profiles)}],'
        f'"shared":{{"frames":{json.dumps(frames, separators=(",", ":"))}}},'
        '"activeProfileIndex":null,"exporter":"py-spy@0.4.0","name":"py-spy profile"}'
    ).encode()
    path.write_bytes(gzip.compress(text, compresslevel=1))  # stored files are gzip
    return len(text)


def test_parsing_a_20_mb_speedscope_file_grows_rss_by_less_than_its_size(tmp_path):
    path = tmp_path / "samples.speedscope.json.gz"
    size = _pyspy_like_speedscope(path)
    assert size > 20 * 1024 * 1024
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(done.stdout)
    assert figures["samples"] == THREADS * SAMPLES_PER_THREAD and figures["skipped"] == 0
    growth = figures["growth_kb"] * 1024
    assert growth < PEAK_GROWTH_LIMIT * size, (
        f"parse grew RSS by {growth / 2**20:.0f} MB for a {size / 2**20:.0f} MB file"
    )
