/*
 * mha-ref: the interactive view of an attention-weight figure.
 *
 * Each <div class="mha-attn"> holds, in a <script type="application/json">, the exact weights
 * that mha_ref.tutorial.plotting.plot_heads drew (see mha_ref/tutorial/interactive.py). This
 * builds from them: a head picker (and a layer picker when there are several layers), one head
 * as a grid of cells, or all heads as small multiples, a line that reads out the weight under
 * the pointer or the keyboard focus, and the same numbers as a table.
 *
 * Keyboard (the hint above the grid says it in this order): Tab reaches the layer menu, the head
 * picker (arrow keys change the head), the view's buttons, then the grid (arrow keys move between
 * cells, Home/End go to the row's ends, Page Up/Page Down change the head, Enter pins the row)
 * or, in the token view, the query tokens (arrow keys move, Enter pins), or, in the overview of
 * every layer's heads, its grid of heads (one tab stop: arrow keys move between heads, Enter
 * shows the head alone); Escape unpins. Numbers
 * are shown to 3 decimals ("<0.001" for a smaller positive one), the exact value in the
 * element's title. A view of many heads (weights_decimals set) carries its weights rounded, as
 * integers in units of 1 / weights_scale (12 for 0.012 in thousandths): 0 is an exact zero (a
 * masked position), -1 a positive weight that rounds to 0, shown "<0.001"; its titles say the
 * values are rounded instead of giving an exact one. With several layers, an
 * "all layers x heads" overview shows every head at once. When the data carries a model
 * ("live", see mha_ref.tutorial.live_views.attach_live_model), the reader edits the sequence
 * and this script runs the model's forward pass on it. No library, no request: it only reads
 * the data on the page.
 */
(function () {
  "use strict";

  var WORDS = {
    en: {
      view: "Interactive attention weights",
      heads: "Heads",
      all: "All heads",
      head: "head",
      masks: "Masks",
      allMasks: "All masks",
      mask: "mask",
      layerWord: "layer", // what a row of heads is called, unless the page names it (layer_word)
      layer: "{One}",
      query: "query",
      key: "key",
      showTable: "Show as table",
      lines: "Token view",
      linesLabel: "token view: a line from each query token (left) to each key token (right), " +
        "as opaque as its weight; click a query token to see its lines alone",
      hideTable: "Hide table",
      blocked: "blocked by the mask",
      nan: "no weight (NaN: nothing left to attend to)",
      // the keyboard hint, in the order Tab visits the view's parts
      tabStart: "Keyboard: Tab goes to ",
      tabLive: "the sequence's text box, the predictions, ",
      tabLayer: "the {one} menu, ",
      tabHeads: "the head buttons (the arrow keys change the head), ",
      tabMasks: "the mask buttons (the arrow keys change the mask), ",
      tabButtons: "the view's buttons, ",
      tabGrid: "then the grid (the arrow keys move between cells and read each weight; Enter " +
        "pins the row, Escape unpins it). Mouse: hover a cell; click a query token to pin its row.",
      tabLines: "then the query tokens (the arrow keys move between them and read their largest " +
        "weights; Enter pins a token's lines, Escape unpins them). Mouse: click a query token " +
        "to see its lines alone.",
      tabAll: "then each head's button, which shows that head alone.",
      tabOverview: "then the grid of heads (the arrow keys move between heads, a row per {one}; " +
        "Enter shows that head alone). Mouse: hover a head to read its weights; click it to " +
        "show it alone.",
      hintTouch: "Tap a cell to read its weight; tap a query token to pin its row.",
      overview: "Heads by {one}",
      overviewLabel: "the heads shown, a row per {one} and a column per head",
      exact: "exact value",
      roundedTo: "rounded to {d} decimals",
      liveTitle: "The model, running in this page",
      liveInput: "Sequence",
      liveHelp: "Type or edit tokens ({first} to {last}, 1 to {max} of them; spaces are " +
        "ignored); the model runs in the page on each change and redraws its heads below.",
      liveBad: "Not a token: “{bad}”. The tokens are {first} to {last}.",
      liveLong: "{n} tokens: the model takes at most {max} (its position embedding has {max} rows).",
      liveEmpty: "Type at least one token.",
      // after the error's sentence: a space in English, none after a Chinese full stop
      liveStale: " No predictions for this input; the heads below, greyed out, are still those " +
        "of the last valid sequence, “{seq}”.",
      livePredicts: "After the last token “{token}”, the model predicts “{next}” " +
        "(probability {p}).",
      livePosition: "position",
      liveToken: "token",
      liveNext: "predicted next token",
      liveProb: "probability",
      liveTable: "The model's prediction of the next token at each position (✓: the " +
        "sequence's next token is that one)",
      grid: "rows are queries, columns are keys",
      pinned: "pinned row",
      pin: "pin this row",
      showHead: "show this head alone",
      scale: "colour scale",
      rowTotal: "largest weights",
      sep: ", ",
      colon: ": ",
      space: " ",
    },
    zh_CN: {
      view: "注意力权重（交互）",
      heads: "注意力头",
      all: "全部头",
      head: "头",
      masks: "掩码",
      allMasks: "全部掩码",
      mask: "掩码",
      layerWord: "层",
      layer: "{One}",
      query: "查询",
      key: "键",
      showTable: "以表格显示",
      lines: "词元连线",
      linesLabel: "词元连线：从每个查询词元（左）到每个键词元（右）画一条线，权重越大线越深；" +
        "点击查询词元只看它的连线",
      hideTable: "隐藏表格",
      blocked: "被掩码屏蔽",
      nan: "无权重（NaN：没有可关注的键）",
      tabStart: "键盘：按 Tab 键依次到",
      tabLive: "序列的文本框、预测表、",
      tabLayer: "{one}的菜单、",
      tabHeads: "各个头的按钮（方向键切换头）、",
      tabMasks: "各个掩码的按钮（方向键切换掩码）、",
      tabButtons: "视图的按钮，",
      tabGrid: "最后到网格（方向键在格子间移动并读出权重；Enter 键固定该行，Esc 键取消固定）。" +
        "鼠标：把鼠标移到格子上即可读出权重；点击查询词元可固定该行。",
      tabLines: "最后到查询词元（方向键在词元间移动并读出它最大的权重；Enter 键固定它的连线，" +
        "Esc 键取消固定）。鼠标：点击查询词元只看它的连线。",
      tabAll: "最后到每个头的按钮（只显示这个头）。",
      tabOverview: "最后到头的网格（方向键在头之间移动，每{one}一行；Enter 键只显示这个头）。" +
        "鼠标：把鼠标移到头上即可读出权重；点击它只显示这个头。",
      hintTouch: "点按格子读出权重；点按查询词元固定该行。",
      overview: "按{one}排列的头",
      overviewLabel: "本图的头：每{one}一行，每个头一列",
      exact: "精确值",
      roundedTo: "四舍五入到 {d} 位小数",
      liveTitle: "在本页中运行的模型",
      liveInput: "序列",
      liveHelp: "输入或修改词元（{first} 到 {last}，1 到 {max} 个；空格会被忽略）；" +
        "每次修改后，模型都在本页中重新运行，并重画下面各个头的权重。",
      liveBad: "不是词元：“{bad}”。词元是 {first} 到 {last}。",
      liveLong: "{n} 个词元：模型最多接受 {max} 个（它的位置嵌入只有 {max} 行）。",
      liveEmpty: "请至少输入一个词元。",
      liveStale: "这个输入没有预测结果；下方变灰的注意力头显示的仍是上一个有效序列“{seq}”。",
      livePredicts: "在最后一个词元“{token}”之后，模型预测下一个是“{next}”（概率 {p}）。",
      livePosition: "位置",
      liveToken: "词元",
      liveNext: "预测的下一个词元",
      liveProb: "概率",
      liveTable: "模型在每个位置对下一个词元的预测（✓：序列的下一个词元正是它）",
      grid: "行是查询，列是键",
      pinned: "已固定的行",
      pin: "固定这一行",
      showHead: "只显示这个头",
      scale: "颜色刻度",
      rowTotal: "最大的权重",
      sep: "，",
      colon: "：",
      space: "",
    },
  };

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (attrs[name] !== null && attrs[name] !== undefined) node.setAttribute(name, attrs[name]);
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /* the colour of weight v on the figure's scale: linear between the colour map's stops */
  function colour(data, v) {
    var stops = data.colours;
    var t = Math.max(0, Math.min(1, v / data.vmax)) * (stops.length - 1);
    var i = Math.min(stops.length - 2, Math.floor(t));
    var f = t - i;
    var a = parseInt(stops[i].slice(1), 16);
    var b = parseInt(stops[i + 1].slice(1), 16);
    var rgb = [16, 8, 0].map(function (shift) {
      var x = (a >> shift) & 255;
      var y = (b >> shift) & 255;
      return Math.round(x + (y - x) * f);
    });
    return "rgb(" + rgb.join(",") + ")";
  }

  /* a weight as the reader sees it: 3 decimals ("<0.001" for a smaller positive weight); the
     exact value (the shortest decimal of the float the build computed) goes in a title */
  function rounded(v) {
    if (v > 0 && v < 0.0005) return "<0.001";
    return v.toFixed(3);
  }

  function coarsePointer() {
    return Boolean(window.matchMedia && window.matchMedia("(pointer: coarse)").matches);
  }

  /* the flag a decoded weight carries when it was positive but rounded to 0 (sent as -1): the
     smallest positive number, so that it sorts above the zeros, is coloured as 0 and reads
     "<0.001" in rounded(); titleValue() never shows it as a number */
  var BELOW_ONE_UNIT = Number.MIN_VALUE;

  // weights sent as integers (a view of many heads, rounded): back to numbers, once
  function decodeWeights(data) {
    if (!data.weights_scale) return;
    var scale = data.weights_scale;
    data.weights = data.weights.map(function (head) {
      return head.map(function (row) {
        return row.map(function (v) {
          return v === null ? null : v === -1 ? BELOW_ONE_UNIT : v / scale;
        });
      });
    });
    delete data.weights_scale;
  }

  function View(root, data) {
    decodeWeights(data);
    this.root = root;
    this.data = data;
    this.w = withLayerWord(WORDS[data.lang] || WORDS.en, data.layer_word);
    this.numHeads = data.weights.length;
    this.layerNames = uniq(data.layers || []);
    this.layer = this.layerNames.length ? this.layerNames[0] : null;
    this.head = this.headsOfLayer()[0];
    this.all = false;
    this.overview = false;
    this.pinned = null;
    this.cell = [0, 0];
    if (data.live && data.live.initial_layer) {
      this.layer = data.live.initial_layer;
      this.head = this.headsOfLayer()[0];
    }
    this.build();
    if (data.live) this.live = new Live(this);
  }

  function uniq(list) {
    return list.filter(function (x, i) { return list.indexOf(x) === i; });
  }

  View.prototype.name = function (h) {
    var d = this.data;
    if (d.names && d.names[h]) return d.names[h];
    return (d.kind === "mask" ? this.w.mask : this.w.head) + " " + h;
  };

  View.prototype.headsOfLayer = function () {
    var heads = [];
    for (var h = 0; h < this.numHeads; h++) {
      if (this.layer === null || this.data.layers[h] === this.layer) heads.push(h);
    }
    return heads;
  };

  View.prototype.isBlocked = function (h, i, j) {
    var b = this.data.blocked;
    return Boolean(b && b[h][i].charAt(j) === "1");
  };

  /* what a cell holds, in words: "head 1, query “cat”, key “the”: 0.31724066" */
  View.prototype.describe = function (h, i, j) {
    var d = this.data;
    var w = this.w;
    var v = d.weights[h][i][j];
    var value = this.isBlocked(h, i, j) ? d.blocked_label || w.blocked
      : v === null ? w.nan : d.kind === "mask" ? d.allowed_label : rounded(v);
    return this.name(h) + w.sep + w.query + " “" + d.queries[i] + "”" + w.sep + w.key +
      " “" + d.keys[j] + "”" + w.colon + value;
  };

  /* the words before the values of a title: "exact value", or how they were rounded */
  View.prototype.titleWords = function () {
    var d = this.data.weights_decimals;
    return d ? fill(this.w.roundedTo, { d: d }) : this.w.exact;
  };

  /* a weight as a title gives it: the shortest decimal of the float the build computed, or,
     in a rounded view, the number it was rounded to ("<0.001" below one unit) */
  View.prototype.titleValue = function (v) {
    var d = this.data.weights_decimals;
    if (!d) return String(v);
    if (v === BELOW_ONE_UNIT) return "<" + Math.pow(10, -d).toFixed(d);
    return v.toFixed(d);
  };

  /* the exact (or rounded) weight of a cell, for its title; "" where the reader sees no number */
  View.prototype.exact = function (h, i, j) {
    var v = this.data.weights[h][i][j];
    if (this.isBlocked(h, i, j) || v === null || this.data.kind === "mask") return "";
    // a 0 is exact even in a rounded view: a positive weight that rounds to 0 is sent as -1
    if (v === 0) return this.w.exact + this.w.colon + "0";
    return this.titleWords() + this.w.colon + this.titleValue(v);
  };

  View.prototype.hint = function () {
    var w = this.w;
    if (coarsePointer()) return w.hintTouch;
    return w.tabStart + (this.data.live ? w.tabLive : "") +
      (this.layerNames.length > 1 ? w.tabLayer : "") +
      (this.data.kind === "mask" ? w.tabMasks : w.tabHeads) + w.tabButtons +
      (this.overview ? w.tabOverview : this.all ? w.tabAll : this.lines ? w.tabLines : w.tabGrid);
  };

  View.prototype.say = function (text, title) {
    this.readout.textContent = text;
    if (title) this.readout.title = title;
    else this.readout.removeAttribute("title");
  };

  View.prototype.build = function () {
    var self = this;
    var d = this.data;
    var w = this.w;
    var root = this.root;
    root.setAttribute("role", "group");
    root.setAttribute("aria-label", d.title ? w.view + w.colon + d.title : w.view);
    root.setAttribute("lang", d.lang === "zh_CN" ? "zh-CN" : "en");

    var bar = el("div", { class: "mha-attn-bar" });
    if (this.layerNames.length > 1) {
      var label = el("label", { class: "mha-attn-layer" }, w.layer + " ");
      this.layerSelect = el("select");
      this.layerNames.forEach(function (name) {
        self.layerSelect.appendChild(el("option", { value: name }, name));
      });
      this.layerSelect.value = this.layer;
      this.layerSelect.addEventListener("change", function () {
        self.layer = self.layerSelect.value;
        self.head = self.headsOfLayer()[0];
        self.overview = false;
        self.renderHeads();
        self.render();
      });
      label.appendChild(this.layerSelect);
      bar.appendChild(label);
      // every layer's heads at once, rows = layers (mha_ref.tutorial.live_views.attach_layer_head_view)
      this.overviewButton = el("button", { type: "button", class: "mha-attn-overview-toggle",
        "aria-pressed": "false" }, w.overview);
      this.overviewButton.addEventListener("click", function () {
        self.overview = !self.overview;
        self.overviewAt = null; // the grid's tab stop starts on the layer and head shown
        self.syncHeadButtons();
        self.render();
      });
      bar.appendChild(this.overviewButton);
    }
    this.headBar = el("div", { class: "mha-attn-heads", role: "toolbar",
      "aria-label": d.kind === "mask" ? w.masks : w.heads });
    this.headBar.addEventListener("keydown", function (event) { self.onHeadKey(event); });
    bar.appendChild(this.headBar);
    if (this.overviewButton) bar.appendChild(this.overviewButton);
    this.lines = false;
    if (d.kind !== "mask") {
      this.linesButton = el("button", { type: "button", class: "mha-attn-lines-toggle",
        "aria-pressed": "false" }, w.lines);
      this.linesButton.addEventListener("click", function () {
        self.lines = !self.lines;
        self.render();
      });
      bar.appendChild(this.linesButton);
    }
    this.tableButton = el("button", { type: "button", class: "mha-attn-toggle",
      "aria-expanded": "false" }, w.showTable);
    this.tableButton.addEventListener("click", function () { self.toggleTable(); });
    bar.appendChild(this.tableButton);
    root.appendChild(bar);

    // the keyboard hint (it changes with the view's mode), then the line that reads out weights
    View.count = (View.count || 0) + 1;
    this.hintId = "mha-attn-hint-" + View.count;
    this.hintBox = el("p", { class: "mha-attn-hint", id: this.hintId });
    root.appendChild(this.hintBox);
    this.readout = el("p", { class: "mha-attn-readout", "aria-live": "polite" });
    root.appendChild(this.readout);
    this.scroll = el("div", { class: "mha-attn-scroll" });
    root.appendChild(this.scroll);
    root.appendChild(this.scale());
    this.tableBox = el("div", { class: "mha-attn-table" });
    this.tableBox.hidden = true;
    root.appendChild(this.tableBox);

    // one listener for every cell, in the grid and in the small multiples
    this.scroll.addEventListener("mouseover", function (event) {
      var cell = event.target.closest("[data-cell]");
      if (cell) self.read(cell);
    });
    this.scroll.addEventListener("focusin", function (event) {
      var cell = event.target.closest("[data-cell]");
      if (cell) self.read(cell);
      var query = event.target.closest("[data-query]");
      if (query) self.readRow(self.head, Number(query.getAttribute("data-query")));
      var head = event.target.closest("[data-overview]");
      if (head) self.say(head.getAttribute("aria-label"));
    });
    // a tap on a touch screen reads the cell too (no hover there)
    this.scroll.addEventListener("click", function (event) {
      var cell = event.target.closest("[role='gridcell'][data-cell]");
      if (cell) self.read(cell);
    });
    this.scroll.addEventListener("keydown", function (event) {
      if (event.target.closest("[data-query]")) self.onQueryKey(event);
      else if (event.target.closest("[data-overview]")) self.onOverviewKey(event);
      else self.onGridKey(event);
    });
    // Escape unpins, wherever the focus is in the view
    root.addEventListener("keydown", function (event) {
      if ((event.key === "Escape" || event.key === "Esc") && self.pinned !== null) {
        event.preventDefault();
        self.pin(self.pinned);
      }
    });
    this.renderHeads();
    this.render();
  };

  View.prototype.scale = function () {
    var d = this.data;
    var box = el("div", { class: "mha-attn-scale", "aria-hidden": "true" });
    if (d.kind === "mask") {
      var swatch = el("span", { class: "mha-attn-swatch" });
      swatch.style.backgroundColor = d.colours[1];
      box.appendChild(swatch);
      box.appendChild(el("span", {}, d.allowed_label));
      box.appendChild(el("span", { class: "mha-attn-swatch mha-attn-blocked" }));
      box.appendChild(el("span", {}, d.blocked_label));
      return box;
    }
    box.appendChild(el("span", {}, "0"));
    var bar = el("span", { class: "mha-attn-scale-bar" });
    bar.style.background = "linear-gradient(to right," + d.colours.join(",") + ")";
    box.appendChild(bar);
    box.appendChild(el("span", {}, String(Math.round(d.vmax * 1000) / 1000)));
    if (d.colorbar_label) box.appendChild(el("span", { class: "mha-attn-scale-label" },
      d.colorbar_label));
    if (d.blocked) {
      box.appendChild(el("span", { class: "mha-attn-swatch mha-attn-blocked" }));
      box.appendChild(el("span", {}, d.blocked_label || this.w.blocked));
    }
    return box;
  };

  View.prototype.renderHeads = function () {
    var self = this;
    var w = this.w;
    var bar = this.headBar;
    bar.textContent = "";
    var heads = this.headsOfLayer();
    var choices = heads.length > 1 ? [-1].concat(heads) : heads;
    choices.forEach(function (h) {
      var button = el("button", { type: "button", "data-head": h },
        h < 0 ? (self.data.kind === "mask" ? w.allMasks : w.all) : self.name(h));
      button.addEventListener("click", function () { self.choose(h); });
      bar.appendChild(button);
    });
    this.syncHeadButtons();
  };

  View.prototype.syncHeadButtons = function () {
    var current = this.overview ? null : this.all ? -1 : this.head;
    Array.prototype.forEach.call(this.headBar.children, function (button) {
      var on = Number(button.getAttribute("data-head")) === current;
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.tabIndex = on || (current === null && !button.previousSibling) ? 0 : -1;
    });
  };

  View.prototype.choose = function (h, focusButton) {
    this.all = h < 0;
    this.overview = false;
    if (h >= 0) this.head = h;
    this.syncHeadButtons();
    this.render();
    if (focusButton) {
      var pressed = this.headBar.querySelector("[aria-pressed='true']");
      if (pressed) pressed.focus();
    }
  };

  View.prototype.onHeadKey = function (event) {
    var buttons = Array.prototype.slice.call(this.headBar.children);
    var at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    var to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1,
      Home: 0, End: buttons.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    to = (to + buttons.length) % buttons.length;
    this.choose(Number(buttons[to].getAttribute("data-head")), true);
  };

  View.prototype.render = function () {
    this.scroll.textContent = "";
    if (this.overviewButton) {
      this.overviewButton.setAttribute("aria-pressed", this.overview ? "true" : "false");
    }
    if (this.linesButton) this.linesButton.setAttribute("aria-pressed", this.lines ? "true" : "false");
    if (this.overview) {
      this.scroll.appendChild(this.overviewGrid());
    } else if (this.all) {
      var box = el("div", { class: "mha-attn-multiples" });
      // small multiples about 9 rem wide whatever the sequence length, 5 to 16 px a cell
      var side = Math.max(5, Math.min(16, Math.floor(144 / this.data.keys.length)));
      box.style.setProperty("--mha-mini", side + "px");
      var self = this;
      this.headsOfLayer().forEach(function (h) { box.appendChild(self.multiple(h)); });
      this.scroll.appendChild(box);
    } else if (this.lines) {
      this.scroll.appendChild(this.tokenView(this.head));
    } else {
      this.scroll.appendChild(this.grid(this.head));
    }
    this.root.classList.toggle("mha-attn-is-pinned", this.pinned !== null);
    if (!this.tableBox.hidden) this.renderTable();
    this.hintBox.textContent = this.hint();
  };

  /* every head of every layer, as a grid: a row per layer, a column per head, each cell a small
     heatmap of that head (a 30-layer, 9-head model gives 30 rows of 9). The heatmaps share the
     column's width, so a row fits the page; the grid is one tab stop, as the single-head grid:
     the arrow keys move between heads (roving tabindex), Enter or a click shows the head alone */
  View.prototype.overviewGrid = function () {
    var self = this;
    var d = this.data;
    var w = this.w;
    var grid = el("div", { class: "mha-attn-overview", role: "grid",
      "aria-label": w.overviewLabel, "aria-describedby": this.hintId });
    var perRow = 0;
    this.layerNames.forEach(function (layer) {
      perRow = Math.max(perRow, self.headsIn(layer).length);
    });
    // each head's column shares the width, up to 6 rem (a model of 2 heads gets no giant ones)
    grid.style.gridTemplateColumns = "max-content repeat(" + perRow + ", minmax(0, 6rem))";
    // rows and columns are headed by numbers where the names are a word and a number ("block 3",
    // "block 3 head 5"), the two words in the corner ("block \ head"), so 9 columns fit a phone
    var first = this.headsIn(this.layerNames[0]);
    var headName = function (h, layer) { // "block 3 head 5" -> "head 5"
      var name = self.name(h);
      return name.indexOf(layer) === 0 ? name.slice(layer.length).trim() : name;
    };
    var numbered = function (labels) { // ["head 0", "head 1"] -> ["head", ["0", "1"]], or null
      var word = labels[0].replace(/\s*\d+$/, "");
      var numbers = labels.map(function (label) {
        var rest = label.slice(word.length).trim();
        return label.indexOf(word) === 0 && /^\d+$/.test(rest) ? rest : null;
      });
      return word && numbers.indexOf(null) < 0 ? [word, numbers] : null;
    };
    var rows = numbered(this.layerNames);
    var columns = numbered(first.map(function (h) { return headName(h, self.layerNames[0]); }));
    if (!rows || !columns) rows = columns = null; // then the names in full
    var head = el("div", { role: "row", class: "mha-attn-row" });
    head.appendChild(el("span", { role: "columnheader", class: "mha-attn-corner" },
      rows ? rows[0] + " \\ " + columns[0] : ""));
    for (var k = 0; k < perRow; k++) {
      head.appendChild(el("span", { role: "columnheader", class: "mha-attn-overview-head" },
        k >= first.length ? "" : columns ? columns[1][k] : headName(first[k], this.layerNames[0])));
    }
    grid.appendChild(head);
    var at = this.overviewAt || [Math.max(0, this.layerNames.indexOf(this.layer)),
      Math.max(0, this.headsIn(this.layer).indexOf(this.head))];
    this.overviewAt = at;
    this.layerNames.forEach(function (layer, row) {
      var line = el("div", { role: "row", class: "mha-attn-row" });
      line.appendChild(el("span", { role: "rowheader", class: "mha-attn-overview-layer" },
        rows ? rows[1][row] : layer));
      var heads = self.headsIn(layer);
      for (var k = 0; k < perRow; k++) {
        if (k >= heads.length) {
          line.appendChild(el("span", { role: "gridcell" }));
          continue;
        }
        var name = layer && self.name(heads[k]).indexOf(layer) < 0
          ? layer + " " + self.name(heads[k]) : self.name(heads[k]);
        var cell = el("div", { role: "gridcell", class: "mha-attn-overview-cell",
          "data-overview": row + "," + k, tabindex: row === at[0] && k === at[1] ? "0" : "-1",
          "aria-label": name + w.colon + w.showHead });
        cell.appendChild(self.heatmap(heads[k]));
        cell.addEventListener("click", self.openHead.bind(self, heads[k], layer));
        line.appendChild(cell);
      }
      grid.appendChild(line);
    });
    // the pointer over a heatmap reads the weight under it
    grid.addEventListener("mousemove", function (event) {
      var map = event.target.closest("canvas[data-head]");
      if (!map) return;
      var box = map.getBoundingClientRect();
      var h = Number(map.getAttribute("data-head"));
      var i = Math.floor(((event.clientY - box.top) / box.height) * d.queries.length);
      var j = Math.floor(((event.clientX - box.left) / box.width) * d.keys.length);
      i = Math.max(0, Math.min(d.queries.length - 1, i));
      j = Math.max(0, Math.min(d.keys.length - 1, j));
      self.say(self.describe(h, i, j), self.exact(h, i, j));
    });
    return grid;
  };

  /* one head's weights as a canvas of one pixel per weight, drawn with the view's colours and
     scaled up by the page (pixelated): 270 heads of 23 x 23 weights as spans were 143,000
     elements, seconds to lay out on every resize */
  View.prototype.heatmap = function (h) {
    var d = this.data;
    var canvas = el("canvas", { class: "mha-attn-overview-map", "data-head": h,
      width: d.keys.length, height: d.queries.length, "aria-hidden": "true" });
    var style = getComputedStyle(this.root);
    var blocked = style.getPropertyValue("--mha-blocked-b").trim() || "#9a9a9a";
    var nan = style.getPropertyValue("--mha-nan").trim() || "#c8c8c8";
    var context = canvas.getContext("2d");
    for (var i = 0; i < d.queries.length; i++) {
      for (var j = 0; j < d.keys.length; j++) {
        var v = d.weights[h][i][j];
        context.fillStyle = this.isBlocked(h, i, j) ? blocked : v === null ? nan : colour(d, v);
        context.fillRect(j, i, 1, 1);
      }
    }
    return canvas;
  };

  /* the overview's keys: the arrow keys, Home and End move (as in the single-head grid), Enter or
     Space shows the head alone */
  View.prototype.onOverviewKey = function (event) {
    var cell = event.target.closest("[data-overview]");
    var at = cell.getAttribute("data-overview").split(",").map(Number);
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      cell.click();
      return;
    }
    var layer = this.layerNames[at[0]];
    var to = this.step(event.key, at[0], at[1], this.layerNames.length,
      this.headsIn(layer).length);
    if (!to) return;
    event.preventDefault();
    // a shorter row (fewer heads in that layer) keeps the last head it has
    to[1] = Math.min(to[1], this.headsIn(this.layerNames[to[0]]).length - 1);
    this.overviewAt = to;
    this.rove(this.scroll.querySelector("[data-overview='" + to[0] + "," + to[1] + "']"));
  };

  /* show head h of layer alone (from the overview or the small multiples) */
  View.prototype.openHead = function (h, layer) {
    if (layer && layer !== this.layer) {
      this.layer = layer;
      this.layerSelect.value = layer;
      this.renderHeads();
    }
    this.choose(h, true);
  };

  View.prototype.headsIn = function (layer) {
    var heads = [];
    for (var h = 0; h < this.numHeads; h++) if (this.data.layers[h] === layer) heads.push(h);
    return heads;
  };

  View.prototype.paint = function (node, h, i, j) {
    var v = this.data.weights[h][i][j];
    if (this.isBlocked(h, i, j)) node.classList.add("mha-attn-blocked");
    else if (v === null) node.classList.add("mha-attn-nan");
    else node.style.backgroundColor = colour(this.data, v);
    if (this.pinned === i) node.classList.add("mha-attn-pin");
  };

  /* one head: an ARIA grid, one focusable cell at a time (roving tabindex) */
  View.prototype.grid = function (h) {
    var self = this;
    var d = this.data;
    var w = this.w;
    var grid = el("div", { class: "mha-attn-grid", role: "grid",
      "aria-label": this.name(h) + w.sep + w.grid, "aria-describedby": this.hintId });
    grid.style.gridTemplateColumns = "auto repeat(" + d.keys.length + ", var(--mha-cell))";
    var head = el("div", { role: "row", class: "mha-attn-row" });
    head.appendChild(el("span", { role: "columnheader", class: "mha-attn-corner" },
      (d.ylabel || w.query) + " \\ " + (d.xlabel || w.key)));
    d.keys.forEach(function (k) {
      head.appendChild(el("span", { role: "columnheader", class: "mha-attn-key" }, k));
    });
    grid.appendChild(head);
    d.queries.forEach(function (q, i) {
      var row = el("div", { role: "row", class: "mha-attn-row" });
      var rowHead = el("span", { role: "rowheader", class: "mha-attn-query" });
      var pin = el("button", { type: "button", tabindex: "-1", "aria-pressed":
        self.pinned === i ? "true" : "false", title: w.pin }, q);
      pin.addEventListener("click", function () { self.pin(i); });
      if (self.pinned === i) rowHead.classList.add("mha-attn-pin");
      rowHead.appendChild(pin);
      row.appendChild(rowHead);
      d.keys.forEach(function (k, j) {
        var at = self.cell[0] === i && self.cell[1] === j;
        var cell = el("span", { role: "gridcell", "data-cell": h + "," + i + "," + j,
          tabindex: at ? "0" : "-1", "aria-label": self.describe(h, i, j),
          title: self.exact(h, i, j) || null });
        self.paint(cell, h, i, j);
        row.appendChild(cell);
      });
      grid.appendChild(row);
    });
    return grid;
  };

  /* one head as bertviz draws it: queries left, keys right, a line per weight */
  View.prototype.tokenView = function (h) {
    var self = this;
    var d = this.data;
    var NS = "http://www.w3.org/2000/svg";
    var rowHeight = 22;
    var width = 300;
    var left = 120;
    var right = 180;
    var rows = Math.max(d.queries.length, d.keys.length);
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "mha-attn-lines");
    svg.setAttribute("width", width);
    svg.setAttribute("height", rows * rowHeight + 6);
    svg.setAttribute("role", "group");
    svg.setAttribute("aria-label", this.name(h) + this.w.sep + this.w.linesLabel);
    svg.setAttribute("aria-describedby", this.hintId);
    function text(x, i, anchor, label) {
      var node = document.createElementNS(NS, "text");
      node.setAttribute("x", x);
      node.setAttribute("y", (i + 0.5) * rowHeight + 3);
      node.setAttribute("text-anchor", anchor);
      node.setAttribute("dominant-baseline", "middle");
      node.textContent = label;
      svg.appendChild(node);
      return node;
    }
    d.queries.forEach(function (q, i) {
      d.keys.forEach(function (k, j) {
        var v = d.weights[h][i][j];
        if (v === null || self.isBlocked(h, i, j) || v <= 0) return;
        var line = document.createElementNS(NS, "line");
        line.setAttribute("x1", left + 4);
        line.setAttribute("y1", (i + 0.5) * rowHeight + 3);
        line.setAttribute("x2", right - 4);
        line.setAttribute("y2", (j + 0.5) * rowHeight + 3);
        line.setAttribute("stroke-opacity", Math.min(1, v / d.vmax).toFixed(3));
        line.setAttribute("data-cell", h + "," + i + "," + j);
        line.setAttribute("aria-hidden", "true");
        if (self.pinned !== null) {
          line.setAttribute("class", self.pinned === i ? "mha-attn-pin" : "mha-attn-faded");
        }
        svg.appendChild(line);
      });
      // a query token is a toggle button: focusable (one at a time, the arrow keys move), and
      // it says whether its lines are pinned
      var label = text(left, i, "end", q);
      label.setAttribute("class", "mha-attn-line-query" + (self.pinned === i ? " mha-attn-on" : ""));
      label.setAttribute("role", "button");
      label.setAttribute("data-query", i);
      label.setAttribute("tabindex", i === (self.pinned === null ? self.cell[0] : self.pinned)
        ? "0" : "-1");
      label.setAttribute("aria-pressed", self.pinned === i ? "true" : "false");
      label.setAttribute("aria-label", self.w.query + " “" + q + "”" + self.w.colon + self.w.pin);
      label.addEventListener("click", function () { self.pin(i); });
    });
    d.keys.forEach(function (k, j) {
      text(right, j, "start", k).setAttribute("aria-hidden", "true");
    });
    return svg;
  };

  /* all heads: small multiples; each is a button that shows its head alone */
  View.prototype.multiple = function (h) {
    var figure = el("div", { class: "mha-attn-multiple" });
    var button = el("button", { type: "button", class: "mha-attn-multiple-title",
      "aria-label": this.name(h) + this.w.colon + this.w.showHead }, this.name(h));
    button.addEventListener("click", this.openHead.bind(this, h, null));
    figure.appendChild(button);
    figure.appendChild(this.mini(h));
    return figure;
  };

  /* one head's weights as a small heatmap, a span per cell (hovering one reads it) */
  View.prototype.mini = function (h) {
    var self = this;
    var d = this.data;
    var cells = el("div", { class: "mha-attn-mini", "aria-hidden": "true" });
    cells.style.gridTemplateColumns = "repeat(" + d.keys.length + ", var(--mha-mini))";
    d.queries.forEach(function (q, i) {
      d.keys.forEach(function (k, j) {
        var cell = el("span", { "data-cell": h + "," + i + "," + j });
        self.paint(cell, h, i, j);
        cells.appendChild(cell);
      });
    });
    return cells;
  };

  View.prototype.read = function (cell) {
    var at = cell.getAttribute("data-cell").split(",").map(Number);
    this.say(this.describe(at[0], at[1], at[2]), this.exact(at[0], at[1], at[2]));
  };

  /* pin query i's row (or unpin it if it is pinned); the focus stays on that query */
  View.prototype.pin = function (i) {
    var focusedCell = document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("[role='gridcell']");
    this.pinned = this.pinned === i ? null : i;
    this.cell = [i, this.cell[1]];
    this.render();
    if (this.pinned !== null) this.readRow(this.all ? this.headsOfLayer()[0] : this.head, i);
    var target = focusedCell
      ? this.scroll.querySelector("[data-cell='" + this.head + "," + i + "," + this.cell[1] + "']")
      : null;
    if (target) {
      Array.prototype.forEach.call(this.scroll.querySelectorAll("[role='gridcell']"),
        function (c) { c.tabIndex = -1; });
      target.tabIndex = 0;
    }
    target = target || this.scroll.querySelector("[data-query='" + i + "']") ||
      this.scroll.querySelectorAll(".mha-attn-query button")[i];
    if (target) target.focus();
  };

  /* the token view's query tokens: Up/Down (and Left/Right) move, Home/End go to the ends,
     Enter or Space pins */
  View.prototype.onQueryKey = function (event) {
    var i = Number(event.target.getAttribute("data-query"));
    var rows = this.data.queries.length;
    var to = { ArrowDown: i + 1, ArrowRight: i + 1, ArrowUp: i - 1, ArrowLeft: i - 1,
      Home: 0, End: rows - 1 }[event.key];
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      this.pin(i);
      return;
    }
    if (to === undefined) return;
    event.preventDefault();
    to = Math.max(0, Math.min(rows - 1, to));
    this.cell = [to, this.cell[1]];
    var labels = this.scroll.querySelectorAll("[data-query]");
    Array.prototype.forEach.call(labels, function (label) { label.setAttribute("tabindex", "-1"); });
    labels[to].setAttribute("tabindex", "0");
    labels[to].focus();
  };

  /* the pinned row in words: its largest weights, largest first */
  View.prototype.readRow = function (h, i) {
    var self = this;
    var d = this.data;
    var w = this.w;
    var order = d.keys.map(function (k, j) { return j; }).filter(function (j) {
      return !self.isBlocked(h, i, j) && d.weights[h][i][j] !== null;
    });
    order.sort(function (a, b) { return d.weights[h][i][b] - d.weights[h][i][a]; });
    var shown = order.slice(0, d.kind === "mask" ? order.length : 3);
    var top = shown.map(function (j) {
      return "“" + d.keys[j] + "”" + (d.kind === "mask" ? "" : " " + rounded(d.weights[h][i][j]));
    });
    var exact = d.kind === "mask" ? "" : this.titleWords() + w.colon + shown.map(function (j) {
      return "“" + d.keys[j] + "” " + self.titleValue(d.weights[h][i][j]);
    }).join(w.sep);
    this.say(this.name(h) + w.sep + (this.pinned === i ? w.pinned + w.space : "") + w.query +
      w.space + "“" + d.queries[i] + "”" + w.colon +
      (d.kind === "mask" ? d.allowed_label : w.rowTotal) + w.colon + top.join(w.sep), exact);
  };

  /* where an arrow key, Home or End moves (row i, column j) in a grid of rows x cols; null
     for another key. The single-head grid and the overview move alike */
  View.prototype.step = function (key, i, j, rows, cols) {
    switch (key) {
      case "ArrowRight": return [i, Math.min(cols - 1, j + 1)];
      case "ArrowLeft": return [i, Math.max(0, j - 1)];
      case "ArrowDown": return [Math.min(rows - 1, i + 1), j];
      case "ArrowUp": return [Math.max(0, i - 1), j];
      case "Home": return [i, 0];
      case "End": return [i, cols - 1];
      default: return null;
    }
  };

  /* the grid's one tab stop moves to target, which takes the focus (roving tabindex) */
  View.prototype.rove = function (target) {
    Array.prototype.forEach.call(this.scroll.querySelectorAll("[role='gridcell']"),
      function (c) { c.tabIndex = -1; });
    target.tabIndex = 0;
    target.focus();
  };

  View.prototype.onGridKey = function (event) {
    var cell = event.target.closest("[role='gridcell']");
    if (!cell) return;
    var at = cell.getAttribute("data-cell").split(",").map(Number);
    var i = at[1];
    var j = at[2];
    var heads = this.headsOfLayer();
    var k = heads.indexOf(this.head);
    var to = this.step(event.key, i, j, this.data.queries.length, this.data.keys.length);
    if (to) {
      i = to[0];
      j = to[1];
    } else {
      switch (event.key) {
        case "PageDown": k = (k + 1) % heads.length; break;
        case "PageUp": k = (k - 1 + heads.length) % heads.length; break;
        case "Enter": case " ":
          event.preventDefault();
          this.pin(i);
          return;
        default: return;
      }
    }
    event.preventDefault();
    this.cell = [i, j];
    if (heads[k] !== this.head) this.choose(heads[k]);
    this.rove(this.scroll.querySelector("[data-cell='" + this.head + "," + i + "," + j + "']"));
  };

  View.prototype.toggleTable = function () {
    var open = this.tableBox.hidden;
    this.tableBox.hidden = !open;
    this.tableButton.setAttribute("aria-expanded", open ? "true" : "false");
    this.tableButton.textContent = open ? this.w.hideTable : this.w.showTable;
    if (open) this.renderTable();
  };

  /* the numbers of the heads shown, as tables: blocked cells say so */
  View.prototype.renderTable = function () {
    var self = this;
    var d = this.data;
    var w = this.w;
    this.tableBox.textContent = "";
    (this.all ? this.headsOfLayer() : [this.head]).forEach(function (h) {
      var table = el("table", { class: "mha-attn-numbers" });
      table.appendChild(el("caption", {}, self.name(h) + w.sep + w.grid));
      var head = el("tr");
      head.appendChild(el("td"));
      d.keys.forEach(function (k) { head.appendChild(el("th", { scope: "col" }, k)); });
      table.appendChild(el("thead")).appendChild(head);
      var body = el("tbody");
      d.queries.forEach(function (q, i) {
        var row = el("tr");
        row.appendChild(el("th", { scope: "row" }, q));
        d.keys.forEach(function (k, j) {
          var v = d.weights[h][i][j];
          var text = self.isBlocked(h, i, j) ? "—" : v === null ? "NaN"
            : d.kind === "mask" ? "✓" : rounded(v);
          var said = self.isBlocked(h, i, j) ? d.blocked_label || w.blocked
            : d.kind === "mask" ? d.allowed_label : null;
          row.appendChild(el("td", said ? { title: said, "aria-label": said }
            : { title: self.exact(h, i, j) || null }, text));
        });
        body.appendChild(row);
      });
      table.appendChild(body);
      var scroller = el("div", { class: "mha-attn-table-scroll", tabindex: "0",
        role: "region", "aria-label": self.name(h) });
      scroller.appendChild(table);
      self.tableBox.appendChild(scroller);
    });
  };

  /* ---------------------------------------------------------------------------------------
   * The live model: mha_ref.tutorial.live_views.attach_live_model put a trained
   * attention-only model (token and position embeddings, causal attention layers on a residual
   * stream, an unembedding) in the data; this runs its forward pass on the reader's sequence.
   * Its Python twin, mha_ref.tutorial.live_views.live_forward, is tested against the model.
   * --------------------------------------------------------------------------------------- */

  /* the base64 text of little-endian float32 numbers, as named tensors (Float32Arrays) */
  function unpack(model) {
    var bytes = atob(model.data);
    var buffer = new ArrayBuffer(bytes.length);
    var view = new Uint8Array(buffer);
    for (var b = 0; b < bytes.length; b++) view[b] = bytes.charCodeAt(b);
    var floats = new DataView(buffer);
    var tensors = {};
    var offset = 0;
    model.tensors.forEach(function (entry) {
      var size = entry[1].reduce(function (a, n) { return a * n; }, 1);
      var values = new Float64Array(size);
      for (var k = 0; k < size; k++) values[k] = floats.getFloat32(4 * (offset + k), true);
      tensors[entry[0]] = values;
      offset += size;
    });
    return tensors;
  }

  /* y = x W^T + b for one row x (length n), W stored row-major (m, n) */
  function linear(x, W, b, m, n) {
    var y = new Float64Array(m);
    for (var r = 0; r < m; r++) {
      var sum = b[r];
      for (var c = 0; c < n; c++) sum += W[r * n + c] * x[c];
      y[r] = sum;
    }
    return y;
  }

  /* the forward pass on token ids: {logits: L x V, weights: layers x heads x L x L} */
  function forward(model, p, ids) {
    var E = model.embed_dim;
    var H = model.num_heads;
    var D = E / H;
    var V = model.vocab_size;
    var L = ids.length;
    var tok = p["token_embedding.weight"];
    var pos = p["position_embedding.weight"];
    var x = ids.map(function (id, t) {
      var row = new Float64Array(E);
      for (var e = 0; e < E; e++) row[e] = tok[id * E + e] + pos[t * E + e];
      return row;
    });
    var weights = [];
    for (var layer = 0; layer < model.num_layers; layer++) {
      var name = "layers." + layer + ".";
      var qkv = x.map(function (row) {
        return linear(row, p[name + "in_proj_weight"], p[name + "in_proj_bias"], 3 * E, E);
      });
      var heads = [];
      var mixed = x.map(function () { return new Float64Array(E); });
      for (var h = 0; h < H; h++) {
        var rows = [];
        for (var i = 0; i < L; i++) {
          // scores of query i against keys 0..i (the causal mask blocks the rest)
          var scores = new Float64Array(L);
          var top = -Infinity;
          for (var j = 0; j <= i; j++) {
            var dot = 0;
            for (var c = 0; c < D; c++) dot += qkv[i][h * D + c] * qkv[j][E + h * D + c];
            scores[j] = dot / Math.sqrt(D);
            top = Math.max(top, scores[j]);
          }
          var total = 0;
          for (j = 0; j <= i; j++) { scores[j] = Math.exp(scores[j] - top); total += scores[j]; }
          var row = [];
          for (j = 0; j < L; j++) row.push(j <= i ? scores[j] / total : 0);
          for (j = 0; j <= i; j++) {
            for (c = 0; c < D; c++) mixed[i][h * D + c] += row[j] * qkv[j][2 * E + h * D + c];
          }
          rows.push(row);
        }
        heads.push(rows);
      }
      x = x.map(function (row, t) {
        var out = linear(mixed[t], p[name + "out_proj.weight"], p[name + "out_proj.bias"], E, E);
        var next = new Float64Array(E);
        for (var e = 0; e < E; e++) next[e] = row[e] + out[e];
        return next;
      });
      weights.push(heads);
    }
    var logits = x.map(function (row) {
      return Array.prototype.slice.call(linear(row, p["unembed.weight"], p["unembed.bias"], V, E));
    });
    return { logits: logits, weights: weights };
  }

  function softmax(row) {
    var top = Math.max.apply(null, row);
    var e = row.map(function (v) { return Math.exp(v - top); });
    var total = e.reduce(function (a, b) { return a + b; }, 0);
    return e.map(function (v) { return v / total; });
  }

  // the words with the page's name for a layer filled in ("block" on the real-model pages)
  function withLayerWord(words, layerWord) {
    var one = layerWord || words.layerWord;
    var names = { one: one, One: one.charAt(0).toUpperCase() + one.slice(1) };
    var filled = {};
    Object.keys(words).forEach(function (key) {
      filled[key] = typeof words[key] === "string" ? fill(words[key], names, true) : words[key];
    });
    return filled;
  }

  // "{name}" -> values.name; with keepOthers, a "{name}" that values lacks stays for a later fill
  function fill(template, values, keepOthers) {
    return template.replace(/\{(\w+)\}/g, function (all, key) {
      return keepOthers && !(key in values) ? all : String(values[key]);
    });
  }

  function Live(view) {
    var self = this;
    this.view = view;
    this.model = view.data.live;
    this.params = unpack(this.model);
    this.names = this.model.token_names;
    this.single = this.names.every(function (n) { return n.length === 1; });
    var w = view.w;
    var words = { first: this.names[0], last: this.names[this.names.length - 1],
      max: this.model.seq_len };
    var id = "mha-live-" + (Live.count = (Live.count || 0) + 1);
    var box = el("div", { class: "mha-attn-live", role: "group", "aria-labelledby": id + "-t" });
    box.appendChild(el("p", { class: "mha-attn-live-title", id: id + "-t" }, w.liveTitle));
    var label = el("label", { for: id }, w.liveInput + " ");
    box.appendChild(label);
    this.input = el("input", { type: "text", id: id, class: "mha-attn-live-input",
      spellcheck: "false", autocomplete: "off", autocapitalize: "characters",
      "aria-describedby": id + "-h " + id + "-m" });
    this.input.value = view.data.queries.join(this.single ? "" : " ");
    box.appendChild(this.input);
    box.appendChild(el("p", { class: "mha-attn-live-help", id: id + "-h" }, fill(w.liveHelp, words)));
    this.message = el("p", { class: "mha-attn-live-message", id: id + "-m", "aria-live": "polite" });
    box.appendChild(this.message);
    this.table = el("div", { class: "mha-attn-table-scroll", tabindex: "0", role: "region",
      "aria-label": w.liveTable });
    box.appendChild(this.table);
    view.root.insertBefore(box, view.root.firstChild);
    this.words = words;
    this.input.addEventListener("input", function () { self.update(); });
    this.run(this.parse().ids, false);
  }

  /* the token ids in the text box, or an error message */
  Live.prototype.parse = function () {
    var text = this.input.value;
    var parts = this.single ? text.replace(/[\s,]+/g, "").split("")
      : text.split(/[\s,]+/).filter(Boolean);
    var names = this.names;
    var lower = names.map(function (n) { return n.toLowerCase(); });
    var ids = [];
    for (var k = 0; k < parts.length; k++) {
      var at = names.indexOf(parts[k]);
      if (at < 0) at = lower.indexOf(parts[k].toLowerCase());
      if (at < 0) return { error: fill(this.view.w.liveBad, Object.assign({ bad: parts[k] }, this.words)) };
      ids.push(at);
    }
    if (!ids.length) return { error: this.view.w.liveEmpty };
    if (ids.length > this.model.seq_len) {
      return { error: fill(this.view.w.liveLong, Object.assign({ n: ids.length }, this.words)) };
    }
    return { ids: ids };
  };

  Live.prototype.update = function () {
    var parsed = this.parse();
    if (parsed.error) {
      // the predictions belong to a sequence no longer in the box: cleared, and the heads
      // (drawn for that sequence) greyed out and said to be stale until the input is valid again
      var names = this.names;
      var seq = this.ids.map(function (id) { return names[id]; }).join(this.single ? "" : " ");
      this.input.setAttribute("aria-invalid", "true");
      this.message.textContent = parsed.error + fill(this.view.w.liveStale, { seq: seq });
      this.table.textContent = "";
      this.table.hidden = true;
      this.view.root.classList.add("mha-attn-stale");
      this.stale = true; // read by tests/browser
      return;
    }
    this.input.removeAttribute("aria-invalid");
    this.table.hidden = false;
    this.view.root.classList.remove("mha-attn-stale");
    this.stale = false;
    this.run(parsed.ids, true);
  };

  /* run the model on ids; redraw the heads (redraw: false keeps the build's own weights) */
  Live.prototype.run = function (ids, redraw) {
    var view = this.view;
    var d = view.data;
    var names = this.names;
    var result = forward(this.model, this.params, ids);
    this.ids = ids;
    this.result = result; // read by tests/browser
    if (redraw) {
      var labels = ids.map(function (id) { return names[id]; });
      d.queries = labels;
      d.keys = labels.slice();
      d.weights = [];
      result.weights.forEach(function (layer) {
        layer.forEach(function (head) { d.weights.push(head); });
      });
      d.blocked = d.weights.map(function () {
        return labels.map(function (q, i) {
          return labels.map(function (k, j) { return j > i ? "1" : "0"; }).join("");
        });
      });
      view.pinned = null;
      view.cell = [Math.min(view.cell[0], ids.length - 1), Math.min(view.cell[1], ids.length - 1)];
      view.render();
    }
    this.predictions();
  };

  Live.prototype.predictions = function () {
    var w = this.view.w;
    var names = this.names;
    var ids = this.ids;
    var rows = this.result.logits.map(function (logits) {
      var p = softmax(logits);
      var best = 0;
      for (var v = 1; v < p.length; v++) if (p[v] > p[best]) best = v;
      return { next: best, p: p[best] };
    });
    var last = rows[rows.length - 1];
    this.message.textContent = fill(w.livePredicts, { token: names[ids[ids.length - 1]],
      next: names[last.next], p: rounded(last.p) });
    var table = el("table", { class: "mha-attn-numbers mha-attn-live-predictions" });
    table.appendChild(el("caption", {}, w.liveTable));
    // one row per position (4 columns): a phone shows the whole table, without a sideways scroll
    var columns = [[w.livePosition, function (r, t) { return String(t); }, null],
      [w.liveToken, function (r, t) { return names[ids[t]]; }, null],
      [w.liveNext, function (r) { return names[r.next]; }, null],
      [w.liveProb, function (r) { return rounded(r.p); }, function (r) { return w.exact + w.colon + r.p; }]];
    var head = el("tr");
    columns.forEach(function (spec) { head.appendChild(el("th", { scope: "col" }, spec[0])); });
    var thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (r, t) {
      var tr = el("tr");
      columns.forEach(function (spec) {
        var td = el("td", spec[2] ? { title: spec[2](r) } : {}, spec[1](r, t));
        // the prediction the next token bears out
        if (spec[0] === w.liveNext && t + 1 < ids.length && r.next === ids[t + 1]) {
          td.classList.add("mha-attn-live-hit");
          td.textContent += " ✓";
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    this.table.textContent = "";
    this.table.appendChild(table);
  };

  function start() {
    document.querySelectorAll(".mha-attn[data-mha-attn]").forEach(function (root) {
      if (root.getAttribute("data-mha-attn") !== "1") return; // built already
      root.setAttribute("data-mha-attn", "2");
      var source = root.querySelector("script[type='application/json']");
      root.mhaAttn = new View(root, JSON.parse(source.textContent));
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
