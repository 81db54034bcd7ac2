"""The offline demo model: a deterministic BaseLlm that makes the demo agents behave like the
ADK seeds with no network, and gives every agent a tool playground (`/call <tool> {json}`).

It decides from what ADK sends it (the conversation and the tools it offers), never from the
agent's name, so admin-configured agents with the demo tools behave the same way.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.models.registry import LLMRegistry
from google.genai import types

DEMO_MODEL = "demo-offline"
DEMO_LABEL = "Offline demo model (no LLM)"
CALL_RE = re.compile(r"^\s*/call\s+([A-Za-z_][A-Za-z0-9_]*)\s*(.*)$", re.DOTALL)
_FIGURE = r"\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"  # 1,500,000.25; 1.500,00; 12,50 (no group)
AMOUNT_RE = re.compile(rf"\$\s*({_FIGURE})|({_FIGURE})\s*(?:\$|dollars?|usd)", re.IGNORECASE)
NUMBER_RE = re.compile(rf"({_FIGURE})")
APPROVED = {"approved", "approve", "ok", "accepted", "done", "completed", "resolved", "closed"}
REJECTED = {"rejected", "reject", "denied", "declined", "cancelled", "canceled"}


def is_demo_model(name: str) -> bool:
    return name.startswith("demo")


def _money(value: Any) -> str:
    try:
        return f"${float(value):,.2f}"
    except (TypeError, ValueError):
        return str(value)


def _text(content: types.Content) -> str:
    return "".join(p.text or "" for p in content.parts or [] if not getattr(p, "thought", False))


def _new_call(name: str, args: dict[str, Any]) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=f"call-{uuid.uuid4().hex[:16]}", name=name, args=args))


def _find_call(contents: list[types.Content], call_id: str | None, name: str) -> dict[str, Any]:
    for content in reversed(contents):
        for part in content.parts or []:
            fc = part.function_call
            if fc and (fc.id == call_id or (not call_id and fc.name == name)):
                return dict(fc.args or {})
    return {}


def _parse_amount(text: str) -> float | None:
    match = AMOUNT_RE.search(text) or NUMBER_RE.search(text)
    if not match:
        return None
    raw = next(g for g in match.groups() if g)
    return _figure(raw)


def _figure(raw: str) -> float:
    """A written amount: "1,500", "1.500" and "1,500,000" group thousands, "12,50" and "2.5" have decimals,
    and in "1,500.75" / "1.500,75" the last separator is the decimal one. A lone separator before three
    digits groups thousands either way: read as the larger amount, an ambiguous one is asked for, never
    paid at once as a small one (a reimbursement under 100 needs no approval)."""
    marks = [c for c in raw if c in ",."]
    if not marks:
        return float(raw)
    decimal = marks[-1]
    head, _, tail = raw.rpartition(decimal)
    if len(set(marks)) == 1 and (len(marks) > 1 or len(tail) == 3):
        return float(raw.replace(decimal, ""))  # thousands only: 1,500 / 1,500,000 / 1.500.000
    return float(head.replace(",", "").replace(".", "") + "." + tail)


def _parse_purpose(text: str) -> str:
    match = re.search(r"\bfor\s+(.+?)[.!?]*$", text.strip(), re.IGNORECASE)
    return match.group(1).strip() if match else "expenses"


class DemoLlm(BaseLlm):
    """Deterministic offline stand-in for an LLM (see module docstring)."""

    model: str = DEMO_MODEL

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"demo.*"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = self.respond(llm_request)
        text = "".join(p.text or "" for p in parts)
        if stream and text and not any(p.function_call for p in parts):
            words = re.findall(r"\S+\s*", text)
            so_far = ""
            for i in range(0, len(words), 3):
                chunk = "".join(words[i : i + 3])
                so_far += chunk
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=chunk)]), partial=True)
                await asyncio.sleep(0.02)
        # Rough token counts (words), so ADK's usage metrics have something to record.
        prompt = sum(len(_text(c).split()) for c in llm_request.contents)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=prompt,
            candidates_token_count=len(text.split()),
            total_token_count=prompt + len(text.split()),
        )
        yield LlmResponse(content=types.Content(role="model", parts=parts), turn_complete=True, usage_metadata=usage)

    # -- the policy ---------------------------------------------------------------------
    def respond(self, req: LlmRequest) -> list[types.Part]:
        tools = set(req.tools_dict)
        last = req.contents[-1] if req.contents else None
        if last is None:
            return [types.Part(text="Hello! How can I help?")]
        responses = [p.function_response for p in last.parts or [] if p.function_response]
        if responses:
            reply = self._after_tool(req, responses[-1])
            return [reply if isinstance(reply, types.Part) else types.Part(text=reply)]
        return self._after_user(_text(last), tools)

    def _after_user(self, text: str, tools: set[str]) -> list[types.Part]:
        call = CALL_RE.match(text)
        if call:
            return self._playground(call.group(1), call.group(2), tools)
        lowered = text.lower()
        if "ask_for_approval" in tools and "reimburse" in tools and "reimburs" in lowered:
            amount = _parse_amount(text)
            if amount is None:
                return [types.Part(text="How much should I reimburse, and for what?")]
            name = "reimburse" if amount < 100 else "ask_for_approval"
            return [_new_call(name, {"purpose": _parse_purpose(text), "amount": amount})]
        if "create_ticket_long_running" in tools and "ticket" in lowered:
            urgency = next((u for u in ("critical", "high", "medium", "low") if u in lowered), "medium")
            return [_new_call("create_ticket_long_running", {"urgency": urgency})]
        if "get_stock_price" in tools:
            symbols = re.findall(r"\b[A-Z]{1,5}\b", text)
            if symbols:
                return [_new_call("get_stock_price", {"symbol": symbols[-1]})]
        if "transfer_money" in tools and "transfer" in lowered:
            amount = _parse_amount(text)
            recipient = re.search(r"\bto\s+([A-Za-z][\w .'-]*?)[.!?]*$", text.strip())
            if amount is not None and recipient:
                return [_new_call("transfer_money", {"amount": amount, "recipient": recipient.group(1).strip()})]
            return [types.Part(text="Tell me how much to transfer and to whom, e.g. 'transfer $500 to Bob'.")]
        if "adk_request_input" in tools:
            return [
                _new_call(
                    "adk_request_input",
                    {
                        "message": f"Before I order '{text.strip()}': which model, and what is the budget?",
                        "response_schema": {
                            "type": "object",
                            "properties": {"model": {"type": "string"}, "budget": {"type": "number"}},
                            "required": ["model"],
                        },
                    },
                )
            ]
        agent_tools = [t for t in tools if t not in _KNOWN_FUNCTION_TOOLS]
        if agent_tools:
            return [_new_call(sorted(agent_tools)[0], {"request": text})]
        if not tools:
            return [types.Part(text=self._summarise(text))]
        return [
            types.Part(
                text=(
                    f"{DEMO_LABEL}: I can call these tools: {', '.join(sorted(tools))}. "
                    "Try `/call <tool> {json args}`."
                )
            )
        ]

    def _playground(self, name: str, raw_args: str, tools: set[str]) -> list[types.Part]:
        if name not in tools:
            return [
                types.Part(text=f"There is no tool named {name!r} here. Tools: {', '.join(sorted(tools)) or 'none'}.")
            ]
        try:
            args = json.loads(raw_args) if raw_args.strip() else {}
        except json.JSONDecodeError as exc:
            return [types.Part(text=f"Those arguments are not valid JSON ({exc.msg}).")]
        if not isinstance(args, dict):
            return [types.Part(text='Arguments must be a JSON object, e.g. {"amount": 200}.')]
        return [_new_call(name, args)]

    @staticmethod
    def _summarise(text: str) -> str:
        words = text.split()
        head = " ".join(words[:12]) + ("…" if len(words) > 12 else "")
        return f"Summary ({len(words)} words): {head}"

    def _after_tool(self, req: LlmRequest, fr: types.FunctionResponse) -> str | types.Part:
        name = fr.name or ""
        resp = dict(fr.response or {})
        args = _find_call(req.contents, fr.id, name)
        status = str(resp.get("status", "")).lower()
        note = resp.get("reason") or resp.get("comment") or resp.get("message")
        suffix = f" ({note})" if note else ""
        if name == "reimburse":
            amount = _money(args.get("amount", resp.get("amount")))
            purpose = args.get("purpose", resp.get("purpose", "your expenses"))
            return f"Done: I reimbursed {amount} for {purpose}."
        if name == "ask_for_approval":
            what = f"{_money(args.get('amount'))} for {args.get('purpose', 'your expenses')}"
            if status in APPROVED:  # an approver may have edited the amount or purpose: theirs count
                purpose, amount = (
                    resp.get("purpose", args.get("purpose", "")),
                    resp.get("amount", args.get("amount", 0)),
                )
                return _new_call("reimburse", {"purpose": purpose, "amount": amount})
            if status == "expired":
                return f"Sorry, your reimbursement request of {what} expired: nobody decided it in time."
            if status in REJECTED:
                return f"Sorry, your reimbursement of {what} was rejected{': ' + str(note) if note else '.'}"
            if status == "pending":
                ticket, approver = resp.get("ticket-id", ""), resp.get("approver", "the approver")
                return (
                    f"Your reimbursement of {what} needs a manager's approval. "
                    f"I opened ticket {ticket} with {approver}."
                )
            progress = resp.get("progress")
            pct = f" ({progress}% done)" if progress not in (None, "") else ""
            state = note or status or "in progress"
            return f"Update on your reimbursement of {what}: {state}{pct}. I'll tell you when it's decided."
        if name == "create_ticket_long_running":
            ticket = resp.get("ticket_id") or resp.get("ticket-id")
            if status == "started":
                urgency = args.get("urgency", "")
                return (
                    f"I'm creating a {urgency} urgency ticket: {ticket} (status: started). "
                    "I'll report back when it changes."
                )
            return f"{'Ticket ' + str(ticket) if ticket else 'Your ticket'} is now {status or 'updated'}{suffix}."
        if name == "get_stock_price":
            value = resp.get("result")
            symbol = args.get("symbol", "that symbol")
            return (
                f"The current price of {symbol} is {_money(value)}."
                if value is not None
                else f"I couldn't find a price for {symbol}."
            )
        if name == "transfer_money":
            if "error" in resp:
                reason = f" Reason: {resp['reason']}" if resp.get("reason") else ""
                what = f"{_money(args.get('amount'))} to {args.get('recipient')}"
                return f"The transfer of {what} was not made: {resp['error']}{reason}"
            what = f"{_money(resp.get('amount'))} to {resp.get('recipient')}"
            return f"Transferred {what} (transfer {resp.get('transfer-id')})."
        if name == "adk_request_input":
            if status in REJECTED:
                return f"Understood, I won't go ahead{suffix}."
            return f"Thanks, noted: {json.dumps(resp, sort_keys=True)}."
        if name == "get_user_choice":
            return f"You chose {resp.get('result', json.dumps(resp))}."
        if status in REJECTED:
            return f"{name} was rejected{suffix}."
        return f"{name} returned {json.dumps(resp, sort_keys=True, default=str)}."


_KNOWN_FUNCTION_TOOLS = {
    "ask_for_approval",
    "reimburse",
    "create_ticket_long_running",
    "get_stock_price",
    "transfer_money",
    "adk_request_input",
    "get_user_choice",
    "adk_request_confirmation",
}
LLMRegistry.register(DemoLlm)
