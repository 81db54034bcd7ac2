// adkweb: absolute times in the reader's own time zone, named. The server writes every time in UTC
// (settings.TIME_ZONE: no per-user zone is kept), each as <time datetime="…"> with its text "2026-12-07 18:57 UTC",
// "2026-12-07 18:57:03 UTC" or "18:57:03": this writes that text again in the browser's zone ("2026-12-07
// 13:57 EST"), and every <time>'s title as the whole instant there ("2026-12-07 13:57:03 EST"), relative ones
// ("5 minutes ago", static/js/reltime.js) included; on load and after htmx swaps new ones in. Without JavaScript
// the page says UTC.
(function () {
  // The server's texts (adkweb templates: date:"Y-m-d H:i T", "Y-m-d H:i:s T", time:"H:i:s"): date? seconds?
  var SHAPES = [
    [/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b/, true, true],
    [/^\d{4}-\d\d-\d\d \d\d:\d\d\b/, true, false],
    [/^\d\d:\d\d:\d\d\b/, false, true],
  ];
  var zoneFormat = null;
  try {
    zoneFormat = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" });
  } catch (e) { /* no Intl: the offset below */ }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function zone(d) {
    var name = "";
    if (zoneFormat && zoneFormat.formatToParts) {
      zoneFormat.formatToParts(d).forEach(function (p) { if (p.type === "timeZoneName") name = p.value; });
    }
    if (name) return name;
    var off = -d.getTimezoneOffset();
    return "UTC" + (off < 0 ? "-" : "+") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
  }

  function local(d, withDate, withSeconds) {
    var out = pad(d.getHours()) + ":" + pad(d.getMinutes()) + (withSeconds ? ":" + pad(d.getSeconds()) : "");
    if (withDate) out = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + out;
    return out + " " + zone(d);
  }

  function rewrite() {
    document.querySelectorAll("time[datetime]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) return;
      var title = local(at, true, true);
      if (el.getAttribute("title") !== title) el.setAttribute("title", title);
      if (el.hasAttribute("data-rel")) return;
      var text = el.textContent.trim();
      for (var i = 0; i < SHAPES.length; i++) {
        if (SHAPES[i][0].test(text)) {
          var now = local(at, SHAPES[i][1], SHAPES[i][2]);
          if (text !== now) el.textContent = now;
          return;
        }
      }
    });
  }

  window.adkwebLocalTime = { local: local, rewrite: rewrite };
  rewrite();
  ["htmx:afterSettle", "htmx:oobAfterSwap", "htmx:wsAfterMessage"].forEach(function (name) {
    document.addEventListener(name, rewrite);
  });
})();
