"""Every Celery task of ours names its queue (a worker started with `-Q agents` must see it):
explicitly, through task_routes or the task's own `queue`, never by falling to the default."""

from pathlib import Path

from django.apps import apps
from django.conf import settings

from adkweb.celery import app
from agents_app import enqueue
from agents_app.tasks import QUEUES


def _our_tasks() -> dict:
    app.loader.import_default_modules()  # what a worker does at startup: autodiscover tasks.py
    root = Path(settings.BASE_DIR)
    ours = tuple(
        f"{cfg.name}."
        for cfg in apps.get_app_configs()
        if Path(cfg.path).is_relative_to(root) and ".venv" not in Path(cfg.path).parts
    )
    assert "agents_app." in ours and "approvals." in ours
    return {name: task for name, task in app.tasks.items() if name.startswith(ours)}


def _named_queue(task) -> str | None:
    route = app.amqp.router.lookup_route(task.name, (), {}, {}, None) or {}
    queue = route.get("queue") or getattr(task, "queue", None)
    return getattr(queue, "name", queue)


def test_a_task_without_a_route_is_caught():
    class Stray:
        name = "elsewhere.tasks.stray"

    assert _named_queue(Stray()) is None


def test_every_task_of_our_apps_names_a_known_queue():
    tasks = _our_tasks()
    assert {"agents_app.tasks.session_drain", "agents_app.tasks.turns_requeue_owed"} <= set(tasks)
    assert enqueue.SESSION_DRAIN_TASK in tasks  # what agents_app.enqueue sends by name
    unnamed = {name: _named_queue(task) for name, task in tasks.items() if _named_queue(task) not in QUEUES}
    assert unnamed == {}, f"tasks that do not name a queue from agents_app.tasks.QUEUES: {unnamed}"


def test_sent_tasks_land_on_their_queue(monkeypatch):
    # A task without a route would fall to the default queue: make that one no worker reads.
    monkeypatch.setitem(app.conf, "task_default_queue", "no-route")
    assert app.amqp.router.route({}, "elsewhere.tasks.stray")["queue"].name == "no-route"
    for name in _our_tasks():
        assert app.amqp.router.route({}, name)["queue"].name in QUEUES


def test_the_beat_schedule_only_sends_our_registered_tasks():
    tasks = _our_tasks()
    assert app.conf.beat_schedule and all(entry["task"] in tasks for entry in app.conf.beat_schedule.values())
