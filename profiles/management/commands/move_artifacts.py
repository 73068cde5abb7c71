"""Move capture artifacts between backends: `manage.py move_artifacts --to database`.

Run it before or after changing FLAMEDECK_ARTIFACTS; `--from` defaults to the current
setting. Names stay the same, so captures keep working once the setting points at the
destination.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from profiles.artifacts import artifacts_move, storage_for


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
        counts = artifacts_move(source=src, destination=dst, keep=keep)
        self.stdout.write(
            f"{source} -> {destination}: {counts['moved']} moved, "
            f"{counts['already_there']} already there, {counts['missing']} missing"
        )
        if settings.FLAMEDECK_ARTIFACTS != destination:
            self.stdout.write(f"Now set FLAMEDECK_ARTIFACTS={destination} everywhere.")
