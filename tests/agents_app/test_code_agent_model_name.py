"""An agent brought as code that names the offline demo model (`model="demo-offline"`, as the README's demo
agents and a newcomer without a key would) runs in a fresh process. Before, the demo model was registered in
ADK's LLMRegistry only when one of adkweb's own agents had been built in that process, so in a new web process
or worker the code agent's first turn failed ("ValueError: Model demo-offline not found. A bare model name
resolves only for the providers ADK registers directly...") and `/api/adk/run` answered 500. Shown in a
subprocess: the test process has long imported the demo model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN = textwrap.dedent(
    """
    import django
    django.setup()
    from agents_app import code_apps
    for name in ("my_agent", "yaml_app"):
        agent = code_apps.root_agent(code_apps.load(name))
        print(name, type(agent.canonical_model).__name__, agent.canonical_model.model)
    """
)


def test_a_code_agent_naming_the_demo_model_finds_it_in_a_fresh_process(tmp_path):
    (tmp_path / "my_agents.py").write_text(
        "from google.adk.agents import Agent\n\n"
        'root_agent = Agent(name="my_agent", model="demo-offline", instruction="Tell people the weather.")\n'
    )
    (tmp_path / "agents" / "yaml_app").mkdir(parents=True)
    (tmp_path / "agents" / "yaml_app" / "root_agent.yaml").write_text(
        "name: yaml_agent\nmodel: demo-offline\ninstruction: Summarise.\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": f"{ROOT}:{tmp_path}",
        "DJANGO_SETTINGS_MODULE": "adkweb.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "ADKWEB_CODE_AGENTS": "my_agent=my_agents.root_agent",
        "ADKWEB_AGENTS_DIR": str(tmp_path / "agents"),
    }
    done = subprocess.run([sys.executable, "-c", RUN], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["my_agent DemoLlm demo-offline", "yaml_app DemoLlm demo-offline"]
