// The dashboard's live pages: a page names its event stream in <body data-events>; the
// stream's events replace (or add to) the parts of the page they name. The HTML they carry
// is made and escaped by the server's templates.
"use strict";
(() => {
  const events = document.body.dataset.events;
  if (!events) return;
  const stream = new EventSource(events);
  const put = (id, html) => {
    const element = document.getElementById(id);
    if (element) element.innerHTML = html;
  };
  stream.addEventListener("clones", (ev) => put("clones", JSON.parse(ev.data).rows));
  stream.addEventListener("line", (ev) => {
    const progress = document.getElementById("progress");
    if (progress) progress.insertAdjacentHTML("beforeend", JSON.parse(ev.data).html);
  });
  stream.addEventListener("error", () => {
    // A stream refused (the session ended, or too many pages stream) is not tried again.
    if (stream.readyState !== EventSource.CLOSED || document.getElementById("ended")) return;
    const note = document.createElement("div");
    note.id = "ended";
    note.className = "error";
    note.textContent = "This page no longer updates: reload it (or log in again at /login).";
    document.querySelector("main").prepend(note);
  });
  stream.addEventListener("view", (ev) => {
    const data = JSON.parse(ev.data);
    put("summary", data.summary);
    put("question", data.question);
  });
})();
