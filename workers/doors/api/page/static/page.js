// The jobs page's only script: swap in the live parts the server pushes (SSE), and send
// the forms with the CSRF token without leaving the page. Without it, forms still work.
(() => {
  "use strict";
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const live = document.getElementById("live");
  const message = document.getElementById("message");

  const say = (text, ok) => {
    message.textContent = text;
    message.className = ok ? "ok" : "error";
  };

  const connect = () => {
    const events = new EventSource("/events");
    events.addEventListener("parts", (event) => {
      const parts = JSON.parse(event.data);
      for (const [id, html] of Object.entries(parts)) {
        const target = document.getElementById(id);
        if (target) target.innerHTML = html;
      }
      live.textContent = "live";
      live.className = "on";
    });
    events.addEventListener("open", () => {
      live.textContent = "live";
      live.className = "on";
    });
    events.addEventListener("error", () => {
      live.textContent = "reconnecting…";
      live.className = "off";
    });
  };

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.hasAttribute("data-action")) return;
    event.preventDefault();
    const body = new URLSearchParams(new FormData(form, event.submitter));
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
      });
      const data = await response.json().catch(() => ({}));
      const text = data.message || (data.error && data.error.message) || response.statusText;
      say(text, response.ok);
    } catch (error) {
      say(`the server did not answer: ${error}`, false);
    }
  });

  connect();
})();
