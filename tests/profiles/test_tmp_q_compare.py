import json
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from tests.profiles.test_compare_views import make_capture

@pytest.mark.django_db
def test_counts(teammate_client):
    a, b = make_capture(2000, 620, minutes_ago=60), make_capture(2000, 120, minutes_ago=5)
    with CaptureQueriesContext(connection) as ctx:
        teammate_client.get(f"/compare/?a={a.pk}&b={b.pk}")
    print("page queries", len(ctx.captured_queries))
    with CaptureQueriesContext(connection) as ctx:
        data = teammate_client.get(f"/api/compare/?a={a.pk}&b={b.pk}").json()
    print("api queries", len(ctx.captured_queries))
    data["top_self"] = data["top_self"][:1]; data["keywords"] = data["keywords"][:1]; data["top_total"] = []
    print(json.dumps(data, indent=1))
