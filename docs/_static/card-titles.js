/*
 * Gallery card titles ("Example 7: torch.nn.MultiheadAttention in practice"):
 * - the number goes on a line of its own above the title ("Example 7" / "示例 7");
 * - a long dotted name (torch.nn.MultiheadAttention) may break after one of its dots, by adding
 *   a <wbr> there, instead of anywhere in the middle of a word.
 */
(function () {
  "use strict";

  var NUMBER = /^((?:Example|示例) \d+)[:：]\s*/;

  function splitNumber(title) {
    var first = title.firstChild;
    if (!first || first.nodeType !== Node.TEXT_NODE) return;
    var match = NUMBER.exec(first.data);
    if (!match) return;
    var label = document.createElement("span");
    label.className = "mha-card-number";
    label.textContent = match[1];
    first.data = first.data.slice(match[0].length);
    title.insertBefore(label, first);
  }

  function breakAfterDots(title) {
    var walker = document.createTreeWalker(title, NodeFilter.SHOW_TEXT);
    var texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    texts.forEach(function (text) {
      var parts = text.data.split(/(?<=\.)(?=\w)/);
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
    document.querySelectorAll(".sphx-glr-thumbnail-title").forEach(function (title) {
      splitNumber(title);
      breakAfterDots(title);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
