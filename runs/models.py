"""Hosts a team profiles on, training runs, and the processes that make up a run."""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django.utils.deconstruct import deconstructible

from config.params import pid_validators
from profiles.pyspy.job import AXES
from runs.remote import model as remote_checks

MAX_LIBRARY_ENTRIES, MAX_LIBRARY_ENTRY = 200, 300


def validate_library_paths(value: str) -> None:
    """At most 200 lines of at most 300 printable characters (a run's library paths)."""
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    if len(lines) > MAX_LIBRARY_ENTRIES:
        raise ValidationError(f"at most {MAX_LIBRARY_ENTRIES} library entries, one per line")
    for line in lines:
        if len(line) > MAX_LIBRARY_ENTRY or not line.isprintable():
            raise ValidationError(
                f"each library entry is one printable line of at most {MAX_LIBRARY_ENTRY} "
                f"characters: {line[:60]!r}"
            )


def validate_step_threads(value: str) -> None:
    """Printable thread names (or tids), separated by commas or spaces."""
    if not value.isprintable():
        raise ValidationError("thread names are printable text, separated by commas")


class Tag(models.Model):
    """A short label shared by runs and captures (e.g. baseline, after-fix)."""

    name = models.SlugField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


@deconstructible
class BuilderCheck:
    """A field validator running one of the command builder's own checks
    (runs.remote.model), so a value the builder would refuse is never saved."""

    def __init__(self, check: str) -> None:
        self.check = check

    def __call__(self, value: object) -> None:
        if value in ("", None):
            return
        try:
            getattr(remote_checks, self.check)(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BuilderCheck) and other.check == self.check

    def __hash__(self) -> int:
        return hash(self.check)


validate_address = BuilderCheck("check_address")
validate_username = BuilderCheck("check_username")
validate_exec_prefix = BuilderCheck("split_exec_prefix")
validate_py_spy = BuilderCheck("check_py_spy")
validate_port = BuilderCheck("check_port")


class Host(models.Model):
    """A machine (or container on it) that training processes run on."""

    # Fields that decide what runs where: only host administrators change them,
    # and every change is recorded in HostChange.
    COMMAND_FIELDS = ("transport", "address", "port", "username", "exec_prefix", "py_spy", "sudo")
    # What a user edits (the form and the API): how to reach the host.
    EDITABLE_FIELDS = (
        "name",
        "transport",
        "address",
        "port",
        "username",
        "exec_prefix",
        "py_spy",
        "sudo",
        "notes",
    )

    class Transport(models.TextChoices):
        LOCAL = "local", "Local (this machine)"
        SSH = "ssh", "SSH"

    name = models.CharField(max_length=100, unique=True)
    transport = models.CharField(max_length=10, choices=Transport.choices, default=Transport.SSH)
    address = models.CharField(
        max_length=255,
        blank=True,
        help_text="Host name, IP address or an alias from ~/.ssh/config.",
        validators=[validate_address],
    )
    port = models.PositiveIntegerField(null=True, blank=True, validators=[validate_port])
    username = models.CharField(max_length=100, blank=True, validators=[validate_username])
    exec_prefix = models.CharField(
        max_length=300,
        blank=True,
        help_text="Wraps every command, e.g. `pct exec 200 --` or `docker exec -i trainer`.",
        validators=[validate_exec_prefix],
    )
    py_spy = models.CharField(
        "py-spy path", max_length=300, default="py-spy", validators=[validate_py_spy]
    )
    sudo = models.BooleanField(default=False, help_text="Run commands through `sudo -n`.")
    notes = models.TextField(blank=True)
    last_check = models.JSONField(null=True, blank=True, editable=False)
    last_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("administer_hosts", "Create hosts and change how they are reached (host admins)")
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:host_detail", args=[self.pk])

    def clean(self) -> None:
        if self.transport == self.Transport.SSH and not self.address:
            raise ValidationError({"address": "An SSH host needs an address or ssh alias."})

    @property
    def is_local(self) -> bool:
        return self.transport == self.Transport.LOCAL

    @property
    def reach(self) -> str:
        """How the host is reached, in one short line for lists."""
        if self.transport == self.Transport.LOCAL:
            where = "local"
        else:
            user = f"{self.username}@" if self.username else ""
            port = f":{self.port}" if self.port else ""
            where = f"ssh {user}{self.address}{port}"
        return f"{where} → {self.exec_prefix}" if self.exec_prefix else where


class Run(models.Model):
    """A training job: the unit whose captures a team compares over time."""

    class Status(models.TextChoices):
        PLANNED = "planned", "Planned"
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Scheduled captures: a group capture every N minutes while the run is running
    # (0 = off). Only the newest `schedule_keep` scheduled captures stay.
    schedule_every_min = models.PositiveIntegerField(default=0)
    schedule_keep = models.PositiveIntegerField(default=50)
    schedule_last_at = models.DateTimeField(null=True, blank=True, editable=False)
    # "Capture all" settings last used on this run (duration, rate, native, ...), so
    # the dialog opens with them next time.
    capture_settings = models.JSONField(default=dict, blank=True)
    # Set only on runs created by `POST /api/register/`: unique, so ranks registering
    # at the same instant get one run, not one each.
    register_key = models.CharField(
        max_length=200, null=True, blank=True, unique=True, editable=False
    )
    # Code that is not the team's own, beyond the standard library and well-known
    # packages: one package name or path prefix per line (profiles/pyspy/rules/user_code.py).
    library_paths = models.TextField(
        blank=True,
        validators=[validate_library_paths],
        help_text="Library code, not yours: one package name or path prefix per line "
        "(e.g. megatron, src/vendor/, /opt/venv/). Findings point past it to your code.",
    )

    # The threads that run the training step, when the whole-job report should not
    # guess them (profiles/pyspy/rules/step_threads.py): names or tids.
    step_threads = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_step_threads],
        help_text="Threads that run the training step, comma-separated (default: the "
        "threads that make collective calls).",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"])]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:run_detail", args=[self.pk])

    @property
    def step_thread_names(self) -> tuple[str, ...]:
        """`step_threads` as a tuple of names (split on commas and whitespace)."""
        return tuple(name for name in re.split(r"[,\s]+", self.step_threads) if name)

    @property
    def library_entries(self) -> tuple[str, ...]:
        """`library_paths` as the analysis wants them: one entry per non-blank line."""
        return tuple(line.strip() for line in self.library_paths.splitlines() if line.strip())


class Launch(models.Model):
    """One launch of a run's job (runs.launches): the processes started together.

    `key` is what the ranks sent (`TORCHELASTIC_RUN_ID`, or `FLAMEDECK_LAUNCH` when set);
    empty when they sent none, then a launch begins when a role registers again after
    its process exited. `number` counts the run's launches from 1."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="launches")
    number = models.PositiveIntegerField()
    key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="unique_launch_number"),
        ]

    def __str__(self) -> str:
        return f"launch {self.number}"


class RunProcess(models.Model):
    """One process of a run on one host, with its role (e.g. target-0, rank 3).

    A process replaced by a later launch's process of the same role keeps its row
    (`replaced_at`, `replaced_by`): its captures stay, but nothing captures it again."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="processes")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="processes")
    pid = models.PositiveIntegerField(validators=pid_validators())
    role = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Last liveness check on the host: True alive, False exited, None not known
    # (never checked, or the host could not be asked).
    alive = models.BooleanField(null=True, blank=True, editable=False)
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    launch = models.ForeignKey(
        Launch, null=True, blank=True, on_delete=models.SET_NULL, related_name="processes"
    )
    replaced_at = models.DateTimeField(null=True, blank=True, editable=False)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    # Its place in the job's parallel layout, as the rank registered it ({"dp": 7,
    # "pp": 3}; profiles.pyspy.job.layout); None when not known.
    layout = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["role", "pid"]
        constraints = [
            models.UniqueConstraint(fields=["run", "host", "pid"], name="unique_process_per_run")
        ]

    def __str__(self) -> str:
        label = f" ({self.role})" if self.role else ""
        return f"{self.host.name}:{self.pid}{label}"

    @property
    def exited(self) -> bool:
        """The last check found the process gone (unknown counts as not exited)."""
        return self.alive is False

    @property
    def replaced(self) -> bool:
        """A later process of the same role took its place (runs.launches)."""
        return self.replaced_at is not None

    @property
    def layout_label(self) -> str:
        """`dp 7 · pp 3 · tp 0`: its place in the parallel layout, outermost axis first."""
        layout = self.layout if isinstance(self.layout, dict) else {}
        return " · ".join(f"{axis} {layout[axis]}" for axis in reversed(AXES) if axis in layout)


class HostChange(models.Model):
    """One change of a host's name or command fields (Host.COMMAND_FIELDS): who, when,
    what, and how (`via`: web, api, admin, shell, bootstrap). Written by runs.audit;
    kept when the host is deleted (`host` becomes null, `host_name` stays)."""

    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    host_name = models.CharField(max_length=100, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)
    # {"field": [before, after], ...}; before is None when the host was created.
    changes = models.JSONField()
    via = models.CharField(max_length=20, default="web")

    class Meta:
        ordering = ["-changed_at", "-pk"]

    def __str__(self) -> str:
        who, when = self.changed_by or "(no user)", f"{self.changed_at:%Y-%m-%d %H:%M}"
        return f"{self.host_name} changed by {who} via {self.via} at {when}"


class ApiToken(models.Model):
    """An API key for `Authorization: Token <key>`. Only its SHA-256 is stored; the key
    is shown once, by `manage.py create_api_token`."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(
        max_length=8, help_text="The key's first characters, to tell keys apart."
    )
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
