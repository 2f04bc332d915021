/*
 * Each example figure is a link to its largest image (the 2x one), so a reader can open it at
 * full size: on a phone, or beside a narrow window, the page shrinks figures to fit the text.
 */
(function () {
  "use strict";

  function largestImage(img) {
    var largest = img.getAttribute("src");
    (img.getAttribute("srcset") || "").split(",").forEach(function (candidate) {
      var parts = candidate.trim().split(/\s+/);
      if (parts.length === 2 && parseFloat(parts[1]) >= 2) largest = parts[0];
    });
    return largest;
  }

  function linkFigures() {
    var figures = document.querySelectorAll("img.sphx-glr-single-img, img.sphx-glr-multi-img");
    Array.prototype.forEach.call(figures, function (img) {
      if (img.closest("a")) return;
      var link = document.createElement("a");
      link.href = largestImage(img);
      link.className = "mha-figure-link";
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", linkFigures);
  } else {
    linkFigures();
  }
})();
