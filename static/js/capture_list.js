// Captures list: check two captures (or one, with ?compare=ID from a capture page) and
// compare them. The button enables only when exactly two are picked.
(function () {
  "use strict";
  const form = document.getElementById("compare-form");
  if (!form) return;
  const button = document.getElementById("compare-selected");
  const hint = document.getElementById("compare-hint");
  const boxes = () => [...document.querySelectorAll("input[name=pick][form=compare-form]")];
  const hidden = form.querySelectorAll("input[type=hidden][name=pick]").length;

  function update() {
    const picked = boxes().filter((b) => b.checked).length + hidden;
    button.disabled = picked !== 2;
    boxes().forEach((b) => { b.disabled = !b.checked && picked >= 2; });
    if (picked === 2) hint.textContent = "Ready to compare.";
  }

  document.addEventListener("change", (e) => { if (e.target.matches("input[name=pick]")) update(); });
  update();
})();
