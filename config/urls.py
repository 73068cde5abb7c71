from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from runs import urls as runs_urls
from runs.pages import urls as run_urls

# One `runs` namespace for the run and host pages: runs' own forms, and the pages that
# show captures (runs.pages, the one part of runs that reads profiles).
RUNS_PAGES = (runs_urls.urlpatterns + run_urls.urlpatterns, "runs")

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("", include(RUNS_PAGES)),
    path("", include("profiles.urls")),
    path("", include("profiles.compare.urls")),
    path("watches/", include("profiles.watches.urls")),
]
