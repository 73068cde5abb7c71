from django.conf import settings
from django.core.management.base import BaseCommand

from profiles.jobs.services import raw_prune


class Command(BaseCommand):
    help = "Delete the oldest raw capture files to stay under FLAMEDECK_RAW_BUDGET_MB."

    def add_arguments(self, parser):
        parser.add_argument("--budget-mb", type=float, default=settings.FLAMEDECK_RAW_BUDGET_MB)
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, *args, budget_mb: float, dry_run: bool, **options):
        result = raw_prune(budget_bytes=int(budget_mb * 1024 * 1024), dry_run=dry_run)
        verb = "would prune" if dry_run else "pruned"
        self.stdout.write(
            f"{verb} {result['pruned']} raw file(s), {result['freed_bytes'] / 1e6:.1f} MB; "
            f"{result['kept_bytes'] / 1e6:.1f} MB kept of a {budget_mb:.0f} MB budget"
        )
