/*
 * The language switcher keeps the reader's place on the page.
 *
 * The switcher's links (docs/_templates/language-switcher.html) open the same page in the other
 * language, at its top. Section ids differ between the languages (they are made from the
 * translated headings), but both pages have the same sections in the same order
 * (tests/test_built_site.py checks it). So, on a click, this script adds "#mha-section-N" to the
 * link, N being the section the reader is looking at, and the page that opens turns that back
 * into the id of its own section N. API objects have the same id in both languages
 * (#mha_ref.MultiHeadAttention), so a link to one that is on screen is passed on unchanged.
 * Without JavaScript the links still work.
 */
(function () {
  "use strict";

  var PREFIX = "mha-section-";

  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("article.bd-article section[id]"));
  }

  // the last section whose heading has scrolled up to (or past) the bottom of the sticky header
  function sectionInView() {
    var header = document.querySelector(".bd-header");
    var line = (header ? header.getBoundingClientRect().bottom : 0) + 16;
    var all = sections();
    var index = 0;
    for (var i = 0; i < all.length; i++) {
      if (all[i].getBoundingClientRect().top <= line) index = i;
    }
    return index;
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

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.mha-lang-link") : null;
    if (!link) return;
    var page = link.getAttribute("href").split("#")[0];
    var api = apiTargetInView();
    var index = sectionInView();
    if (api) {
      link.setAttribute("href", page + "#" + encodeURIComponent(api));
    } else if (index > 0) {
      link.setAttribute("href", page + "#" + PREFIX + index);
    } else {
      link.setAttribute("href", page);
    }
  });

  function openSection() {
    var match = new RegExp("^#" + PREFIX + "(\\d+)$").exec(window.location.hash);
    if (!match) return;
    var section = sections()[Number(match[1])];
    if (section) window.location.replace("#" + encodeURIComponent(section.id));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", openSection);
  } else {
    openSection();
  }
})();
