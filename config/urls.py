from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("", include("runs.urls")),
    path("", include("profiles.urls")),
    path("", include("profiles.compare_urls")),
    path("watches/", include("profiles.watch_urls")),
]
