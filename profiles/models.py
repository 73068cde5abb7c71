"""Captures (one py-spy record or dump), keyword sets, and the team's comments."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from config.params import pid_validators
from profiles.captures.comments import render_comment
from profiles.pyspy import keyword_problem
from profiles.storage.artifacts import artifact_storage
from runs import capture_settings
from runs.models import Host, Run, RunProcess, Tag


class KeywordSet(models.Model):
    """An ordered list of frame substrings, each in a category (launch, sync, ...)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_default", "name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("profiles:keywordset_detail", args=[self.pk])


def keyword_text_problem(category: str, keyword: str) -> str | None:
    """Why a keyword cannot be saved (too long, or refused by the engine: an invalid or
    catastrophically backtracking `re:` pattern, one matching every name), or None."""
    if len(category) > Keyword.CATEGORY_MAX:
        return f"a category has at most {Keyword.CATEGORY_MAX} characters"
    if len(keyword) > Keyword.KEYWORD_MAX:
        return f"a keyword has at most {Keyword.KEYWORD_MAX} characters"
    return keyword_problem(keyword)


class Keyword(models.Model):
    KEYWORD_MAX = 200
    CATEGORY_MAX = 50
    keyword_set = models.ForeignKey(KeywordSet, on_delete=models.CASCADE, related_name="keywords")
    position = models.PositiveIntegerField(default=0)
    keyword = models.CharField(max_length=KEYWORD_MAX)
    category = models.CharField(max_length=CATEGORY_MAX)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.category}: {self.keyword}"

    def clean(self) -> None:
        problem = keyword_problem(self.keyword)
        if problem:
            raise ValidationError({"keyword": problem})


class CaptureGroup(models.Model):
    """A whole-job capture: one capture of every process of a run, sampled in one
    window ("Capture all"). Pages and docs say "whole-job capture"; the code and the
    API path (`/api/groups/<id>/`) keep the name group."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="capture_groups")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    scheduled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # The scheduled instant every host samples from (profiles.jobs.schedule); each
    # host's task counts itself in `hosts_settled` once its session is up (or failed).
    hosts_total = models.PositiveIntegerField(default=0)
    hosts_settled = models.PositiveIntegerField(default=0)
    start_by = models.DateTimeField(null=True, blank=True)
    # The whole-job report (profiles/pyspy/job/report.py: ranks, straggler, classes, findings),
    # computed from the ranks' stored stats once every rank has ended; null before.
    job_report = models.JSONField(null=True, blank=True, editable=False)
    # Why the report could not be computed (the exception, one line); the report is
    # then "failed" rather than pending for ever, and the catch-up leaves it alone.
    report_error = models.TextField(blank=True, editable=False)
    # A whole-job dump ("Dump all ranks"): `py-spy dump` of every rank, `dump_repeat`
    # times `dump_interval_s` apart; `stacks` (profiles/pyspy/job/dump_verdict.py: the verdict and
    # the classes of ranks) is computed once, when the last rank's dumps are stored.
    kind = models.CharField(
        max_length=10,
        choices=[("record", "Record"), ("dump", "Dump")],
        default="record",
    )
    dump_repeat = models.PositiveSmallIntegerField(default=1)
    dump_interval_s = models.FloatField(default=1.0)
    stacks = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Whole-job capture #{self.pk} of {self.run}"

    def get_absolute_url(self) -> str:
        return reverse("profiles:group_detail", args=[self.pk])

    @property
    def report_status(self) -> str:
        """Whether its report (`stacks` for a dump) is "stored", "failed" (`report_error`
        says why) or "pending" (a rank has not ended, or the report is being stored)."""
        if (self.stacks if self.kind == "dump" else self.job_report) is not None:
            return "stored"
        return "failed" if self.report_error else "pending"


def setting_field(name: str) -> models.Field:
    """The Capture column of a py-spy setting: its type, default and help text."""
    setting = capture_settings.BY_NAME[name]
    if setting.is_switch:
        return models.BooleanField(default=setting.default, help_text=setting.help)
    return models.PositiveIntegerField(default=setting.default, help_text=setting.help)


def _capture_path(instance: "Capture", filename: str) -> str:
    return f"captures/{instance.queued_at:%Y/%m}/{instance.pk}/{filename}"


class Capture(models.Model):
    """One py-spy run against one process, and everything it produced.

    Status transitions (anything else is refused by `states.capture_transition`):
        queued   → running | failed | cancelled | parsing (imports)
        running  → parsing | failed | cancelled
                 → queued      (a transient failure, e.g. host unreachable, to retry)
        parsing  → done | failed
                 → cancelled   (a cancelled record keeps and analyses its samples)
        done     → parsing            (re-analysis with another keyword set)
        failed   → parsing            (re-analysis when the raw file was kept)
    Imports are created at parsing. A worker claims a queued capture with a conditional
    UPDATE, so a redelivered message never starts a second sampler; the analysis of a
    parsing capture is claimed the same way, so it runs once per hand-over.
    """

    class Kind(models.TextChoices):
        RECORD = "record", "Record"
        DUMP = "dump", "Dump"
        IMPORT = "import", "Import"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PARSING = "parsing", "Parsing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    TRANSITIONS = {
        Status.QUEUED: {Status.RUNNING, Status.FAILED, Status.CANCELLED, Status.PARSING},
        Status.RUNNING: {Status.PARSING, Status.FAILED, Status.CANCELLED, Status.QUEUED},
        Status.PARSING: {Status.DONE, Status.FAILED, Status.CANCELLED},
        Status.DONE: {Status.PARSING},
        Status.FAILED: {Status.PARSING},
        Status.CANCELLED: {Status.PARSING},
    }
    FINAL = (Status.DONE, Status.FAILED, Status.CANCELLED)

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="captures"
    )
    process = models.ForeignKey(
        RunProcess, null=True, blank=True, on_delete=models.SET_NULL, related_name="captures"
    )
    group = models.ForeignKey(
        CaptureGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="captures"
    )
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="captures"
    )
    pid = models.PositiveIntegerField(null=True, blank=True, validators=pid_validators())
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.RECORD)
    # py-spy settings: one column each, as runs.capture_settings declares them
    duration = setting_field("duration")
    rate = setting_field("rate")
    native = setting_field("native")
    threads = setting_field("threads")
    idle = setting_field("idle")
    gil = setting_field("gil")
    nonblocking = setting_field("nonblocking")
    subprocesses = setting_field("subprocesses")
    dump_locals = setting_field("dump_locals")
    scheduled = models.BooleanField(default=False)
    # state
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When py-spy announced that it samples (the start of the capture's window).
    sampling_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    worker = models.CharField(max_length=200, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    error_cause = models.CharField(max_length=40, blank=True)
    # The command's own words (ssh's or py-spy's stderr tail) under the friendly `error`.
    error_detail = models.TextField(blank=True)
    # Claims so far (1 on the first try); a transient failure retries until the limit.
    attempts = models.PositiveSmallIntegerField(default=0)
    # Each failed attempt that was retried or ended it: [{attempt, cause, message, at}],
    # so a capture keeps what happened on every try after the live "retrying" line is gone.
    attempt_log = models.JSONField(default=list, blank=True)
    # When the last task message was sent (plus its countdown) and how often the reaper
    # re-sent it: a queued capture whose message never arrived is re-sent or failed.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveSmallIntegerField(default=0)
    # The analysis of a parsing capture is claimed with a conditional UPDATE that sets
    # `analysis_started_at` (the claim's token; cleared at every hand-over to parsing),
    # so a second delivery of the same capture is a no-op; `analysis_attempts` counts
    # claims since the hand-over, and the reaper gives up on one that keeps dying.
    analysis_started_at = models.DateTimeField(null=True, blank=True)
    analysis_attempts = models.PositiveSmallIntegerField(default=0)
    note = models.TextField(blank=True, help_text="Non-fatal remarks, e.g. the process exited.")
    # data (raw and log are stored gzip-compressed)
    raw_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    raw_format = models.CharField(max_length=20, blank=True)
    raw_size = models.PositiveBigIntegerField(default=0)
    raw_pruned_at = models.DateTimeField(null=True, blank=True)
    log_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    flamegraph_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    # per-thread counts (profiles.pyspy.count.thread_tables), so a thread filter never re-reads raw
    threads_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    # when each sample was taken (profiles.pyspy.formats.time_track): each thread's samples in
    # order as lines of raw_file, on the host's clock; empty when the capture has no time
    time_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    # the samples in the other download format (speedscope for raw, folded for
    # speedscope), written once by the analysis so downloads never re-parse
    export_file = models.FileField(
        upload_to=_capture_path, storage=artifact_storage, blank=True, max_length=300
    )
    stats = models.JSONField(null=True, blank=True)
    gpu_samples = models.JSONField(null=True, blank=True)
    keyword_set = models.ForeignKey(
        KeywordSet, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tags = models.ManyToManyField(Tag, blank=True, related_name="captures")
    original_name = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-queued_at"]
        indexes = [
            models.Index(fields=["run", "-queued_at"]),
            models.Index(fields=["status", "-queued_at"]),
            models.Index(fields=["host", "pid", "-queued_at"]),
            models.Index(fields=["status", "heartbeat_at"]),
        ]
        permissions = [
            (
                "launch_capture",
                "Launch captures, edit runs and their processes, edit host notes (operators)",
            )
        ]

    def __str__(self) -> str:
        return f"Capture #{self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("profiles:capture_detail", args=[self.pk])

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def target_label(self) -> str:
        if self.host_id is None:
            return self.original_name or "imported"
        role = f" {self.process.role}" if self.process_id and self.process.role else ""
        return f"{self.host.name}:{self.pid}{role}"

    @property
    def samples_downloadable(self) -> bool:
        """Raw samples that parsed (a failed parse offers no sample downloads)."""
        return bool(self.raw_file) and not self.raw_pruned_at and self.stats is not None

    @property
    def pyspy_settings(self) -> dict[str, int | bool]:
        """Its py-spy settings, by name (runs.capture_settings)."""
        return {name: getattr(self, name) for name in capture_settings.names()}

    @property
    def pyspy_command(self) -> str:
        """What it asked of py-spy, as its page shows it (record or dump)."""
        flags = capture_settings.switch_flags(self.pyspy_settings, kind=self.kind)
        if self.kind == self.Kind.RECORD:
            flags = ["--rate", str(self.rate), "--duration", str(self.duration), *flags]
        return " ".join([self.kind, *flags])

    @property
    def lag_verdict(self) -> str | None:
        lag = (self.stats or {}).get("lag")
        return lag.get("verdict") if lag else None

    @property
    def wall_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Comment(models.Model):
    """A team member's note on a capture, optionally pinned to one frame.

    `body_html` is the Markdown `body` rendered and sanitised when the comment is
    saved (profiles.captures.comments), so showing a page never parses Markdown.
    """

    capture = models.ForeignKey(Capture, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    body = models.TextField()
    body_html = models.TextField(blank=True, editable=False)
    frame = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["capture", "created_at"])]

    def __str__(self) -> str:
        return f"Comment by {self.author} on #{self.capture_id}"

    def save(self, *args, **kwargs) -> None:
        self.body_html = render_comment(self.body)
        fields = kwargs.get("update_fields")
        if fields is not None and "body" in fields:
            kwargs["update_fields"] = {*fields, "body_html"}
        super().save(*args, **kwargs)


class Artifact(models.Model):
    """A stored file of `profiles.storage.database.DatabaseStorage`
    (FLAMEDECK_ARTIFACTS=database)."""

    name = models.CharField(max_length=300, unique=True)
    content = models.BinaryField()
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


# Regression watches (docs/watches.md): their own module, registered with this app here.
from profiles.watches.models import Alert, Delivery, Judgement, NotifyTarget, Watch  # noqa: E402, F401
