"""The project's URLs and one view that fails, for the 500 page's test (tests/adkweb/bad_input/test_error_pages.py)."""

from django.urls import path

from adkweb.urls import handler404
from adkweb.urls import urlpatterns as project


def failing(request):
    raise RuntimeError("a bug")


urlpatterns = [path("fails/", failing), *project]
__all__ = ["handler404", "urlpatterns"]
