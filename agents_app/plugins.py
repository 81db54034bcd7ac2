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
