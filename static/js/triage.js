// adkweb inbox: keyboard triage. j/k move, Enter opens, x selects, a/r approve/reject (one
// confirmation), / searches, ? shows help. Everything here also works with plain forms.
(function () {
  "use strict";
  var cursor = null; // ticket id of the highlighted row
  var selected = new Set(); // ticket ids selected with x or the checkboxes (survive live row swaps)

  var PREFIX = "pending-call-"; // rows are <tr id="pending-call-<ticket id>">
  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll('#inbox-rows tr[id^="' + PREFIX + '"]'));
  }
  function idOf(row) {
    return row.id.slice(PREFIX.length);
  }
  function rowOf(id) {
    return document.getElementById(PREFIX + id);
  }
  function box(row) {
    return row && row.querySelector('input[type="checkbox"][name="ticket"]');
  }
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function anyDialogOpen() {
    return !!document.querySelector("dialog[open]");
  }

  function paint() {
    rows().forEach(function (row) {
      var id = idOf(row);
      var here = id === cursor;
      row.classList.toggle("cursor", here);
      row.setAttribute("aria-selected", here ? "true" : "false");
      var b = box(row);
      if (b && !b.disabled) b.checked = selected.has(id);
      else selected.delete(id);
    });
    var count = document.getElementById("bulk-count");
    if (count) {
      count.textContent = selected.size
        ? selected.size + " selected:"
        : "Select tickets with x or the checkboxes:";
    }
  }

  function move(delta) {
    var all = rows();
    if (!all.length) return;
    var i = all.findIndex(function (r) { return idOf(r) === cursor; });
    i = i < 0 ? (delta > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, i + delta));
    cursor = idOf(all[i]);
    paint();
    all[i].scrollIntoView({ block: "nearest" });
  }

  function targets() {
    if (selected.size) return Array.from(selected);
    var row = cursor && rowOf(cursor);
    var b = box(row);
    return b && !b.disabled ? [cursor] : [];
  }

  function decide(action) {
    var ids = targets();
    var form = document.getElementById("bulk-form");
    if (!ids.length || !form || !window.htmx) return;
    htmx
      .ajax("POST", form.getAttribute("action"), {
        target: "#triage-body",
        swap: "innerHTML",
        values: { action: action, ticket: ids },
      })
      .then(function () {
        var dialog = document.getElementById("triage-dialog");
        if (!dialog.open) dialog.showModal();
        focusIn(dialog);
      });
  }

  function focusIn(dialog) {
    var el = dialog.querySelector("[autofocus]") || dialog.querySelector("button, a, input");
    if (el) el.focus();
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "Escape" && typing(e.target) && e.target.id === "id_q") {
      e.target.blur();
      return;
    }
    if (typing(e.target) || anyDialogOpen()) return;
    var handled = true;
    switch (e.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x":
        if (cursor) {
          var b = box(rowOf(cursor));
          if (b && !b.disabled) {
            if (selected.has(cursor)) selected.delete(cursor); else selected.add(cursor);
            paint();
          }
        }
        break;
      case "Enter":
        var link = cursor && rowOf(cursor) && rowOf(cursor).querySelector("a[href]");
        if (link) window.location.href = link.href; else handled = false;
        break;
      case "a": decide("approve"); break;
      case "r": decide("reject"); break;
      case "/":
        var q = document.getElementById("id_q");
        if (q) { q.focus(); q.select(); }
        break;
      case "?":
        document.getElementById("shortcuts-dialog").showModal();
        break;
      default:
        handled = false;
    }
    if (handled) e.preventDefault();
  });

  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.matches && t.matches('#inbox-rows input[type="checkbox"][name="ticket"]')) {
      if (t.checked) selected.add(t.value); else selected.delete(t.value);
      cursor = t.value;
      paint();
    }
  });

  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.closest && t.closest("#shortcuts-open")) {
      document.getElementById("shortcuts-dialog").showModal();
    }
    var close = t.closest && t.closest("#triage-dialog [data-close-dialog]");
    if (close) {
      e.preventDefault();
      document.getElementById("triage-dialog").close();
    }
    var submitter = t.closest && t.closest('#bulk-form button[name="action"]');
    if (submitter && window.htmx) {
      // With JavaScript the bulk buttons open the same confirmation in a dialog.
      e.preventDefault();
      decide(submitter.value);
    }
  });

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.matches || !form.matches("#triage-dialog form[data-triage-form]") || !window.htmx) return;
    e.preventDefault();
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    htmx
      .ajax("POST", form.getAttribute("action"), { source: form, target: "#triage-body", swap: "innerHTML" })
      .then(function () { focusIn(document.getElementById("triage-dialog")); })
      .finally(function () { buttons.forEach(function (b) { b.disabled = false; }); });
  });

  document.addEventListener("htmx:afterSettle", function (e) {
    // A filter change replaced the rows: keep the cursor and selection on tickets still shown.
    paint();
    var query = document.getElementById("save-view-query");
    if (query) query.value = window.location.search.replace(/^\?/, "");
  });
  document.addEventListener("htmx:pushedIntoHistory", function () {
    var query = document.getElementById("save-view-query");
    if (query) query.value = window.location.search.replace(/^\?/, "");
  });
  document.addEventListener("htmx:wsAfterMessage", paint);
  document.addEventListener("DOMContentLoaded", function () {
    rows().forEach(function (row) {
      var b = box(row);
      if (b && b.checked) selected.add(idOf(row));
    });
    paint();
    var dialog = document.getElementById("triage-dialog");
    if (dialog) {
      dialog.addEventListener("close", function () {
        // After decisions, the rows changed live; start a fresh selection.
        if (dialog.querySelector(".bulk-results")) selected.clear();
        paint();
      });
    }
  });
})();
