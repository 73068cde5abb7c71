"""Hosts a team profiles on, training runs, and the processes that make up a run."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse


class Tag(models.Model):
    """A short label shared by runs and captures (e.g. baseline, after-fix)."""

    name = models.SlugField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def _reject_option_like(value: str, field: str) -> None:
    # ssh would read a leading "-" as an option (e.g. -oProxyCommand=...).
    if value.startswith("-") or any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise ValidationError(
            {field: "must not start with '-' or contain spaces or control characters"}
        )


class Host(models.Model):
    """A machine (or container on it) that training processes run on."""

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
    )
    port = models.PositiveIntegerField(null=True, blank=True)
    username = models.CharField(max_length=100, blank=True)
    exec_prefix = models.CharField(
        max_length=300,
        blank=True,
        help_text="Wraps every command, e.g. `pct exec 200 --` or `docker exec -i trainer`.",
    )
    py_spy = models.CharField("py-spy path", max_length=300, default="py-spy")
    sudo = models.BooleanField(default=False, help_text="Run commands through `sudo -n`.")
    notes = models.TextField(blank=True)
    last_check = models.JSONField(null=True, blank=True, editable=False)
    last_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:host_detail", args=[self.pk])

    def clean(self) -> None:
        if self.transport == self.Transport.SSH and not self.address:
            raise ValidationError({"address": "An SSH host needs an address or ssh alias."})
        if self.address:
            _reject_option_like(self.address, "address")
        if self.username:
            _reject_option_like(self.username, "username")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValidationError({"port": "Port must be between 1 and 65535."})

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

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"])]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:run_detail", args=[self.pk])


class RunProcess(models.Model):
    """One process of a run on one host, with its role (e.g. target-0, rank 3)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="processes")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="processes")
    pid = models.PositiveIntegerField()
    role = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role", "pid"]
        constraints = [
            models.UniqueConstraint(fields=["run", "host", "pid"], name="unique_process_per_run")
        ]

    def __str__(self) -> str:
        label = f" ({self.role})" if self.role else ""
        return f"{self.host.name}:{self.pid}{label}"
