// Live updates: the server sends the re-rendered (and escaped) live part of
// a page as server-sent events; this swaps it in. Without the script the
// page still works, read at load time.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live || !window.EventSource) { return; }
  var es = new EventSource(live.getAttribute("data-live"));
  es.addEventListener("live", function (e) {
    live.innerHTML = e.data;
    live.setAttribute("data-updated", String(Date.now()));
  });
  es.addEventListener("ended", function () { es.close(); window.location = "/login"; });
})();
