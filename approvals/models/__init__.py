"""The approvals app's models: tickets (open human pauses of an agent), the append-only responses sent
to them and who takes part in each (`tickets`); policies and standing grants (`policies`); a ticket's
activity and the decision chain's head (`history`). Import them from here.

Vocabulary: a pause is a *ticket* in code, UI and API (`ticket` variables, `ticket_*` functions).
The model keeps its first name, `PendingCall` (table `approvals_pendingcall`, API paths
`/api/pending-calls`): renaming a model, its table and its URLs would cost a migration and break
clients for nothing a person sees. `call_id` / `call_name` are the ADK function call's own.
"""

from .history import DecisionChain, TicketActivity
from .policies import Policy, StandingGrant
from .tickets import PendingCall, Response, TicketParticipant

__all__ = [
    "DecisionChain",
    "PendingCall",
    "Policy",
    "Response",
    "StandingGrant",
    "TicketActivity",
    "TicketParticipant",
]
