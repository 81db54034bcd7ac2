""".env.example names every setting the code reads from the environment, and the README's configuration
reference documents each: a newcomer or an operator who copies .env.example sees every knob there is.
Read from the code itself (every os.environ.get / env_bool / env_list of a literal name in the apps), so a new
setting that is not written down fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adkweb", "agents_app", "approvals", "notifications")
READERS = {"get", "getenv", "env_bool", "env_list", "setdefault"}
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE"}  # which settings module: not a setting


def _names_read() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Subscript) and _is_environ(node.value):
                    key = node.slice
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        names.add(key.value)
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                func, first = node.func, node.args[0]
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name not in READERS or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if name in {"get", "setdefault"} and not (isinstance(func, ast.Attribute) and _is_environ(func.value)):
                    continue
                names.add(first.value)
    return {n for n in names if re.fullmatch(r"[A-Z][A-Z0-9_]+", n)} - NOT_SETTINGS


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def test_the_code_reads_settings_this_test_can_see():
    names = _names_read()
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "ADKWEB_LIVE_RECHECK_SECONDS", "EMAIL_USE_SSL"} <= names


def test_env_example_names_every_setting_the_code_reads():
    written = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    missing = sorted(_names_read() - written)
    assert not missing, f".env.example does not mention {missing}"


def test_the_readme_documents_every_setting_the_code_reads():
    readme = (ROOT / "README.md").read_text()
    missing = sorted(name for name in _names_read() if f"`{name}`" not in readme)
    assert not missing, f"README.md does not mention {missing}"
