/*
 * A display formula wider than the column (a phone's screen) is shown smaller, down to 60% of
 * its size, so that it fits instead of being cut at the edge. One that still does not fit
 * scrolls sideways inside its box, with a shadow at the hidden edge (mha-ref.css).
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
  }

  // MathJax typesets after the page has loaded; its promise resolves when the formulas are in
  window.addEventListener("load", function () {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(fit);
    }
  });
  window.addEventListener("resize", fit);
})();
