"""Apps users bring as code, unchanged: ADK agents or `App`s by dotted path (ADKWEB_CODE_AGENTS)
and an ADK agents folder (ADKWEB_AGENTS_DIR) loaded with ADK's own loader, as `adk api_server` does."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


class CodeAppError(ValueError):
    """A code-defined app that cannot be loaded or is misnamed."""


def _is_dotted(key: str) -> bool:
    return "." in key  # app names are identifiers; a key with a dot is a bare dotted path


def _import(dotted: str) -> Any:
    try:
        return import_string(dotted)
    except Exception as exc:
        raise CodeAppError(f"Cannot import {dotted}: {exc}") from exc


def _own_name(obj: Any) -> str:
    return str(getattr(obj, "name", "") or "")


def dotted_apps() -> dict[str, str]:
    """ADKWEB_CODE_AGENTS as app name -> dotted path; a bare path is named after its App or agent."""
    out: dict[str, str] = {}
    for key, dotted in dict(getattr(settings, "ADKWEB_CODE_AGENTS", {})).items():
        if _is_dotted(key):
            try:
                out[_own_name(_import(key)) or key] = key
            except CodeAppError:
                out[key.rsplit(".", 1)[-1]] = key  # listed, and its card shows the import error
        else:
            out[key] = dotted
    return out


@functools.cache
def _loader(agents_dir: str) -> Any:
    from google.adk.cli.utils.agent_loader import AgentLoader

    return AgentLoader(agents_dir)


def agents_dir_loader() -> Any | None:
    """ADK's AgentLoader for ADKWEB_AGENTS_DIR (None when not set)."""
    agents_dir = getattr(settings, "ADKWEB_AGENTS_DIR", "")
    return _loader(str(agents_dir)) if agents_dir else None


def code_apps() -> dict[str, str]:
    """Every code-defined app: name -> where it comes from (a dotted path, or the agents folder)."""
    out: dict[str, str] = {}
    loader = agents_dir_loader()
    if loader is not None:
        out.update({name: f"{loader.agents_dir}/{name}" for name in loader.list_agents()})
    out.update(dotted_apps())
    return out


def load(app_name: str) -> Any | None:
    """The ADK agent or App behind a code-defined app name (None if there is none). Asked at every
    claim (agents_app.run_cache.config_stamp): ADK's App is looked up only for a dotted app (google.adk.apps
    resolves it lazily, two imports a call). The offline demo model is registered in ADK's LLMRegistry first, so
    an agent that names it (`model="demo-offline"`, or `model: demo-offline` in a root_agent.yaml) finds it in
    any process, not only in one that had built one of adkweb's own agents before."""
    from agents_app.demo import model  # noqa: F401  (registers demo-offline: LLMRegistry.register(DemoLlm))

    dotted = dotted_apps().get(app_name)
    if dotted is not None:
        from google.adk.apps import App

        obj = _import(dotted)
        if isinstance(obj, App) and obj.name != app_name:
            raise CodeAppError(
                f"ADKWEB_CODE_AGENTS maps {app_name!r} to an App named {obj.name!r}: an App's name is its "
                f"app name, so write {obj.name}={dotted} (or {dotted} alone)."
            )
        return obj
    loader = agents_dir_loader()
    if loader is not None and app_name in loader.list_agents():
        try:
            return loader.load_agent(app_name)
        except Exception as exc:
            raise CodeAppError(f"Cannot load {app_name!r} from {loader.agents_dir}: {exc}") from exc
    return None


def language(app_name: str) -> str:
    """ "yaml" for an agents-folder app defined by root_agent.yaml (as ADK reports it), else "python"."""
    loader = agents_dir_loader()
    if loader is not None and app_name not in dotted_apps() and app_name in loader.list_agents():
        return str(loader._determine_agent_language(app_name))
    return "python"


def root_agent(obj: Any) -> Any:
    """The root agent of an App, or the agent itself."""
    from google.adk.apps import App

    return obj.root_agent if isinstance(obj, App) else obj
