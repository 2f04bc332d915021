/*
 * The site's search scorer (Sphinx's `html_search_scorer`, set by docs/_ext/mha_ref_build/search.py).
 *
 * Sphinx puts this file into _static/language_data.js, next to searchtools.js, whose default
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
 *   in one of the page's section titles, term (5) when it is only in the text. A page must hold
 *   every query word, except words of one or two characters, which it may lack.
 * Results are sorted by score, then by title from A to Z.
 *
 * With these defaults every page that has a query word in any of its section titles scores 15,
 * and the API page, which has nearly every word in some heading, wins each tie by its title
 * ("API reference", "API 参考"): "causal mask" put the mask page 9th. And for a query of Chinese
 * words, most of them two characters long (潜在注意力 is 潜在 + 注意力), a page needs only the
 * longer words: 潜在注意力 listed the 33 pages holding 注意力, the example about it 12th, after the
 * references, the index and the glossary, which mention every topic; a title longer than twice
 * the query ("示例 22：多头潜在注意力") was no title match.
 *
 * So here (`rank` below re-scores what searchtools.js found, knowing the query):
 * - a heading that holds the whole query comes before every other result, whatever its length,
 *   when the query is two words or more or a phrase of TOPICS (a one-word query keeps Sphinx's
 *   rule, else "注意力" would list every heading that holds it): a page's title 50, plus 5 for
 *   each of its section titles that also holds it; a section title 40 plus Sphinx's title score
 *   (0 to 15, by how much of the title the query is);
 * - a query that is one phrase of TOPICS also matches headings by the others (RoPE, 旋转位置编码
 *   and 旋转位置嵌入 find the heading "RoPE inside a real model's heads"); a topic that no heading
 *   names gives the page that defines it (70);
 * - an object whose name is the query (16, a module 26) still comes before full-text matches;
 * - a full-text match that lacks a one- or two-character word of the query loses 10 points, so
 *   that pages holding the whole query come first;
 * - the pages that mention every topic (BROAD: the references, the home page, the glossary, the
 *   cheat sheet, the changelog, the examples' index) lose 10 points in every kind of result;
 * - a full-text match on a page that documents objects (the API page) loses 1 point: its objects
 *   are results of their own, and it no longer wins ties against pages about the words.
 * tests/browser/test_search_ranking.py types each query of the reviews into the search page.
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

  // a page's title that holds the whole query, and what each of its sections holding it adds
  wholeQueryPageTitle: 50,
  wholeQuerySameSection: 5,
  // what a section title that holds the whole query adds to Sphinx's title score (0 to 15)
  wholeQuerySection: 40,
  // the page that defines a topic of TOPICS that no heading names
  topicPage: 70,
  // what a full-text match loses when it lacks a short word of the query; what a broad page loses
  missingShortWord: 10,
  broadPage: 10,
  // what a full-text match on a page of objects loses
  objectPageText: 1,

  // pages that list or mention every topic
  BROAD: new Set([
    "references", "index", "glossary", "cheatsheet", "changelog", "auto_examples/index",
  ]),

  // phrases a reader may type for one topic, in either language (lower case): a query that is
  // one of them also matches headings by the others; `page`, where no heading names the topic,
  // is the page that defines it
  TOPICS: [
    { words: ["rope", "rotary position embedding", "rotary positional embedding",
      "rotary embedding", "旋转位置编码", "旋转位置嵌入", "旋转编码"] },
    { words: ["mla", "multi-head latent attention", "多头潜在注意力"] },
    { words: ["kv cache", "kv 缓存", "键值缓存"] },
    { words: ["induction head", "归纳头"] },
    // 注意力汇点 is the site's word; the glossary gives the other translations
    { words: ["attention sink", "注意力汇点", "注意力汇聚点", "注意力沉没"] },
    // d2l's "attention pooling" (d2l-zh: 注意力汇聚) is the weighted average of the values that
    // the section on scaled dot-product attention computes; it is not an attention sink
    { words: ["attention pooling", "注意力汇聚", "scaled dot-product attention", "缩放点积注意力"] },
    // defined in example 10's introduction; example 17 has a heading on a real model's one
    { words: ["previous-token head", "previous token head", "前一词元头", "前一个词元头"],
      page: "auto_examples/plot_10_induction_heads" },
  ],

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

  // what every result gets, whatever the query
  score: function (result) {
    var docname = result[0];
    var score = result[4];
    var kind = result[6];
    if (Scorer.BROAD.has(docname)) score -= Scorer.broadPage;
    if (kind === "text" && Scorer.objectPages().has(docname)) score -= Scorer.objectPageText;
    return score;
  },

  // the query's words in lower case, single spaces
  normalise: function (text) {
    return text.toLowerCase().trim().replace(/\s+/g, " ");
  },

  // does `title` hold `phrase`? A Latin phrase must start a word ("rope" is not in "property")
  holds: function (title, phrase) {
    var at = title.indexOf(phrase);
    while (at >= 0) {
      if (at === 0 || !/[a-z0-9]/.test(phrase[0]) || !/[a-z0-9]/.test(title[at - 1])) return true;
      at = title.indexOf(phrase, at + 1);
    }
    return false;
  },

  // re-score and re-sort `results` (ascending, as searchtools.js displays them from the end)
  rank: function (query, searchTerms, results) {
    var index = Search._index;
    var phrase = Scorer.normalise(query);
    var topic = Scorer.TOPICS.find(function (t) { return t.words.indexOf(phrase) >= 0; });
    var phrases = topic ? topic.words : [phrase];
    var specific = Boolean(topic) || searchTerms.size >= 2;
    var best = new Map(); // doc + anchor -> result, the title results
    var add = function (result) {
      result[4] = Scorer.score(result);
      var key = result[0] + result[2];
      if (!best.has(key) || best.get(key)[4] < result[4]) best.set(key, result);
    };
    // sections of each page holding the query, for the page-title bonus
    var sections = new Map();
    var matches = [];
    Object.keys(index.alltitles).forEach(function (title) {
      var lower = Scorer.normalise(title);
      phrases.forEach(function (p) {
        if (!Scorer.holds(lower, p) || !(specific || p.length >= lower.length / 2)) return;
        index.alltitles[title].forEach(function (found) {
          var file = found[0];
          var isPage = index.titles[file] === title;
          matches.push([file, found[1], title, isPage, Math.round((Scorer.title * p.length) / lower.length)]);
          if (!isPage) sections.set(file, (sections.get(file) || new Set()).add(title));
        });
      });
    });
    matches.forEach(function (m) {
      var file = m[0];
      var pageTitle = index.titles[file];
      var score = m[3]
        ? Scorer.wholeQueryPageTitle + Scorer.wholeQuerySameSection * (sections.has(file) ? sections.get(file).size : 0)
        : Scorer.wholeQuerySection + m[4];
      add([index.docnames[file], m[3] ? m[2] : pageTitle + " > " + m[2], m[1] !== null ? "#" + m[1] : "",
        null, score, index.filenames[file], "title"]);
    });
    if (topic && topic.page) {
      var file = index.docnames.indexOf(topic.page);
      if (file >= 0) {
        add([topic.page, index.titles[file], "", null, Scorer.topicPage, index.filenames[file], "title"]);
      }
    }
    var short = Array.from(searchTerms).filter(function (t) { return t.length <= 2; });
    var holdsTerm = function (file, term) {
      return [index.terms[term], index.titleterms[term]].some(function (files) {
        return files === file || (Array.isArray(files) && files.indexOf(file) >= 0);
      });
    };
    var ranked = results.filter(function (r) { return r[6] !== "title"; }).map(function (r) {
      if (r[6] === "text" && short.length) {
        var file = index.docnames.indexOf(r[0]);
        if (!short.every(function (t) { return holdsTerm(file, t); })) r[4] -= Scorer.missingShortWord;
      }
      return r;
    }).concat(Array.from(best.values()));
    // searchtools.js's order: by score, then by title from A to Z (both reversed: shown from the end)
    ranked.sort(function (a, b) {
      if (a[4] !== b[4]) return a[4] > b[4] ? 1 : -1;
      var x = a[1].toLowerCase();
      var y = b[1].toLowerCase();
      return x === y ? 0 : x > y ? -1 : 1;
    });
    return ranked;
  },
};

// searchtools.js's search, then `rank` on its results; installed once Search exists (this file
// may come before or after searchtools.js)
(function install() {
  if (typeof Search === "undefined") {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
    return;
  }
  if (Search._mhaRanked) return;
  Search._mhaRanked = true;
  var search = Search._performSearch;
  Search._performSearch = function (query, searchTerms, excludedTerms, highlightTerms, objectTerms) {
    var results = search(query, searchTerms, excludedTerms, highlightTerms, objectTerms);
    return Scorer.rank(query, searchTerms, results);
  };
})();
