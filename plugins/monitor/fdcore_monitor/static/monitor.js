// fdcore monitor: swap in the page's live part every few seconds (no reload), and send actions
// with the token the command printed. Served by the monitor itself; no other origin is used.
"use strict";

(function () {
  const live = document.getElementById("live");
  const notice = document.getElementById("notice");
  const updated = document.getElementById("updated");
  const header = document.body.dataset.tokenHeader;

  // The address printed by `fdcore monitor --allow-actions` carries ?token=...: keep it for this
  // tab only and take it out of the address bar (and so out of history and bookmarks).
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    sessionStorage.setItem("fdcore-token", params.get("token"));
    params.delete("token");
    const query = params.toString();
    history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
  }

  function say(text, failed) {
    notice.textContent = text;
    notice.className = failed ? "failed" : "done";
    notice.hidden = false;
  }

  async function refresh() {
    const query = new URLSearchParams(location.search);
    query.set("fragment", "1");
    try {
      const answer = await fetch(location.pathname + "?" + query.toString(), {cache: "no-store"});
      if (!answer.ok) {
        updated.textContent = "not updated: " + (await answer.text());
        return;
      }
      live.innerHTML = await answer.text();
      updated.textContent = "updated " + new Date().toLocaleTimeString();
      live.dataset.updates = String(Number(live.dataset.updates || "0") + 1);
    } catch (error) {
      updated.textContent = "not updated: the monitor does not answer";
    }
  }

  async function act(button) {
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
      return;
    }
    const headers = {};
    const token = sessionStorage.getItem("fdcore-token");
    if (token) {
      headers[header] = token;
    }
    button.disabled = true;
    try {
      const answer = await fetch(button.dataset.action, {method: "POST", headers: headers});
      const body = await answer.json();
      if (answer.ok) {
        say(body.message, false);
      } else {
        say("Refused (HTTP " + answer.status + "): " + body.error, true);
      }
    } catch (error) {
      say("Not sent: the monitor does not answer", true);
    } finally {
      button.disabled = false;
    }
    refresh();
  }

  // one listener for every action button, those swapped in later too
  document.addEventListener("click", function (event) {
    const button = event.target.closest("button.action");
    if (button) {
      act(button);
    }
  });

  // a filter applies as soon as it is chosen (the button stays for pages without script)
  document.querySelectorAll("form.filters select").forEach(function (select) {
    select.addEventListener("change", function () {
      select.form.submit();
    });
  });

  // the next update starts a refresh period after the last one ended: a slow mailbox (a large
  // environment) slows the page down instead of piling requests onto the monitor
  const seconds = Number(live.dataset.refresh) || 2;
  async function loop() {
    await refresh();
    setTimeout(loop, seconds * 1000);
  }
  setTimeout(loop, seconds * 1000);
})();
