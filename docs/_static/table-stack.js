/*
 * Phones: a table of three or more columns is shown one row at a time, its cells one under the
 * other, each labelled with its column's heading (mha-ref.css, max-width 576px), so no column is
 * squeezed to a few characters or hidden off the right edge. Here each cell gets its heading as a
 * data-label, and the table the class mha-stack. Without JavaScript the table keeps its columns
 * and long names break inside them instead.
 */
(function () {
  "use strict";

  function stack(table) {
    var headings = Array.from(table.querySelectorAll("thead th"), function (th) {
      return th.textContent.trim();
    });
    if (headings.length < 3) return;
    table.querySelectorAll("tbody tr").forEach(function (row) {
      Array.from(row.children).forEach(function (cell, i) {
        if (!cell.textContent.trim()) cell.classList.add("mha-empty-cell");
        else if (headings[i]) cell.setAttribute("data-label", headings[i]);
      });
    });
    table.classList.add("mha-stack");
  }

  function run() {
    document.querySelectorAll(".bd-article table").forEach(stack);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
