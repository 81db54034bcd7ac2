// adkweb: the little JavaScript the pages need (htmx does the rest).
document.addEventListener("htmx:wsAfterMessage", function () {
  // Keep the newest conversation event in view on the ticket page.
  var events = document.getElementById("conversation-events");
  if (events) events.scrollTop = events.scrollHeight;
});
document.addEventListener("htmx:oobErrorNoTarget", function (e) {
  // A pushed fragment for something this page does not show (e.g. a row on another page): ignore.
  e.preventDefault();
});
