// samsa console: instant table filters, live charts (Chart.js) and the live tail. No build step.
"use strict";

const POLL_MS = 2000;

// Instant client-side filtering: <input data-filter-table="ID"> hides the rows of table#ID
// whose data-name does not contain the text (the server-side ?q= search still works without JS).
function setupFilters() {
  for (const input of document.querySelectorAll("input[data-filter-table]")) {
    const table = document.getElementById(input.dataset.filterTable);
    if (!table) continue;
    const rows = Array.from(table.tBodies[0].rows);
    const counter = document.getElementById("topic-count");
    input.addEventListener("input", () => {
      const needle = input.value.trim().toLowerCase();
      let shown = 0;
      for (const row of rows) {
        const hit = !needle || (row.dataset.name || "").includes(needle);
        row.hidden = !hit;
        if (hit) shown++;
      }
      if (counter && input.id === "topic-search") counter.textContent = shown;
    });
  }
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

// <canvas data-series="NAME">: a line chart of /api/series?name=NAME, refreshed every 2 s.
function setupCharts() {
  for (const canvas of document.querySelectorAll("canvas[data-series]")) {
    if (typeof Chart === "undefined") return;
    const chart = new Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [{ label: canvas.dataset.label, data: [], borderColor: "#2f6fde",
        backgroundColor: "rgba(47,111,222,.12)", fill: true, pointRadius: 0, tension: 0.2 }] },
      options: { animation: false, maintainAspectRatio: false, plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true }, x: { ticks: { maxTicksLimit: 6, maxRotation: 0 } } } },
    });
    const url = "/api/series?name=" + encodeURIComponent(canvas.dataset.series);
    const refresh = async () => {
      try {
        const response = await fetch(url, { credentials: "same-origin" });
        if (response.ok) {
          const body = await response.json();
          chart.data.labels = body.points.map((p) => clock(p[0]));
          chart.data.datasets[0].data = body.points.map((p) => p[1]);
          chart.update();
          canvas.dataset.points = String(body.points.length);
        }
      } catch (e) { /* the next poll tries again */ }
      setTimeout(refresh, POLL_MS);
    };
    refresh();
  }
}

function cell(row, text, pre) {
  const td = row.insertCell();
  if (pre) {
    const p = document.createElement("pre");
    p.textContent = text;
    td.appendChild(p);
  } else {
    td.textContent = text;
  }
  return td;
}

// The live tail: while #live-tail is checked, new messages are added on top of the table.
function setupTail() {
  const box = document.getElementById("live-tail");
  if (!box) return;
  const body = document.getElementById("tail-rows");
  const status = document.getElementById("tail-status");
  let after = "";
  let running = false;
  const poll = async () => {
    if (!box.checked) { running = false; return; }
    const params = new URLSearchParams({ partition: box.dataset.partition, format: box.dataset.format,
      filter: box.dataset.filter, after: after });
    try {
      const response = await fetch(box.dataset.tail + "?" + params, { credentials: "same-origin" });
      const data = await response.json();
      if (!response.ok) {
        status.textContent = data.error || ("HTTP " + response.status);
      } else {
        after = data.after;
        status.textContent = "tailing…";
        for (const m of data.messages) {
          const row = body.insertRow(0);
          cell(row, String(m.partition));
          cell(row, String(m.offset));
          cell(row, m.timestamp);
          cell(row, m.key, true);
          cell(row, m.value, true);
          cell(row, m.headers.map((h) => h[0] + ": " + h[1]).join("\n"), true);
        }
      }
    } catch (e) {
      status.textContent = "the console does not answer";
    }
    setTimeout(poll, POLL_MS);
  };
  box.addEventListener("change", () => {
    if (box.checked && !running) { running = true; after = ""; poll(); }
    if (!box.checked) status.textContent = "";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupFilters();
  setupCharts();
  setupTail();
});
