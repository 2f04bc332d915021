/*
 * Chinese search for Sphinx 9.0.x (loaded before searchtools.js).
 *
 * 1. Sphinx 9.0's language_data.js for zh ends with `window.Stemmer = ChineseStemmer;` but never
 *    defines ChineseStemmer (sphinx-doc/sphinx#14229, fixed in 9.1.1, which needs Python >= 3.12),
 *    so the search page hangs. Chinese terms are not stemmed; Latin terms use the English stemmer,
 *    as Sphinx's own zh search does on the Python side.
 * 2. searchtools.js splits a query only on non-letters, so "张量形状" stays one term that the index
 *    (segmented by jieba at build time) does not hold. splitQuery below splits runs of Han
 *    characters by greedy longest match against the index's own terms, and drops single
 *    characters the index does not know (的, 了, ...). searchtools.js defines splitQuery only if
 *    it is undefined, so this definition wins.
 */
/* eslint-disable no-var */
if (typeof ChineseStemmer === "undefined") {
  var ChineseStemmer = function () {
    var english = typeof EnglishStemmer === "function" ? new EnglishStemmer() : null;
    this.stemWord = function (word) {
      if (/[\u3400-\u9fff]/.test(word) || english === null) return word;
      return english.stemWord(word);
    };
  };
}

var splitQuery = function (query) {
  var HAN = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/;
  var known = function (term) {
    if (typeof Search === "undefined" || !Search._index) return false;
    var index = Search._index;
    return (
      Object.prototype.hasOwnProperty.call(index.terms || {}, term) ||
      Object.prototype.hasOwnProperty.call(index.titleterms || {}, term)
    );
  };
  var segmentHan = function (run) {
    var out = [];
    var i = 0;
    while (i < run.length) {
      var found = null;
      for (var j = Math.min(run.length, i + 8); j > i + 1; j--) {
        if (known(run.slice(i, j))) {
          found = run.slice(i, j);
          break;
        }
      }
      if (found === null) {
        var single = run[i];
        if (known(single)) out.push(single);
        i += 1;
      } else {
        out.push(found);
        i += found.length;
      }
    }
    return out;
  };
  var result = [];
  // split on anything that is not a letter, a digit or an underscore (as searchtools.js does)
  query.split(/[^\p{L}\p{N}_]+/u).forEach(function (part) {
    if (!part) return;
    var buffer = "";
    var flush = function () {
      if (buffer) result.push(buffer);
      buffer = "";
    };
    for (var k = 0; k < part.length; k++) {
      var ch = part[k];
      if (HAN.test(ch)) {
        flush();
        var end = k;
        while (end < part.length && HAN.test(part[end])) end++;
        var run = part.slice(k, end);
        var pieces = segmentHan(run);
        if (pieces.length === 0) pieces = [run];
        pieces.forEach(function (p) { result.push(p); });
        k = end - 1;
      } else {
        buffer += ch;
      }
    }
    flush();
  });
  return result;
};
