"""Benchmark: the seed's HTTP flow through ADK's own `adk api_server` and through adkweb, side by side.
Not a test: it prints figures.

    .venv/bin/python bench/http_flow.py [--rounds 40] [--warmup 3] [--only adk-pg,web-services]

The flow (the seed's client loop, over ADK's REST API): create a session; POST /run "Please reimburse
200$ for meals" (-> a long-running ask_for_approval call: a ticket); POST /run with the approved
FunctionResponse (same id and name) (-> reimburse, and the final reply). One agent for every server:
bench/agents/bench_reimbursement (the seed's tools on the offline demo model: no network).

Four servers run at once, each on a port of its own, and the rounds alternate between them (a round
runs the flow once on each, in a rotating order), so load from the rest of the machine hits them alike:

  adk-pg        adk api_server --session_service_uri postgresql+asyncpg://.../adkweb_bench_http_adk
  adk-sqlite    adk api_server --session_service_uri sqlite:///<tmp>/adk.sqlite3
  web-services  adkweb services mode: daphne + `celery worker`
                (BENCH_CELERY_POOL: threads as in production, or prefork; --concurrency 2), PostgreSQL
                (adkweb_bench_http_web) + Redis (BENCH_REDIS_URL, default DB 5); token auth
  web-embedded  adkweb embedded mode: daphne with the in-process worker, SQLite in <tmp>, in-memory layer

Databases are created for the run and dropped afterwards. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    BENCH,
    BIN,
    DB_PREFIX,
    REDIS_URL,
    ROOT,
    Server,
    adkweb_env,
    celery_worker_cmd,
    cpu_seconds,
    free_port,
    manage,
    pct,
    pg_create,
    pg_drop,
    redis_flush,
    rss_mb,
)
from fanout_probes import STAGE_PROBE, StepLog  # noqa: E402

APP = "bench_reimbursement"
USER = "approver"  # adkweb: the session's owner must be the caller, and an approver to answer the ticket
TEXT = "Please reimburse 200$ for meals"
STEPS = ("create", "run: message", "run: approval", "flow")
ADK_DB, WEB_DB, BASE_DB = f"{DB_PREFIX}_http_adk", f"{DB_PREFIX}_http_web", f"{DB_PREFIX}_http_base"
BASE_QUEUE = "agents_bench_base"  # the --base tree's drain queue (and wake-up list)
LABELS = {
    "adk-pg": "ADK api_server + PostgreSQL",
    "adk-sqlite": "ADK api_server + SQLite",
    "web-services": "adkweb services (daphne+celery, PG+Redis)",
    "web-embedded": "adkweb embedded (daphne+thread, SQLite)",
    "web-services@base": "adkweb services, --base tree",
    "web-embedded@base": "adkweb embedded, --base tree",
}


@dataclass
class Target:
    key: str
    base: str
    servers: list[Server]
    headers: dict[str, str] = field(default_factory=dict)
    ms: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STEPS})
    cpu_s: float = 0.0  # server CPU seconds spent during the timed rounds
    cpu_by: dict[str, float] = field(default_factory=dict)  # the same per server process (web, worker)
    cpu_step: dict[tuple[str, str], float] = field(default_factory=dict)  # (process, step) -> CPU seconds
    ended: dict[str, float] = field(default_factory=dict)  # each process's CPU when its last flow ended
    client: Any = None
    probe: Any = None  # --probe: HttpProbe of this target's servers


class HttpProbe(StepLog):
    """`--probe`: the servers' step lines (bench/resumeprobe/sitecustomize.py) during each /run, per step:
    when each tag was first written, ms after the client sent the request (wall clock)."""

    def __init__(self) -> None:
        super().__init__("adkweb-http-probe-")
        self.samples: dict[str, list[dict[str, float]]] = {}

    def sample(self, step: str, sent: float, got: float) -> None:
        start = self.offset
        first = self.window(sent, got)
        first["= answer received"] = (got - sent) * 1000
        self.samples.setdefault(step, []).append(first)
        if os.environ.get("BENCH_PROBE_DUMP"):  # every line of this sample, in order (a timeline, not a p50)
            with open(self.path) as f:
                f.seek(start)
                lines = f.read(self.offset - start).splitlines()
            print(f"--- {step}: {(got - sent) * 1000:.2f} ms")
            for line in lines:
                tag, at, pid, thread = line.split()
                if sent <= float(at) <= got:
                    print(f"  {(float(at) - sent) * 1000:8.2f} {self.pids.get(pid, pid)} {thread[-4:]} {tag}")

    def report(self, key: str) -> None:
        for step, samples in self.samples.items():
            print(f"\n{key}, {step}: first time each step was written, ms after the request was sent ({len(samples)})")
            self.print_steps(samples, 36)


def adk_server(key: str, uri: str) -> Target:
    port = free_port()
    cmd = [str(BIN / "adk"), "api_server", "--port", str(port), "--log_level", "warning"]
    cmd += ["--session_service_uri", uri, "--artifact_service_uri", "memory://", str(BENCH / "agents")]
    env = adkweb_env("")  # PYTHONPATH for the agent's import of the demo model
    server = Server(key, cmd, env, port).start()
    return Target(key, f"http://127.0.0.1:{port}", [server])


def adkweb_target(key: str, database_url: str, redis_url: str, root: Path = ROOT, probe: bool = False) -> Target:
    """Migrate, create the approver and a token, start daphne (and a celery worker in services mode),
    from the source tree `root`."""
    env = adkweb_env(database_url, redis_url, root, ADKWEB_CODE_AGENTS=f"{APP}={APP}.agent.root_agent")
    if redis_url:
        env.update(ADKWEB_EMBEDDED_WORKER="false", CHANNELS_PREFIX="adkweb-bench-http")
        if root != ROOT:  # another tree's servers share the Redis DB: their own channel and broker keys
            shim = Path(tempfile.mkdtemp(prefix="adkweb-bench-base-")) / "bench_base_settings.py"
            # ... and their own drain queue, so also their own wake-up list (agents_app.wake.key): the two
            # trees' workers popped each other's wake-ups and ran drains on the wrong database.
            shim.write_text(
                "from adkweb.settings import *  # noqa: F403\n"
                "from kombu import Queue\n"
                "CELERY_BROKER_TRANSPORT_OPTIONS = {'global_keyprefix': 'bench-base:'}\n"
                f"CELERY_TASK_QUEUES = (Queue('{BASE_QUEUE}'), Queue('notifications'))\n"
                f"CELERY_TASK_DEFAULT_QUEUE = '{BASE_QUEUE}'\n"
                "CELERY_TASK_ROUTES = {**CELERY_TASK_ROUTES, 'agents_app.tasks.*': {'queue': '%s'}, "
                "'approvals.tasks.*': {'queue': '%s'}}\n" % (BASE_QUEUE, BASE_QUEUE)
            )
            env.update(CHANNELS_PREFIX="adkweb-bench-http-base", DJANGO_SETTINGS_MODULE="bench_base_settings")
            env["PYTHONPATH"] = f"{shim.parent}{os.pathsep}{env['PYTHONPATH']}"
    manage(env, "migrate", "--noinput", root=root)
    found = HttpProbe() if probe else None
    if found is not None:
        env.update(PYTHONPATH=os.pathsep.join([str(STAGE_PROBE), env["PYTHONPATH"]]), BENCH_PROBE_LOG=found.path)
    manage(env, "demo_setup", "--allow-deployed", root=root)  # a local bench, reachable by nobody else
    key_ = manage(env, "create_api_token", USER, root=root).strip()
    port = free_port()
    daphne = [str(BIN / "daphne"), "-p", str(port), "adkweb.asgi:application"]
    servers = [Server(f"{key}-web", daphne, env, port, cwd=root)]
    if redis_url:  # as the Procfile runs it
        worker = celery_worker_cmd()
        if root != ROOT:
            worker[worker.index("-Q") + 1] = BASE_QUEUE
        servers.append(Server(f"{key}-worker", worker, env, cwd=root))
    for s in servers:
        s.start()
    target = Target(key, f"http://127.0.0.1:{port}/api/adk", servers, {"Authorization": f"Token {key_}"})
    target.probe = found
    return target


def _after(t: Target) -> None:
    """Count with its flow the CPU a server spent after the flow's last answer, until its next flow
    starts (work it put off: e.g. embedded mode's emails, which wait for a quiet moment)."""
    for s in t.servers:
        if s.name in t.ended:
            spent = cpu_seconds(s.pid) - t.ended.pop(s.name)
            t.cpu_s += spent
            t.cpu_by[s.name] = t.cpu_by.get(s.name, 0.0) + spent
            t.cpu_step[(s.name, "after")] = t.cpu_step.get((s.name, "after"), 0.0) + spent


def _cpu_mark(t: Target, step: str, marks: dict[str, float]) -> None:
    """Add each server process's CPU since the last mark to `step` (with the step's request: /run's
    worker CPU goes on while the request waits for the turn, and is counted with its step)."""
    for s in t.servers:
        now = cpu_seconds(s.pid)
        if s.name in marks:
            t.cpu_step[(s.name, step)] = t.cpu_step.get((s.name, step), 0.0) + now - marks[s.name]
        marks[s.name] = now


def flow(t: Target, record: bool) -> None:
    """The seed's client loop once; checks what each step returns."""
    c = t.client
    marks: dict[str, float] = {}
    if record:
        _cpu_mark(t, "", marks)
    # Each step is timed from its request to its checked answer; the bench's own work between steps (the CPU
    # marks: a scan of /proc per server process, ~3.5 ms each on a fast VM, so one more per step for a
    # server with a worker than for ADK's one process; the probe's read) is left out of every step's time.
    started = time.perf_counter()
    r = c.post(f"/apps/{APP}/users/{USER}/sessions", json={})
    r.raise_for_status()
    sid = r.json()["id"]
    t1 = time.perf_counter()
    if record:
        _cpu_mark(t, STEPS[0], marks)
    t1_sent = time.perf_counter()
    msg = {"role": "user", "parts": [{"text": TEXT}]}
    sent = time.time()
    r = c.post("/run", json={"appName": APP, "userId": USER, "sessionId": sid, "newMessage": msg})
    r.raise_for_status()
    events = r.json()
    call = next(
        p["functionCall"]
        for e in events
        for p in (e.get("content") or {}).get("parts", [])
        if "functionCall" in p and p["functionCall"]["id"] in (e.get("longRunningToolIds") or [])
    )
    t2 = time.perf_counter()
    if record and t.probe is not None:
        t.probe.sample(STEPS[1], sent, time.time())
    if record:
        _cpu_mark(t, STEPS[1], marks)
    t2_sent = time.perf_counter()
    fr = {"id": call["id"], "name": call["name"], "response": {"status": "approved"}}
    answer = {"role": "user", "parts": [{"functionResponse": fr}]}
    sent = time.time()
    r = c.post("/run", json={"appName": APP, "userId": USER, "sessionId": sid, "newMessage": answer})
    r.raise_for_status()
    final = "".join(p.get("text", "") for e in r.json() for p in (e.get("content") or {}).get("parts", []))
    if "reimbursed $200.00 for meals" not in final:
        raise RuntimeError(f"{t.key}: unexpected reply {final!r}")
    t3 = time.perf_counter()
    if record and t.probe is not None:
        t.probe.sample(STEPS[2], sent, time.time())
    if record:
        _cpu_mark(t, STEPS[2], marks)
        message, approval = t2 - t1_sent, t3 - t2_sent
        steps = (t1 - started, message, approval, t1 - started + message + approval)
        for step, ms in zip(STEPS, steps, strict=True):
            t.ms[step].append(ms * 1000)


def report(targets: list[Target], rounds: int) -> None:
    width = max(len(LABELS[t.key]) for t in targets) + 2
    head = "".join(f"{s + ' p50':>19}" for s in STEPS[:3]) + f"{'flow p50':>10}{'flow p95':>10}{'CPU/flow':>10}"
    print(f"{'server':<{width}}{head}")
    for t in targets:
        cells = "".join(f"{pct(t.ms[s], 0.5):>16.1f} ms" for s in STEPS[:3])
        flow_ms = t.ms["flow"]
        cpu = t.cpu_s * 1000 / max(len(flow_ms), 1)
        print(f"{LABELS[t.key]:<{width}}{cells}{pct(flow_ms, 0.5):>10.1f}{pct(flow_ms, 0.95):>10.1f}{cpu:>7.0f} ms")
    print(
        f"({rounds} rounds, ms per step; CPU/flow: CPU time of the server processes (incl. workers) per flow, "
        "with what they spent after its last answer until their next flow ('after'))"
    )
    split = []
    for t in targets:
        if len(t.cpu_by) > 1:
            per = {name: sec * 1000 / max(len(t.ms["flow"]), 1) for name, sec in t.cpu_by.items()}
            split.append(f"{t.key}: " + " + ".join(f"{name} {ms:.0f}" for name, ms in per.items()))
    if split:
        print("CPU/flow by process (ms): " + ";  ".join(split))
    for t in targets:
        if t.key.startswith("web-"):
            n = max(len(t.ms["flow"]), 1)
            cells = ", ".join(
                f"{step} {t.cpu_step.get((t.servers[0].name, step), 0.0) * 1000 / n:.1f}"
                for step in (*STEPS[:3], "after")
            )
            print(f"web process CPU per step (ms), {t.key}: {cells}")
    by = {t.key: t for t in targets}
    pairs = [("web-services", "adk-pg", "1.0x (stretch 0.6x)"), ("web-embedded", "adk-sqlite", "1.0x")]
    pairs += [(f"{k}@base", b, t) for k, b, t in pairs] + [(k, f"{k}@base", "-") for k, _, _ in pairs]
    print("\nratios (adkweb over ADK api_server on the same kind of database), target in brackets:")
    for ours, theirs, target in pairs:
        if ours in by and theirs in by:
            a, b = by[ours].ms["flow"], by[theirs].ms["flow"]
            steps = "  ".join(f"{s}: {pct(by[ours].ms[s], 0.5) / pct(by[theirs].ms[s], 0.5):.1f}x" for s in STEPS[:3])
            print(
                f"  {ours} / {theirs}: p50 {pct(a, 0.5) / pct(b, 0.5):.2f}x, p95 {pct(a, 0.95) / pct(b, 0.95):.2f}x"
                f"   [target <= {target}]   per step p50: {steps}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="timed rounds (default 40)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    parser.add_argument("--only", default="", help="comma-separated subset of " + ",".join(LABELS))
    parser.add_argument("--keep", action="store_true", help="leave the servers running until Enter (to profile)")
    parser.add_argument("--base", default="", help="also run adkweb from this source tree (before/after)")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="web-services (and @base): each /run's steps (bench/resumeprobe; BENCH_PROBE_DUMP=1: each sample's lines)",
    )
    args = parser.parse_args()
    import httpx

    keys = [k for k in LABELS if "@" not in k and (not args.only or k in args.only.split(","))]
    base = Path(args.base).resolve() if args.base else None
    if base is not None:
        keys += [f"{k}@base" for k in keys if k.startswith("web-")]
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="adkweb-bench-http-") as tmp:
        try:
            if "web-services" in keys:
                redis_flush(REDIS_URL)
            for key in keys:
                if key == "adk-pg":
                    pg_create(ADK_DB)
                    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{ADK_DB}"
                    targets.append(adk_server(key, url))
                elif key == "adk-sqlite":
                    targets.append(adk_server(key, f"sqlite:///{Path(tmp) / 'adk.sqlite3'}".replace(":///", ":////")))
                elif key == "web-services":
                    targets.append(adkweb_target(key, pg_create(WEB_DB), REDIS_URL, probe=args.probe))
                elif key == "web-embedded":
                    targets.append(adkweb_target(key, f"sqlite:///{Path(tmp) / 'web.sqlite3'}", ""))
                elif key == "web-services@base" and base is not None:
                    targets.append(adkweb_target(key, pg_create(BASE_DB), REDIS_URL, base, probe=args.probe))
                elif base is not None:
                    targets.append(adkweb_target(key, f"sqlite:///{Path(tmp) / 'base.sqlite3'}", "", base))
            for t in targets:
                for s in t.servers:
                    if s.port:
                        s.wait_port()
                t.client = httpx.Client(base_url=t.base, headers=t.headers, timeout=60)
            for _ in range(args.warmup):
                for t in targets:
                    flow(t, record=False)
            time.sleep(1)
            for i in range(args.rounds):
                # Rotated, and the other way round every other cycle: each server comes after each other one as
                # often. In one direction only, the server after ADK's SQLite (a rollback journal: its commits'
                # fsyncs) was that one 2 rounds in 3, and its approval step read 1.1-1.3x slower than the same
                # tree's in the other place (phase 14 (embedded)).
                cycle = targets if (i // len(targets)) % 2 == 0 else targets[::-1]
                order = cycle[i % len(targets) :] + cycle[: i % len(targets)]
                for t in order:
                    _after(t)
                    before = {s.name: cpu_seconds(s.pid) for s in t.servers}
                    flow(t, record=True)
                    for s in t.servers:
                        t.ended[s.name] = now = cpu_seconds(s.pid)
                        t.cpu_s += now - before[s.name]
                        t.cpu_by[s.name] = t.cpu_by.get(s.name, 0.0) + now - before[s.name]
            time.sleep(1)  # what the last flows left to do after their answers
            for t in targets:
                _after(t)
            print(
                f"seed flow: create session; /run {TEXT!r} -> ticket; /run approved FunctionResponse -> reimburse; "
                f"agent {APP} (offline demo model)"
            )
            report(targets, args.rounds)
            for t in targets:
                if t.probe is not None:
                    t.probe.report(t.key)
            print(
                "\nserver memory after the run (RSS, MiB): "
                + ", ".join(f"{t.key} {sum(rss_mb(s.pid) for s in t.servers):.0f}" for t in targets)
            )
            if args.keep:
                for t in targets:
                    print(t.key, t.base, [s.pid for s in t.servers])
                input("servers running; Enter stops them ")
        except BaseException:
            for t in targets:
                for s in t.servers:
                    sys.stderr.write(f"--- {s.name} output ---\n{s.tail()}\n")
            raise
        finally:
            for t in targets:
                if t.client:
                    t.client.close()
                for s in t.servers:
                    s.stop()
            if "adk-pg" in keys:
                pg_drop(ADK_DB)
            if "web-services" in keys:
                pg_drop(WEB_DB)
            if "web-services@base" in keys:
                pg_drop(BASE_DB)


if __name__ == "__main__":
    main()
