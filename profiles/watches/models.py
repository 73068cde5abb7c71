"""Regression watches: a baseline per rank, each later capture judged against it, and
the alerts and messages that follow (docs/watches.md). Imported by `models`."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.capture_settings import BY_NAME

DEFAULT_CAPTURE_ROUNDS = BY_NAME["duration"].default * BY_NAME["rate"].default
"""Sampling rounds of a capture with default settings (30 s at 20 Hz: 600): with --idle,
as a whole-job capture runs, a step thread gives one sample a round."""
DEFAULT_MIN_SAMPLES = DEFAULT_CAPTURE_ROUNDS // 2
"""A watch made with defaults judges its rank's default captures: half of their rounds,
so a capture that lost some to py-spy's lag is still judged (thresholds.JUDGE_MIN_SAMPLES
says why a floor this low is safe)."""


class NotifyTarget(models.Model):
    """A named place messages go: an Apprise URL. Only host admins create or change
    one (the URL is a request the server makes and often holds a token); operators
    attach watches to it by name. The URL is never shown back in full."""

    name = models.SlugField(max_length=50, unique=True)
    url = models.TextField(help_text="An Apprise URL, e.g. slack://…, json://host/path.")
    description = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def masked_url(self) -> str:
        from profiles.watches.notify import mask_url

        return mask_url(self.url)


class Watch(models.Model):
    """Every later done capture of one rank of a run (its `role`, in any launch of the
    run, or one `process` when the process has no role) is judged against `baseline`;
    moves raise alerts. With `all_roles` the baseline is a whole-job capture and each
    later whole-job capture's ranks are judged against its rank of the same role, with
    one message per whole-job capture."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="watches")
    role = models.CharField(max_length=100, blank=True)
    all_roles = models.BooleanField(
        default=False, help_text="Watch every role of the run's whole-job captures."
    )
    process = models.ForeignKey(
        "runs.RunProcess", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    baseline = models.ForeignKey(
        "profiles.Capture", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    min_effect_points = models.FloatField(
        default=2.0, validators=[MinValueValidator(0.1), MaxValueValidator(100)]
    )
    min_samples = models.PositiveIntegerField(
        default=DEFAULT_MIN_SAMPLES,
        validators=[MinValueValidator(100), MaxValueValidator(10_000_000)],
    )
    targets = models.ManyToManyField(NotifyTarget, blank=True, related_name="watches")
    snoozed_until = models.DateTimeField(null=True, blank=True)
    # The series test's latest result: [{key, index, capture, before_mean, ...}].
    shifts = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Watch #{self.pk} of {self.run} {self.rank_label}"

    def get_absolute_url(self) -> str:
        return reverse("watches:watch_detail", args=[self.pk])

    @property
    def rank_label(self) -> str:
        if self.all_roles:
            return "all roles"
        if self.role:
            return self.role
        return str(self.process) if self.process_id else "(process gone)"

    @property
    def snoozed(self) -> bool:
        return bool(self.snoozed_until and self.snoozed_until > timezone.now())


class Judgement(models.Model):
    """One capture judged against its watch's baseline: the verdict, the rows that
    moved, and the tracked shares the series test reads."""

    class Verdict(models.TextChoices):
        CHANGED = "changed", "real change"
        UNCHANGED = "unchanged", "within noise"
        TOO_FEW = "too few samples", "too few samples"
        NO_BASELINE = "no baseline", "no baseline"
        NOT_COMPARABLE = "not comparable", "not comparable (settings differ)"

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="judgements")
    capture = models.ForeignKey(
        "profiles.Capture", on_delete=models.CASCADE, related_name="judgements"
    )
    baseline = models.ForeignKey(
        "profiles.Capture", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(max_length=20, choices=Verdict.choices)
    reason = models.TextField(blank=True)
    rows_compared = models.PositiveIntegerField(default=0)
    moved = models.JSONField(default=list, blank=True)
    # {key: [samples, total]} of the tracked rows (states, categories, baseline frames)
    shares = models.JSONField(default=dict, blank=True)
    options = models.JSONField(default=dict, blank=True)
    snoozed = models.BooleanField(default=False)
    judged_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-judged_at"]
        constraints = [
            models.UniqueConstraint(fields=["watch", "capture"], name="one_judgement_per_capture")
        ]

    def __str__(self) -> str:
        return f"#{self.capture_id} vs #{self.baseline_id}: {self.verdict}"


class Alert(models.Model):
    """One change of one row (`key`, `direction` +1 up / -1 down). While it is open no
    other alert of the same row and direction opens; it resolves when the share
    returns, and an acknowledged one no longer holds the next alert back."""

    class Status(models.TextChoices):
        OPEN = "open", "open"
        ACKNOWLEDGED = "acknowledged", "acknowledged"
        RESOLVED = "resolved", "resolved (share returned)"
        REBASELINED = "rebaselined", "closed (baseline changed)"

    class Source(models.TextChoices):
        PAIR = "pair", "capture vs baseline"
        SERIES = "series", "shift in the series"

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="alerts")
    judgement = models.ForeignKey(
        Judgement, null=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    key = models.TextField()
    # The rank's role: an all-roles watch keeps one alert per role, row and direction.
    role = models.CharField(max_length=100, blank=True)
    label = models.CharField(max_length=300)
    direction = models.SmallIntegerField()
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.PAIR)
    row = models.JSONField(default=dict)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    opened_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        indexes = [models.Index(fields=["watch", "status"])]

    def __str__(self) -> str:
        return f"{self.label} {'up' if self.direction > 0 else 'down'} ({self.status})"


class Delivery(models.Model):
    """One message to one target, sent by a Celery task with retries.

    pending → sending → sent | retrying → sending … | failed. A task claims the row
    with a conditional UPDATE, so a second message for it never sends twice."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SENDING = "sending", "sending"
        RETRYING = "retrying", "retrying"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    judgement = models.ForeignKey(Judgement, on_delete=models.CASCADE, related_name="deliveries")
    target = models.ForeignKey(
        NotifyTarget, null=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    target_name = models.CharField(max_length=50)
    title = models.CharField(max_length=300)
    body = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"to {self.target_name}: {self.status}"
