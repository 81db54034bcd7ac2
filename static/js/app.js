// adkweb: the little JavaScript the pages need (htmx does the rest).
document.addEventListener("htmx:wsAfterMessage", function () {
  // Keep the newest conversation event in view on the ticket page.
  var events = document.getElementById("conversation-events");
  if (events) events.scrollTop = events.scrollHeight;
});
(function () {
  // The ticket page's socket is told which state the actions card shows (shows=, approvals.ticket_consumer).
  // htmx's ws extension reconnects to the URL the page loaded with: say the state the card shows now (an
  // answer of the page's own may have swapped it since), else the next push re-sends the same card.
  // A conversation's socket (the ticket page's, the conversation page's) catches up from `after=`, the newest
  // event at page load: say the newest the page shows now (the events that came live since), else a
  // reconnect appends those again.
  // The ticket page's socket pushes the ticket's parts when the ticket changed since the change the page says
  // (changed=), and the conversation's activity when it is not the page's (activity=): say those the page
  // shows now (pushed since it loaded), else a reconnect sends again what the page shows already.
  var said = [["shows", "#ticket-actions[data-shows]", "data-shows"], ["changed", "#ticket-status[data-changed]",
    "data-changed"], ["activity", "#session-activity[data-activity]", "data-activity"]];
  var create = htmx.createWebSocket;
  htmx.createWebSocket = function (url) {
    said.forEach(function (it) {
      var el = document.querySelector(it[1]), key = new RegExp("([?&]" + it[0] + "=)[^&]*");
      if (el && key.test(url)) url = url.replace(key, "$1" + encodeURIComponent(el.getAttribute(it[2])));
    });
    if (/[?&]after=/.test(url)) {
      var newest = 0;
      document.querySelectorAll("#conversation-events [data-pk]").forEach(function (el) {
        newest = Math.max(newest, parseInt(el.getAttribute("data-pk"), 10) || 0);
      });
      url = url.replace(/([?&]after=)(\d*)/, function (all, key, was) {
        return key + Math.max(newest, parseInt(was, 10) || 0);
      });
    }
    return create(url);
  };
})();
document.addEventListener("htmx:oobBeforeSwap", function (e) {
  // The ticket page's actions card pushed in the state the page's card shows already: left as it is. The
  // socket pushes the card when its state changes (approvals.ticket_consumer), but a push on its way before
  // one of the page's own answers swapped in that state (an answer sent back to fix, 400; refused, 409)
  // arrives after it: swapping it again would wipe what was typed since (a reject reason).
  var target = e.detail.target, card = e.detail.fragment && e.detail.fragment.querySelector("#ticket-actions");
  if (target && target.id === "ticket-actions" && card &&
      card.getAttribute("data-shows") === target.getAttribute("data-shows")) {
    e.detail.shouldSwap = false;
  }
});
var ROWS = ["inbox-rows", "session-rows"]; // the live lists' bodies
document.addEventListener("htmx:oobBeforeSwap", function (e) {
  // Rows of a live list (the inbox, the conversations) pushed as new (at the top or the end of its table) that
  // the page shows already: each in place of its own. The sockets' catch-up at connect (approvals.consumers,
  // agents_app.list_consumer) sends the rows that changed since the page was rendered as new ones: a ticket
  // opened meanwhile is not on the page, one decided meanwhile is; after a reconnect, rows that came live since are.
  var target = e.detail.target, fragment = e.detail.fragment;
  if (!target || ROWS.indexOf(target.id) < 0 || !fragment || !fragment.querySelectorAll) return;
  fragment.querySelectorAll("tr[id]").forEach(function (row) {
    var shown = document.getElementById(row.id);
    if (shown && target.contains(shown)) shown.replaceWith(row);
  });
  if (!fragment.querySelector("tr")) e.detail.shouldSwap = false;
});
document.addEventListener("htmx:oobAfterSwap", function (e) {
  // The first conversation of an empty list: its table shown, "No conversations" gone.
  var target = e.detail.target;
  if (!target || target.id !== "session-rows" || !target.querySelector("tr")) return;
  var table = target.closest("table"), empty = document.getElementById("sessions-empty");
  if (table) table.hidden = false;
  if (empty) empty.remove();
});
document.addEventListener("htmx:oobErrorNoTarget", function (e) {
  // A pushed fragment for something this page does not show (e.g. a row on another page): ignore.
  e.preventDefault();
});
// A button or form of the page that failed (a 403 such as an expired form, a 404, a 500; htmx swaps none of them)
// or could not reach the server: say so in the page's notice, rather than nothing happening. A short answer
// (a refusal's text, adkweb.error_pages' advice) is shown as it is, as text; a whole page by its status.
document.addEventListener("htmx:responseError", function (e) {
  var xhr = e.detail.xhr;
  var said = new DOMParser().parseFromString(xhr.responseText || "", "text/html").body.textContent.trim();
  requestFailed(said && said.length <= 400 ? said : "The request failed (" + xhr.status + "). Reload the page and try again.");
});
document.addEventListener("htmx:sendError", function () {
  requestFailed("The server could not be reached. Check your connection, reload the page and try again.");
});
document.addEventListener("htmx:afterRequest", function (e) {
  // A request of the page answered since (the same button again, another one): the notice of a failed one is
  // no longer where things stand.
  var notice = document.getElementById("request-failed");
  if (notice && e.detail && e.detail.successful && !notice.hidden) {
    notice.hidden = true;
    notice.textContent = "";
  }
});
function requestFailed(text) {
  var notice = document.getElementById("request-failed");
  if (!notice) return;
  notice.textContent = text;
  notice.hidden = false;
}
document.addEventListener("htmx:wsOpen", function (e) {
  // Mark live elements (CSS shows a "live" dot; browser tests wait for it before acting).
  e.target.__liveSocket = e.detail.event && e.detail.event.target;
  e.target.setAttribute("data-ws-open", "");
});
// The servers' refusal codes (adkweb.live_socket, approvals.consumers): the socket is not reconnected.
var LIVE_REFUSED = [4003, 4403];
document.addEventListener("htmx:wsClose", function (e) {
  // A reconnect closes the old socket as it opens the new one; the old one's close can complete after the
  // new one opened: it says nothing about the element's socket then.
  var closed = e.detail && e.detail.event && e.detail.event.target;
  if (closed && e.target.__liveSocket && closed !== e.target.__liveSocket) return;
  e.target.removeAttribute("data-ws-open");
  // Refused (the conversation deleted, a right lost, signed out): say so rather than go quiet.
  var code = e.detail && e.detail.event && e.detail.event.code;
  var notice = document.getElementById("live-ended");
  if (notice && LIVE_REFUSED.indexOf(code) >= 0) notice.hidden = false;
});
document.addEventListener("click", function (e) {
  // "Copy" next to a read-only field (approval links): copy its value, say so.
  var button = e.target.closest && e.target.closest("[data-copy]");
  if (!button) return;
  var input = document.querySelector(button.getAttribute("data-copy"));
  if (!input) return;
  input.select();
  var done = function () { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand("copy") && done(); });
  } else if (document.execCommand("copy")) {
    done();
  }
});
