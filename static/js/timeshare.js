// What every page does on top of htmx. Loaded with `defer` right after htmx (deferred scripts
// run in document order), so `htmx` exists here and this runs before htmx's first request.
(function () {
  // The browser's time zone, for the pages of a user who has not chosen one
  // (portal.time_zones reads the cookie).
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && document.cookie.split("; ").indexOf("tz=" + zone) < 0) {
    document.cookie = "tz=" + zone + "; path=/; max-age=31536000; samesite=lax";
  }

  // Forms answer 422 with their field errors (a lost race included: "changed to 22 shares
  // since you loaded the page"): swap them in like any other fragment. Any other 4xx or 5xx
  // is not swapped but said, below (not flagged as an htmx error: that would only add a
  // console error for a refusal the page handles).
  htmx.config.responseHandling = [
    {code: "204", swap: false},
    {code: "[23]..", swap: true},
    {code: "422", swap: true},
    {code: "[45]..", swap: false},
  ];

  // The message of a refused request: the page's alert or its first paragraph (the 403 and 404
  // pages say why in one), else the status line.
  function reason(xhr) {
    var doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
    var said = doc.querySelector("[role=alert], .errors, main p");
    var text = said ? said.textContent.trim() : "";
    return text || (xhr.status + " " + (xhr.statusText || "error"));
  }

  function say(text) {
    var main = document.querySelector("main");
    var list = document.getElementById("htmx-messages");
    if (!list) {
      list = document.createElement("ul");
      list.id = "htmx-messages";
      list.className = "messages";
      list.setAttribute("role", "alert");
      main.insertBefore(list, main.firstChild);
    }
    list.innerHTML = "";
    var item = document.createElement("li");
    item.className = "error";
    item.textContent = text;
    list.appendChild(item);
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    var list = document.getElementById("htmx-messages");
    if (xhr && xhr.status >= 400 && xhr.status !== 422) {
      say("Not done: " + reason(xhr));
    } else if (list && xhr && xhr.status) {
      list.remove();  // a later answer replaces an old failure message
    }
  });
  document.addEventListener("htmx:sendError", function () {
    say("Not done: the server did not answer. Check your connection and try again.");
  });
})();
