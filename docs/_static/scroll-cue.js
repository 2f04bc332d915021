/*
 * A code or output block wider than the screen scrolls sideways inside its box (phones, long
 * printed tables). A shadow on the edge where more text is hidden says so: the block gets the
 * class mha-more-right while text is hidden past its right edge, and mha-more-left once it is
 * scrolled (mha-ref.css draws the shadows). Without JavaScript the blocks still scroll.
 */
(function () {
  "use strict";

  function update(block) {
    var hiddenRight = block.scrollWidth - block.clientWidth - block.scrollLeft;
    block.classList.toggle("mha-more-right", hiddenRight > 1);
    block.classList.toggle("mha-more-left", block.scrollLeft > 1);
  }

  function blocks() {
    return document.querySelectorAll(".bd-article pre");
  }

  function run() {
    blocks().forEach(function (block) {
      update(block);
      block.addEventListener("scroll", function () { update(block); }, { passive: true });
    });
    window.addEventListener("resize", function () { blocks().forEach(update); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
