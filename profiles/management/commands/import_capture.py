"""Import a py-spy raw or speedscope file: `manage.py import_capture FILE [--log L]`."""

from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand, CommandError

from profiles import services
from runs.models import Run


class Command(BaseCommand):
    help = "Store a py-spy raw or speedscope file (and its log) as a capture and analyse it."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--log", type=Path, help="py-spy's stdout, for the lag analysis")
        parser.add_argument("--run", type=int)

    def handle(self, *args, file: Path, log: Path | None, run: int | None, **options):
        for path in filter(None, (file, log)):
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        run_obj = Run.objects.filter(pk=run).first() if run else None
        if run and run_obj is None:
            raise CommandError(f"no run {run}")
        capture = services.capture_import(
            user=None,
            file=SimpleUploadedFile(file.name, file.read_bytes()),
            log=SimpleUploadedFile(log.name, log.read_bytes()) if log else None,
            run=run_obj,
        )
        if capture.status == capture.Status.FAILED:
            raise CommandError(f"capture {capture.pk} failed: {capture.error}")
        samples = (capture.stats or {}).get("total_samples", 0)
        self.stdout.write(f"capture {capture.pk} {capture.status}: {samples} samples")
