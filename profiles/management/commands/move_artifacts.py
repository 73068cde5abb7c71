"""Move capture artifacts between backends: `manage.py move_artifacts --to database`.

Run it before or after changing FLAMEDECK_ARTIFACTS; `--from` defaults to the current
setting. Names stay the same, so captures keep working once the setting points at the
destination. A source file is deleted only after its copy reads back with the same
size and SHA-256; an interrupted move is resumed by running it again.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from profiles.storage.move import MoveFailed, artifacts_move, storage_for


class Command(BaseCommand):
    help = "Copy capture artifacts to another backend (filesystem, database, s3://…)."

    def add_arguments(self, parser):
        parser.add_argument("--to", required=True, dest="destination")
        parser.add_argument("--from", dest="source", default=settings.FLAMEDECK_ARTIFACTS)
        parser.add_argument("--keep", action="store_true", help="leave the source files")

    def handle(self, *args, source: str, destination: str, keep: bool, **options):
        if source == destination:
            raise CommandError(f"--from and --to are both {source}")
        try:
            src, dst = storage_for(source), storage_for(destination)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        try:
            counts = artifacts_move(source=src, destination=dst, keep=keep)
        except MoveFailed as exc:
            raise CommandError(f"{exc}; nothing was lost, run the move again") from None
        self.stdout.write(
            f"{source} -> {destination}: {counts['moved']} moved, "
            f"{counts['already_there']} already there (same size and SHA-256), "
            f"{counts['recopied']} copied again (the copy there differed), "
            f"{counts['missing']} missing"
        )
        if settings.FLAMEDECK_ARTIFACTS != destination:
            self.stdout.write(f"Now set FLAMEDECK_ARTIFACTS={destination} everywhere.")
