"""Check the database and the Celery broker answer, in one clear line each."""

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
        db = connection.settings_dict["ENGINE"].rsplit(".", 1)[-1]
        broker = "redis" if settings.REDIS_URL else "filesystem (embedded)"
        self.stdout.write(f"flamedeck: database {db} ok, broker {broker} ok")

    def _check_redis(self, url: str) -> None:
        import redis

        try:
            redis.Redis.from_url(url, socket_connect_timeout=3).ping()
        except (redis.RedisError, OSError) as exc:
            raise CommandError(f"REDIS_URL: cannot reach Redis at {url}: {exc}") from None
