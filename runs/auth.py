"""Authentication: `Authorization: Token <key>` against hashed keys (runs.tokens),
and the login throttle's backend."""

from axes.attempts import get_cool_off_threshold
from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from .tokens import api_token_user


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's token header, checked against ApiToken's SHA-256 (expiry, revocation)."""

    keyword = "Token"

    def authenticate_credentials(self, key: str):
        found = api_token_user(key)
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        user, token = found
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return user, token


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lock check for logins that come with a request (the login page, the
    admin's). `authenticate()` without one (the test client, a shell) has no address to
    throttle, so it is left to the next backend instead of raising."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class LoginThrottleHandler(AxesDatabaseHandler):
    """django-axes' lock of one user name from one address (AXES_FAILURE_LIMIT, 5),
    plus a lock of the address itself once its failures across every name reach
    FLAMEDECK_LOGIN_IP_FAILURE_LIMIT (20) within the cool-off: one address may not
    spray a few guesses at every account. axes has one limit for all its lockout
    parameters, hence this second one here."""

    def is_locked(self, request, credentials: dict | None = None) -> bool:
        return super().is_locked(request, credentials) or self._address_locked(request)

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs) -> None:
        # axes decides the lock of a failed attempt from its own count, not is_locked().
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is not None and not getattr(request, "axes_locked_out", False):
            request.axes_locked_out = self._address_locked(request)

    @staticmethod
    def _address_locked(request) -> bool:
        address = getattr(request, "axes_ip_address", None)
        if not address:
            return False
        recent = AccessAttempt.objects.filter(
            ip_address=address, attempt_time__gte=get_cool_off_threshold(request)
        )
        failures = recent.aggregate(n=Sum("failures_since_start"))["n"] or 0
        return failures >= settings.FLAMEDECK_LOGIN_IP_FAILURE_LIMIT
