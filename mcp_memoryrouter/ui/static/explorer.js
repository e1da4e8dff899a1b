// The memory explorer's one script. Every page works without it; it only asks before a
// form marked data-confirm is sent, and offers "select all" beside a list of memories.
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form.selection")) {
    const boxes = form.querySelectorAll('input[type="checkbox"][name="ids"]');
    if (boxes.length < 2) continue;
    const label = document.createElement("label");
    label.className = "inline select-all";
    const all = document.createElement("input");
    all.type = "checkbox";
    all.addEventListener("change", () => {
      for (const box of boxes) box.checked = all.checked;
    });
    label.append(all, " Select all");
    form.prepend(label);
  }
});
