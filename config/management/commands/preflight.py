"""Check the database, the Celery broker, S3 artifact storage and (with
COMPRESS_OFFLINE=1) the built static files, in one clear line each."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.utils import OperationalError


class Command(BaseCommand):
    help = "Check that the database and the Celery broker are reachable."

    def handle(self, *args, **options):
        try:
            connection.ensure_connection()
        except OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
            raise CommandError(f"DATABASE_URL: cannot connect to the database: {first}") from None
        if settings.REDIS_URL:
            self._check_redis(settings.REDIS_URL)
        if settings.FLAMEDECK_ARTIFACTS.startswith("s3://"):
            self._check_s3(settings.FLAMEDECK_ARTIFACTS)
        if settings.COMPRESS_OFFLINE:
            self._check_static()
        db = connection.settings_dict["ENGINE"].rsplit(".", 1)[-1]
        broker = "redis" if settings.REDIS_URL else "filesystem (embedded)"
        self.stdout.write(f"flamedeck: database {db} ok, broker {broker} ok")

    def _check_redis(self, url: str) -> None:
        import redis

        try:
            redis.Redis.from_url(url, socket_connect_timeout=3).ping()
        except (redis.RedisError, OSError) as exc:
            raise CommandError(f"REDIS_URL: cannot reach Redis at {url}: {exc}") from None

    def _check_s3(self, spec: str) -> None:
        from profiles.storage.artifacts import artifact_storage, artifacts_preflight

        problem = artifacts_preflight(storage=artifact_storage())
        if problem:
            raise CommandError(f"FLAMEDECK_ARTIFACTS={spec}: {problem}")

    def _check_static(self) -> None:
        root = settings.STATIC_ROOT
        if not (root / "staticfiles.json").exists() or not (root / "CACHE/manifest.json").exists():
            raise CommandError(
                f"COMPRESS_OFFLINE=1 but the static files in {root} are not built: "
                "run `make static` (collectstatic + compress) first"
            )
