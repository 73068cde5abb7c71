"""Import a py-spy raw or speedscope file: `manage.py import_capture FILE [--log L]`."""

from contextlib import ExitStack
from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from config.params import cli_int
from profiles.captures import services
from profiles.storage.uploads import UploadTooLarge
from runs.models import Run


class Command(BaseCommand):
    help = "Store a py-spy raw or speedscope file (and its log) as a capture and analyse it."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--log", type=Path, help="py-spy's stdout, for the lag analysis")
        parser.add_argument("--run", type=cli_int(minimum=1))

    def handle(self, *args, file: Path, log: Path | None, run: int | None, **options):
        for path in filter(None, (file, log)):
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        run_obj = Run.objects.filter(pk=run).first() if run else None
        if run and run_obj is None:
            raise CommandError(f"no run {run}")
        with ExitStack() as stack:
            samples = stack.enter_context(file.open("rb"))
            log_fh = stack.enter_context(log.open("rb")) if log else None
            try:
                capture = services.capture_import(
                    user=None,
                    file=File(samples, name=file.name),
                    log=File(log_fh, name=log.name) if log_fh else None,
                    run=run_obj,
                )
            except UploadTooLarge as exc:
                raise CommandError(str(exc)) from None
        if capture.status == capture.Status.FAILED:
            raise CommandError(f"capture {capture.pk} failed: {capture.error}")
        samples = (capture.stats or {}).get("total_samples", 0)
        self.stdout.write(f"capture {capture.pk} {capture.status}: {samples} samples")
