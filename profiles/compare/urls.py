"""Routes for comparisons and trends (namespace "compare", included at the site root)."""

from django.urls import path

from profiles.compare import groups as compare_groups
from profiles.compare import trends as trend_views
from profiles.compare import views as compare_views

app_name = "compare"
urlpatterns = [
    path("compare/", compare_views.compare, name="compare"),
    path("compare/groups/", compare_groups.compare_groups, name="compare_groups"),
    path("compare/diff.json", compare_views.diff_flamegraph, name="diff_flamegraph"),
    path("trends/", trend_views.trends, name="trends"),
    path("trends.json", trend_views.trends_data, name="trends_data"),
    path("runs/<int:pk>/trends.json", trend_views.run_trends, name="run_trends"),
]
