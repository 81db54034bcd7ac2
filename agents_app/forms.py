"""Forms of the conversation pages."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from .selectors import SESSION_STATUSES

EMPTY_MESSAGE = "The message is empty: type something for the agent."


class MessageForm(forms.Form):
    text = forms.CharField(
        label="Message",
        strip=True,
        max_length=20000,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Write to the agent…"}),
        error_messages={"required": EMPTY_MESSAGE},
    )


class NewConversationForm(MessageForm):
    agent = forms.ChoiceField(label="Agent", error_messages={"invalid_choice": "Pick one of the enabled agents."})

    field_order = ["agent", "text"]

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["agent"]).choices = [("", "Choose an agent…"), *((a, a) for a in agents)]
        self.fields["text"].label = "First message"


class SessionFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *SESSION_STATUSES.items()])

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["agent"]).choices = [("", "Any agent"), *((a, a) for a in agents)]

    def filters(self) -> dict[str, str]:
        if not self.is_valid():
            return {"app_name": "", "status": ""}
        return {"app_name": self.cleaned_data["agent"], "status": self.cleaned_data["status"]}
