/*
 * A display formula wider than the column (a phone's screen) is shown smaller, down to 60% of
 * its size, so that it fits instead of being cut at the edge. One that still does not fit
 * scrolls sideways inside its box, with a shadow at the hidden edge (mha-ref.css). An inline
 * formula wider than its paragraph scrolls sideways inside a box of the paragraph's width.
 */
(function () {
  "use strict";

  var SMALLEST = 0.6;

  function fit() {
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (box) {
      box.style.fontSize = "";
      var ratio = box.clientWidth / box.scrollWidth;
      if (ratio < 1) box.style.fontSize = Math.max(0.98 * ratio, SMALLEST) * 100 + "%";
    });
    // an inline formula wider than its paragraph (a long formula on a phone) becomes a box of
    // the paragraph's width that scrolls sideways, instead of running past the screen's edge
    document.querySelectorAll('mjx-container:not([display="true"])').forEach(function (box) {
      box.classList.remove("mha-wide-inline");
      var column = box.closest("p, li, dd, td") || box.parentElement;
      if (box.getBoundingClientRect().width > column.clientWidth) {
        box.classList.add("mha-wide-inline");
      }
    });
  }

  // A formula box that scrolls sideways can be scrolled from the keyboard: it takes the focus
  // (tabindex 0; WCAG 2.1.1, axe's scrollable-region-focusable). MathJax's contextual menu used to
  // make every formula focusable; the site loads MathJax without it (conf.py).
  function focusableWhereItScrolls() {
    document.querySelectorAll("mjx-container").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
      } else if (box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
      }
    });
  }

  // MathJax typesets after the page has loaded; its promise resolves when the formulas are in
  window.addEventListener("load", function () {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(fit).then(focusableWhereItScrolls);
    }
  });
  window.addEventListener("resize", function () {
    fit();
    focusableWhereItScrolls();
  });
})();
