// adkweb: relative times that stay true while the page is open ("due in 2 hours", "5 minutes ago").
// The server writes them as <time datetime="…" data-rel="since|ago|until"> with Django's timesince or
// timeuntil text (adkweb.markup.relative_time); this writes the same text again as the clock moves, each
// time any of them would change (a minute boundary), and after htmx swaps new ones in. By the server's
// clock: the page says when it was rendered (<meta name="adkweb-now">), so a browser whose clock is off
// shows what the server would. The switch to "past due" is the server's (approvals.socket_due).
(function () {
  var NAMES = ["year", "month", "week", "day", "hour", "minute"];
  var CHUNKS = [604800, 86400, 3600, 60]; // week, day, hour, minute (s)
  var MONTHS_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  var meta = document.querySelector('meta[name="adkweb-now"]');
  var rendered = meta ? parseFloat(meta.getAttribute("content")) * 1000 : NaN;
  var skew = isNaN(rendered) ? 0 : rendered - Date.now();
  var timer = null;

  function part(name, n) {
    return n + "\u00a0" + name + (n === 1 ? "" : "s");
  }

  function timeOfDay(t) {
    return t - Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate());
  }

  // Django's timesince(d, now) (django.utils.timesince, depth 2, UTC: the project's TIME_ZONE), in ms.
  function since(dMs, nowMs) {
    var d = new Date(dMs), now = new Date(nowMs);
    if (Math.floor((nowMs - dMs) / 1000) <= 0) return part("minute", 0);
    var months = (now.getUTCFullYear() - d.getUTCFullYear()) * 12 + (now.getUTCMonth() - d.getUTCMonth());
    if (d.getUTCDate() > now.getUTCDate() || (d.getUTCDate() === now.getUTCDate() && timeOfDay(d) > timeOfDay(now))) {
      months -= 1;
    }
    var years = Math.floor(months / 12), rest = months % 12, pivot = dMs;
    if (years || rest) {
      var year = d.getUTCFullYear() + years, month = d.getUTCMonth() + 1 + rest;
      if (month > 12) { month -= 12; year += 1; }
      pivot = Date.UTC(year, month - 1, Math.min(MONTHS_DAYS[month - 1], d.getUTCDate()),
        d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds());
    }
    var remaining = (nowMs - pivot) / 1000, parts = [years, rest];
    CHUNKS.forEach(function (chunk) {
      var count = Math.floor(remaining / chunk);
      parts.push(count);
      remaining -= chunk * count;
    });
    var i = 0;
    while (i < parts.length && parts[i] === 0) i++;
    if (i === parts.length) return part("minute", 0);
    var out = [part(NAMES[i], parts[i])];
    if (i + 1 < parts.length && parts[i + 1] !== 0) out.push(part(NAMES[i + 1], parts[i + 1]));
    return out.join(", ");
  }

  function text(el, now) {
    var at = Date.parse(el.getAttribute("datetime"));
    if (isNaN(at)) return null;
    var rel = el.getAttribute("data-rel");
    if (rel === "until") return since(now, at);
    return since(at, now) + (rel === "ago" ? " ago" : "");
  }

  // Rewrites every relative time on the page; then waits for the next minute boundary of any of them.
  function refresh() {
    if (timer !== null) clearTimeout(timer);
    var now = Date.now() + skew, next = 60000;
    document.querySelectorAll("time[data-rel]").forEach(function (el) {
      var t = text(el, now);
      if (t === null) return;
      if (el.textContent !== t) el.textContent = t;
      // Its text changes only when a whole minute has passed between it and now: since or until it alike.
      var at = Date.parse(el.getAttribute("datetime"));
      next = Math.min(next, (((at - now) % 60000) + 60000) % 60000);
    });
    timer = setTimeout(refresh, Math.max(next, 0) + 20);
  }

  window.adkwebTime = { since: since, refresh: refresh };
  refresh();
  ["htmx:afterSettle", "htmx:oobAfterSwap", "htmx:wsAfterMessage"].forEach(function (name) {
    document.addEventListener(name, refresh);
  });
})();
