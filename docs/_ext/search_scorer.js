/*
 * The site's search scorer (Sphinx's `html_search_scorer`, set by docs/_ext/mha_ref_build/search.py).
 *
 * Sphinx puts this file into _static/language_data.js, before searchtools.js, whose default
 * Scorer is defined only when none exists: so this object replaces it whole and keeps every
 * default field (Sphinx 9.0, sphinx/themes/basic/static/searchtools.js).
 *
 * How searchtools.js scores, before `score` below sees a result
 * [docname, title, anchor, descr, score, filename, kind]:
 * - kind "title": a page or section title that holds the whole query (and is at most twice its
 *   length): round(title * query length / title length), plus 1 for a page's own title: 8 to 16.
 * - kind "object": objNameMatch (11, the query is the name or its last dotted part) or
 *   objPartialMatch (6, the last part holds it), plus objPrio (modules +15, other objects +5).
 * - kind "index": round(100 * query length / entry length), for an index entry that holds the
 *   whole query and is at most twice its length.
 * - kind "text": for each page, the best of the query words' scores: title (15) when the word is
 *   in one of the page's section titles, term (5) when it is only in the text.
 * Results are sorted by score, then by title from A to Z.
 *
 * With these defaults every page that has a query word in any of its section titles scores 15,
 * and the API page, which has nearly every word in some heading, wins each tie by its title
 * ("API reference", "API 参考"): "causal mask" put the mask page 9th, behind pages that have only
 * "mask" in a heading, and its section "Building a causal mask" (8) further down still.
 *
 * So here:
 * - a title that holds the whole query comes before every other result (+30: 38 to 46);
 * - an object whose name is the query (16, a module 26) still comes before full-text matches,
 *   as by default;
 * - a full-text match on a page that documents objects (the API page) loses 1 point: its objects
 *   are results of their own, and it no longer wins ties against pages about the words.
 */
var Scorer = {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {
    0: 15,
    1: 5,
    2: -5,
  },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,

  // what a title that holds the whole query gains over the default
  wholeQueryTitle: 30,
  // what a full-text match on a page of objects loses
  objectPageText: 1,

  _objectPages: null,
  objectPages: function () {
    if (Scorer._objectPages === null) {
      var pages = new Set();
      var index = typeof Search !== "undefined" ? Search._index : null;
      if (index && index.objects) {
        Object.keys(index.objects).forEach(function (prefix) {
          index.objects[prefix].forEach(function (match) {
            pages.add(index.docnames[match[0]]);
          });
        });
      }
      Scorer._objectPages = pages;
    }
    return Scorer._objectPages;
  },

  score: function (result) {
    var docname = result[0];
    var score = result[4];
    var kind = result[6];
    if (kind === "title") return score + Scorer.wholeQueryTitle;
    if (kind === "text" && Scorer.objectPages().has(docname)) return score - Scorer.objectPageText;
    return score;
  },
};
