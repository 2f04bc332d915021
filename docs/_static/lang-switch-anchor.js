/*
 * The language switcher keeps the reader's place on the page.
 *
 * The switcher's links (docs/_templates/language-switcher.html) open the same page in the other
 * language, at its top. Every section has an explicit label, the same in both languages
 * (tests/pages/test_section_labels.py checks the sources), and the label is the section's id
 * (LabelledSectionIds in docs/_ext/mha_ref_build/section_ids.py; tests/pages/test_built_site.py checks
 * that the two languages' pages have the same section ids). So, on a click, this script adds the id of the
 * section the reader is looking at to the link ("#masks-padding"), and the other page opens
 * there. API objects have the same id in both languages too (#mha_ref.MultiHeadAttention), so
 * the object the reader is reading (the one named in the address while it is on screen,
 * otherwise the innermost one under the header) is passed on by its id, in preference to its
 * section. A reader still in the page's first section (its title) opens the other page at its
 * top. Without JavaScript the links still work.
 */
(function () {
  "use strict";

  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("article.bd-article section[id]"));
  }

  // just below the sticky header: what has scrolled up to this line is what the reader reads
  function readingLine() {
    var header = document.querySelector(".bd-header");
    return (header ? header.getBoundingClientRect().bottom : 0) + 16;
  }

  // the id of the last section whose heading has scrolled up to (or past) the reading line;
  // null while the reader is in the first section (the page's title)
  function sectionInView() {
    var line = readingLine();
    var all = sections();
    var index = 0;
    for (var i = 0; i < all.length; i++) {
      if (all[i].getBoundingClientRect().top <= line) index = i;
    }
    return index > 0 ? all[index].id : null;
  }

  // an API object named in the address (#mha_ref....) that is still on screen
  function apiTargetInView() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (id.indexOf("mha_ref.") !== 0) return null;
    var target = document.getElementById(id);
    if (!target) return null;
    var box = target.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight ? id : null;
  }

  // the innermost API object (class, method, function) that spans the reading line: its
  // signature has scrolled up to the line and its description has not yet left it. Nested
  // objects (a method in a class) come later in the page, so the last match is the innermost.
  function apiObjectAtLine() {
    var line = readingLine();
    var signatures = document.querySelectorAll("article.bd-article dl > dt[id^='mha_ref.']");
    var found = null;
    for (var i = 0; i < signatures.length; i++) {
      var top = signatures[i].getBoundingClientRect().top;
      var bottom = signatures[i].parentElement.getBoundingClientRect().bottom;
      if (top <= line && bottom > line) found = signatures[i].id;
    }
    return found;
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.mha-lang-link") : null;
    if (!link) return;
    var page = link.getAttribute("href").split("#")[0];
    var target = apiTargetInView() || apiObjectAtLine() || sectionInView();
    link.setAttribute("href", target ? page + "#" + encodeURIComponent(target) : page);
  });
})();
