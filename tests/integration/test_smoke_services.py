"""The reimbursement seed with PostgreSQL, Redis and a real celery worker process."""

from agents_app import services
from agents_app.models import StoredEvent
from approvals import services as approvals
from approvals.models import PendingCall


def test_reimbursement_runs_in_a_worker_process(demo, worker, wait):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    call = wait(lambda: PendingCall.objects.filter(session=session, initial_response__isnull=False).first(),
                what="a ticket with the tool's response")
    approvals.ticket_approve(call=call, actor=demo["approver"])
    wait(lambda: StoredEvent.objects.filter(session=session, data__content__parts__0__text__icontains="reimbursed").exists(),
         what="the reimbursement")
