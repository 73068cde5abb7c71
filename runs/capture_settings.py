"""The py-spy capture settings, declared once: each one's name, type, bounds, defaults
(a whole-job capture's too), help text and py-spy option, and the combinations py-spy
refuses to start with.

Everything that takes or shows them reads this table: the Capture model's fields
(profiles.models), the API's request and answer serializers and so the OpenAPI schema,
the "Capture all" settings remembered on a run, `manage.py capture`, the command
builder (runs.remote.build) and the capture dialogs, which get `describe()` as JSON.
`runs.capture_fields.clean` is the one validator. Standard library only: the remote
seam reads it too. tests/runs/test_capture_settings.py fails when a setting is added
here and not taken by one of them (or the other way round).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("record", "dump")


@dataclass(frozen=True)
class Setting:
    """One py-spy setting of a capture."""

    name: str
    """Its name in the API, on the Capture model, in a run's remembered settings."""
    label: str
    """What the capture dialogs call it."""
    help: str
    """What it does, for tooltips, model help texts, the API reference and `--help`."""
    flag: str
    """The py-spy option it asks for: followed by the number, or alone when on."""
    default: int | bool
    """A one-process capture's default; its type is the setting's (int or bool)."""
    job_default: int | bool | None = None
    """A whole-job capture's default, where it differs."""
    minimum: int | None = None
    maximum: int | None = None
    maximum_setting: str = ""
    """A Django setting that caps it instead of `maximum` (a deployment's choice)."""
    unit: str = ""
    kinds: tuple[str, ...] = ("record",)
    """The captures it applies to: py-spy record, dump, or both."""

    @property
    def is_switch(self) -> bool:
        return isinstance(self.default, bool)

    def default_for(self, *, job: bool = False) -> int | bool:
        return self.job_default if job and self.job_default is not None else self.default


@dataclass(frozen=True)
class Conflict:
    """Settings py-spy refuses together: it exits at once, so a capture asking for
    them is refused before a worker is sent to find out."""

    settings: tuple[str, ...]
    """All of these on together."""
    field: str
    """The setting a refusal names."""
    message: str
    kinds: tuple[str, ...] = ("record",)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "duration", "Duration", "Seconds of sampling. flamedeck stops py-spy after this "
        "many seconds of wall-clock time (py-spy's own --duration counts samples, so a "
        "sampler that falls behind would run on).", "--duration", 30,
        minimum=1, maximum_setting="FLAMEDECK_MAX_DURATION_S", unit="s",
    ),
    Setting(
        "rate", "Rate", "Samples a second asked of py-spy. With native frames, on a "
        "process with many threads, py-spy keeps up with about 20; the capture page "
        "says when it fell behind and which rate would have kept up.", "--rate", 20,
        minimum=1, maximum=2000, unit="Hz",
    ),
    Setting(
        "native", "native", "C, C++ and CUDA frames as well as Python's (cuLaunchKernel, "
        "cudaStreamSynchronize, the caching allocator). py-spy pauses the process to "
        "read them.", "--native", True, kinds=("record", "dump"),
    ),
    Setting(
        "threads", "threads", "Each stack under its thread's id and name: the "
        "per-thread breakdown, thread filters and thread states need it.", "--threads",
        True,
    ),
    Setting(
        "idle", "idle", "Keep the samples of threads that wait. Without it py-spy drops "
        "a blocked thread's samples, so waits for data, collectives or the GIL do not "
        "show; on by default for a whole-job capture, whose point is those waits.",
        "--idle", False, job_default=True,
    ),
    Setting(
        "gil", "gil", "Keep only the samples of the thread that holds the GIL: what runs "
        "Python code. Threads waiting for the GIL, or working without it (most CUDA and "
        "NCCL calls), leave no samples.", "--gil", False,
    ),
    Setting(
        "nonblocking", "non-blocking", "Sample without pausing the process: less "
        "overhead on the job, but a stack read while it changes may be wrong. py-spy "
        "refuses it with native frames.", "--nonblocking", False,
    ),
    Setting(
        "subprocesses", "subprocesses", "Sample the process's child processes too "
        "(data loader workers, for example); each stack starts with its process.",
        "--subprocesses", False, job_default=True,
    ),
    Setting(
        "dump_locals", "with locals", "Each frame's local variables as well (py-spy dump "
        "--locals); everyone who may see the capture sees them.", "--locals", False,
        kinds=("dump",),
    ),
)  # fmt: skip

CONFLICTS: tuple[Conflict, ...] = (
    # py-spy 0.4: "Can't get native stack traces with the --nonblocking option."
    Conflict(
        ("native", "nonblocking"),
        "nonblocking",
        "native stacks need py-spy to pause the process: turn off native or non-blocking",
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

# A record of one of flamedeck's own processes (runs.own_processes, host admins only)
# samples without pausing it unless asked otherwise: a blocking 2,000 Hz capture of the
# web server made its answers 5-20x slower. Native frames need a pause, so they are off.
OWN_PROCESS_DEFAULTS: dict[str, bool] = {"nonblocking": True, "native": False}


def own_process_settings(given: Mapping[str, Any]) -> dict[str, Any]:
    """A record's settings for one of flamedeck's own processes: OWN_PROCESS_DEFAULTS
    unless `given` says `nonblocking` (then native frames as usual)."""
    return dict(given) if "nonblocking" in given else {**OWN_PROCESS_DEFAULTS, **given}


def names(kind: str | None = None) -> list[str]:
    """The settings' names in table order; with `kind`, those that apply to it."""
    return [s.name for s in SETTINGS if kind is None or kind in s.kinds]


def defaults(*, job: bool = False) -> dict[str, int | bool]:
    """Every setting's default, a whole-job capture's when `job`."""
    return {s.name: s.default_for(job=job) for s in SETTINGS}


def conflicts_in(values: Mapping[str, Any], *, kind: str) -> list[Conflict]:
    """The refused combinations `values` asks for."""
    return [
        c for c in CONFLICTS if kind in c.kinds and all(values.get(n) is True for n in c.settings)
    ]


def switch_flags(values: Mapping[str, Any], *, kind: str = "record") -> list[str]:
    """The py-spy options of the switches of `kind` that are on, in table order
    (ValueError for a switch that is not a bool: it would reach a command line)."""
    flags = []
    for setting in SETTINGS:
        if not setting.is_switch or kind not in setting.kinds:
            continue
        value = values[setting.name]
        if not isinstance(value, bool):
            raise ValueError(f"{setting.name} must be a bool, not {value!r}")
        flags += [setting.flag] if value else []
    return flags


def describe(*, maximums: Mapping[str, int]) -> dict[str, Any]:
    """The table as JSON for the capture dialogs (`maximums`: the Django settings
    that cap a setting, by name)."""
    return {
        "settings": [
            {
                "name": s.name,
                "label": s.label,
                "help": s.help,
                "flag": s.flag,
                "type": "bool" if s.is_switch else "int",
                "default": s.default,
                "jobDefault": s.default_for(job=True),
                "minimum": s.minimum,
                "maximum": maximums[s.maximum_setting] if s.maximum_setting else s.maximum,
                "unit": s.unit,
                "kinds": list(s.kinds),
            }
            for s in SETTINGS
        ],
        "conflicts": [
            {"settings": list(c.settings), "field": c.field, "message": c.message,
             "kinds": list(c.kinds)}
            for c in CONFLICTS
        ],
    }  # fmt: skip
