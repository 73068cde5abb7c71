"""Capture a process from a shell: `manage.py capture --host local --pid 1234`."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from config.params import PID_MAX, cli_int
from profiles.captures import pipeline, services
from profiles.models import Capture
from runs import capture_fields
from runs.models import Run
from runs.selectors import host_by_id_or_name


class Command(BaseCommand):
    help = (
        "Run py-spy against a process on a host and store the capture. By default it runs "
        "here and waits; --queue hands it to a Celery worker instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", required=True, help="host name, or id (ASCII digits)")
        parser.add_argument("--pid", type=cli_int(minimum=1, maximum=PID_MAX), required=True)
        parser.add_argument("--kind", choices=["record", "dump"], default="record")
        parser.add_argument("--run", type=cli_int(minimum=1), help="run id to file it under")
        parser.add_argument("--queue", action="store_true", help="let a worker run it")
        capture_fields.add_arguments(parser)  # --duration, --rate, --native/--no-native, ...

    def handle(self, *args, host: str, pid: int, kind: str, run: int | None, queue: bool, **opts):
        target = host_by_id_or_name(host)  # a name, else an id read by config.params
        if target is None:
            raise CommandError(f"no host {host!r}")
        settings = capture_fields.given_options(opts)
        run_obj = Run.objects.filter(pk=run).first() if run else None
        try:
            with transaction.atomic():
                capture = services.capture_create(
                    user=None,
                    host=target,
                    pid=pid,
                    kind=kind,
                    run=run_obj,
                    **settings,
                    enqueue=queue,
                )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        capture.refresh_from_db()
        if capture.is_final:  # bad host settings, or no broker to queue it on
            self._report(capture)
        if queue:
            self.stdout.write(f"capture {capture.pk} queued")
            return
        self.stdout.write(f"capture {capture.pk}: {kind} of {target.name}:{pid} …")
        pipeline.capture_execute(capture_id=capture.pk)
        self._report(Capture.objects.get(pk=capture.pk))

    def _report(self, capture: Capture) -> None:
        if capture.status == Capture.Status.FAILED:
            raise CommandError(
                f"capture {capture.pk} failed ({capture.error_cause}): {capture.error}"
            )
        stats = capture.stats or {}
        self.stdout.write(
            f"capture {capture.pk} {capture.status}: {stats.get('total_samples', 0)} samples"
        )
        for row in stats.get("categories", [])[:6]:
            if row["samples"]:
                self.stdout.write(f"  {row['category']:<14} {row['percent']:5.1f}%")
        if lag := stats.get("lag"):
            self.stdout.write(f"  sampler: {lag['verdict']} (max {lag['max_behind_s']} s behind)")
