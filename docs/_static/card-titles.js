/*
 * Gallery card titles: let a long dotted name (torch.nn.MultiheadAttention) break after one of
 * its dots or between the words of a CamelCase name, by adding a <wbr> there, instead of
 * anywhere in the middle of a word.
 */
(function () {
  "use strict";

  function breakAfterDots(title) {
    var walker = document.createTreeWalker(title, NodeFilter.SHOW_TEXT);
    var texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    texts.forEach(function (text) {
      var parts = text.data.split(/(?<=\.)(?=\w)|(?<=[a-z])(?=[A-Z])/);
      if (parts.length < 2) return;
      var fragment = document.createDocumentFragment();
      parts.forEach(function (part, i) {
        if (i > 0) fragment.appendChild(document.createElement("wbr"));
        fragment.appendChild(document.createTextNode(part));
      });
      text.parentNode.replaceChild(fragment, text);
    });
  }

  function run() {
    document.querySelectorAll(".sphx-glr-thumbnail-title").forEach(breakAfterDots);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
