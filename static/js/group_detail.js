// Group page: the merged flamegraph of every process (with a process filter) and
// the GPU timeline of each process's host when one was sampled.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("group-data").textContent);
  const container = document.getElementById("group-flamegraph");
  const filter = document.getElementById("process-filter");
  const view = new window.flamedeck.FlameView(container, {});

  function selected() {
    return [...filter.querySelectorAll("input:checked")].map((box) => box.value);
  }

  async function load() {
    const params = new URLSearchParams(selected().map((id) => ["capture", id]));
    const tree = await window.flamedeck.fetchJson(`/api/groups/${data.group}/flamegraph/?${params}`);
    if (!tree.value) {
      container.textContent = "No samples yet for the selected processes.";
      return;
    }
    view.render(tree);
    container.dataset.loaded = "true";
  }

  filter.addEventListener("change", load);
  load().catch((err) => { container.textContent = `Could not load the flamegraph: ${err.message}`; });
  if (window.flamedeck.drawGpuTimeline) {
    window.flamedeck.drawGpuTimeline(document.getElementById("gpu-timeline"), data.processes);
  }
})();
