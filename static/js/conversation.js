// Conversation page: Ctrl/Cmd+Enter sends the message; keep the newest event in view.
(function () {
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && t.tagName === "TEXTAREA" && t.form) {
      e.preventDefault();
      t.form.requestSubmit();
    }
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var events = document.getElementById("conversation-events");
    if (!events) return;
    var nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 200;
    if (nearBottom) events.lastElementChild && events.lastElementChild.scrollIntoView({ block: "end" });
  });
})();
