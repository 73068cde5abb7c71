from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from profiles import run_urls
from runs import urls as runs_urls

# One `runs` namespace for the run and host pages: runs' own forms, and the pages that
# show captures, which live in profiles (profiles imports runs, never the reverse).
RUNS_PAGES = (runs_urls.urlpatterns + run_urls.urlpatterns, "runs")

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("", include(RUNS_PAGES)),
    path("", include("profiles.urls")),
    path("", include("profiles.compare_urls")),
    path("watches/", include("profiles.watch_urls")),
]
