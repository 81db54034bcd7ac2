"""ADK plugins adkweb adds to every app it runs (after the app's own plugins)."""

from __future__ import annotations

from typing import Any

from google.adk.plugins.base_plugin import BasePlugin


def accepts_will_continue(model: Any) -> bool:
    """Only the Gemini Developer API takes `FunctionResponse.will_continue`; google-genai refuses
    it in Vertex AI mode (True or False) before sending, and other backends have no such field."""
    from google.adk.models.google_llm import Gemini
    from google.adk.utils.variant_utils import GoogleLLMVariant

    return isinstance(model, Gemini) and model._api_backend == GoogleLLMVariant.GEMINI_API


class BackendFieldsPlugin(BasePlugin):
    """Send each model only the function-response fields its backend accepts.

    Answers are stored exactly as sent; an intermediate one carries `will_continue=True`. The
    whole history is resent on every model call, so the field is dropped from the request (never
    from the stored events) for backends that refuse it, e.g. Gemini on Vertex AI.
    """

    def __init__(self) -> None:
        super().__init__(name="adkweb_backend_fields")

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        agent = callback_context._invocation_context.agent
        try:
            keep = accepts_will_continue(getattr(agent, "canonical_model", None))
        except Exception:  # e.g. a Gemini client that cannot be built: its own call will say why
            keep = False
        if keep:
            return None
        for content in llm_request.contents or []:
            # ADK copies each Content and Part for the request: replacing a Part's field here
            # leaves the session's events untouched.
            for part in content.parts or []:
                fr = part.function_response
                if fr is not None and fr.will_continue is not None:
                    part.function_response = fr.model_copy(update={"will_continue": None})
        return None

    async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any) -> None:
        confirmed_arguments(tool, tool_args, tool_context)
        return None


def confirmed_arguments(tool: Any, tool_args: dict[str, Any], tool_context: Any) -> None:
    """A confirmed call runs with the arguments its approval approved. ADK runs it with the model's
    arguments; an approver's edit travels in the confirmation's payload (approvals.payloads.with_edits),
    which only a tool that reads `tool_context.tool_confirmation.payload` would see. So the payload's
    values for the tool's parameters replace the call's here, in the very dict ADK then calls the tool
    with. adkweb refuses an approval whose payload gives an argument any other value than the one it
    approves (approvals.edits.answer_refusal): those values are the approved arguments, edited or not."""
    confirmation = getattr(tool_context, "tool_confirmation", None)
    payload = getattr(confirmation, "payload", None) if confirmation is not None else None
    if not (confirmation is not None and confirmation.confirmed and isinstance(payload, dict) and payload):
        return
    names = set(tool_args) | _parameters(tool)
    tool_args.update({name: value for name, value in payload.items() if name in names})


def _parameters(tool: Any) -> set[str]:
    """The names of the parameters the tool declares to the model (its context is not one)."""
    try:
        declaration = tool._get_declaration()
    except Exception:  # a tool that cannot say: the call's own arguments only
        return set()
    schema = getattr(declaration, "parameters_json_schema", None)
    if isinstance(schema, dict):
        return set(schema.get("properties") or {})
    parameters = getattr(declaration, "parameters", None)
    return set(getattr(parameters, "properties", None) or {})
