/*
 * mha-ref: the interactive view of an attention-weight figure.
 *
 * Each <div class="mha-attn"> holds, in a <script type="application/json">, the exact weights
 * that mha_ref.tutorial.plotting.plot_heads drew (see mha_ref/tutorial/interactive.py). This
 * builds from them: a head picker (and a layer picker when there are several layers), one head
 * as a grid of cells, or all heads as small multiples, a line that reads out the weight under
 * the pointer or the keyboard focus, and the same numbers as a table.
 *
 * Keyboard: Tab reaches the head picker (arrow keys change the head), then the grid (arrow keys
 * move between cells, Home/End go to the row's ends, Page Up/Page Down change the head, Enter
 * pins the row). No library, no request: it only reads the data on the page.
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
      layer: "Layer",
      query: "query",
      key: "key",
      showTable: "Show as table",
      lines: "Token view",
      linesLabel: "token view: a line from each query token (left) to each key token (right), " +
        "as opaque as its weight; click a query token to see its lines alone",
      hideTable: "Hide table",
      blocked: "blocked by the mask",
      nan: "no weight (NaN: nothing left to attend to)",
      hint: "Hover or focus a cell (Tab, then the arrow keys) to read its weight; " +
        "click a query token to pin its row.",
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
      layer: "层",
      query: "查询",
      key: "键",
      showTable: "以表格显示",
      lines: "词元连线",
      linesLabel: "词元连线：从每个查询词元（左）到每个键词元（右）画一条线，权重越大线越深；" +
        "点击查询词元只看它的连线",
      hideTable: "隐藏表格",
      blocked: "被掩码屏蔽",
      nan: "无权重（NaN：没有可关注的键）",
      hint: "把鼠标移到格子上，或按 Tab 键进入后用方向键移动，即可读出权重；点击查询词元可固定该行。",
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

  function View(root, data) {
    this.root = root;
    this.data = data;
    this.w = WORDS[data.lang] || WORDS.en;
    this.numHeads = data.weights.length;
    this.layerNames = uniq(data.layers || []);
    this.layer = this.layerNames.length ? this.layerNames[0] : null;
    this.head = this.headsOfLayer()[0];
    this.all = false;
    this.pinned = null;
    this.cell = [0, 0];
    this.build();
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
      : v === null ? w.nan : d.kind === "mask" ? d.allowed_label : String(v);
    return this.name(h) + w.sep + w.query + " “" + d.queries[i] + "”" + w.sep + w.key +
      " “" + d.keys[j] + "”" + w.colon + value;
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
      this.layerSelect.addEventListener("change", function () {
        self.layer = self.layerSelect.value;
        self.head = self.headsOfLayer()[0];
        self.renderHeads();
        self.render();
      });
      label.appendChild(this.layerSelect);
      bar.appendChild(label);
    }
    this.headBar = el("div", { class: "mha-attn-heads", role: "toolbar",
      "aria-label": d.kind === "mask" ? w.masks : w.heads });
    this.headBar.addEventListener("keydown", function (event) { self.onHeadKey(event); });
    bar.appendChild(this.headBar);
    this.lines = false;
    if (d.kind !== "mask") {
      this.linesButton = el("button", { type: "button", class: "mha-attn-lines-toggle",
        "aria-pressed": "false" }, w.lines);
      this.linesButton.addEventListener("click", function () {
        self.lines = !self.lines;
        self.linesButton.setAttribute("aria-pressed", self.lines ? "true" : "false");
        self.render();
      });
      bar.appendChild(this.linesButton);
    }
    this.tableButton = el("button", { type: "button", class: "mha-attn-toggle",
      "aria-expanded": "false" }, w.showTable);
    this.tableButton.addEventListener("click", function () { self.toggleTable(); });
    bar.appendChild(this.tableButton);
    root.appendChild(bar);

    this.readout = el("p", { class: "mha-attn-readout", "aria-live": "polite" }, w.hint);
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
    });
    this.scroll.addEventListener("keydown", function (event) { self.onGridKey(event); });
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
    var current = this.all ? -1 : this.head;
    Array.prototype.forEach.call(this.headBar.children, function (button) {
      var on = Number(button.getAttribute("data-head")) === current;
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
    });
  };

  View.prototype.choose = function (h, focusButton) {
    this.all = h < 0;
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
    if (this.all) {
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
      "aria-label": this.name(h) + w.sep + w.grid });
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
          tabindex: at ? "0" : "-1", "aria-label": self.describe(h, i, j) });
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
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", this.name(h) + this.w.sep + this.w.linesLabel);
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
        if (self.pinned !== null) {
          line.setAttribute("class", self.pinned === i ? "mha-attn-pin" : "mha-attn-faded");
        }
        svg.appendChild(line);
      });
      var label = text(left, i, "end", q);
      label.setAttribute("class", "mha-attn-line-query" + (self.pinned === i ? " mha-attn-on" : ""));
      label.addEventListener("click", function () { self.pin(i); });
    });
    d.keys.forEach(function (k, j) { text(right, j, "start", k); });
    return svg;
  };

  /* all heads: small multiples; each is a button that shows its head alone */
  View.prototype.multiple = function (h) {
    var self = this;
    var d = this.data;
    var figure = el("div", { class: "mha-attn-multiple" });
    var button = el("button", { type: "button", class: "mha-attn-multiple-title",
      "aria-label": this.name(h) + this.w.colon + this.w.showHead }, this.name(h));
    button.addEventListener("click", function () { self.choose(h, true); });
    figure.appendChild(button);
    var cells = el("div", { class: "mha-attn-mini", "aria-hidden": "true" });
    cells.style.gridTemplateColumns = "repeat(" + d.keys.length + ", var(--mha-mini))";
    d.queries.forEach(function (q, i) {
      d.keys.forEach(function (k, j) {
        var cell = el("span", { "data-cell": h + "," + i + "," + j });
        self.paint(cell, h, i, j);
        cells.appendChild(cell);
      });
    });
    figure.appendChild(cells);
    return figure;
  };

  View.prototype.read = function (cell) {
    var at = cell.getAttribute("data-cell").split(",").map(Number);
    this.readout.textContent = this.describe(at[0], at[1], at[2]);
  };

  View.prototype.pin = function (i) {
    this.pinned = this.pinned === i ? null : i;
    this.render();
    if (this.pinned !== null) this.readRow(this.all ? this.headsOfLayer()[0] : this.head, i);
    var button = this.scroll.querySelectorAll(".mha-attn-query button")[i];
    if (button) button.focus();
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
    var top = order.slice(0, d.kind === "mask" ? order.length : 3).map(function (j) {
      return "“" + d.keys[j] + "”" + (d.kind === "mask" ? "" : " " + d.weights[h][i][j]);
    });
    this.readout.textContent = this.name(h) + w.sep + w.pinned + w.space + w.query + w.space +
      "“" + d.queries[i] + "”" + w.colon + (d.kind === "mask" ? d.allowed_label : w.rowTotal) +
      w.colon + top.join(w.sep);
  };

  View.prototype.onGridKey = function (event) {
    var cell = event.target.closest("[role='gridcell']");
    if (!cell) return;
    var at = cell.getAttribute("data-cell").split(",").map(Number);
    var i = at[1];
    var j = at[2];
    var rows = this.data.queries.length;
    var cols = this.data.keys.length;
    var heads = this.headsOfLayer();
    var k = heads.indexOf(this.head);
    switch (event.key) {
      case "ArrowRight": j = Math.min(cols - 1, j + 1); break;
      case "ArrowLeft": j = Math.max(0, j - 1); break;
      case "ArrowDown": i = Math.min(rows - 1, i + 1); break;
      case "ArrowUp": i = Math.max(0, i - 1); break;
      case "Home": j = 0; break;
      case "End": j = cols - 1; break;
      case "PageDown": k = (k + 1) % heads.length; break;
      case "PageUp": k = (k - 1 + heads.length) % heads.length; break;
      case "Enter": case " ":
        event.preventDefault();
        this.pin(i);
        return;
      default: return;
    }
    event.preventDefault();
    this.cell = [i, j];
    if (heads[k] !== this.head) this.choose(heads[k]);
    var target = this.scroll.querySelector("[data-cell='" + this.head + "," + i + "," + j + "']");
    Array.prototype.forEach.call(this.scroll.querySelectorAll("[role='gridcell']"),
      function (c) { c.tabIndex = -1; });
    target.tabIndex = 0;
    target.focus();
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
            : d.kind === "mask" ? "✓" : String(v);
          var said = self.isBlocked(h, i, j) ? d.blocked_label || w.blocked
            : d.kind === "mask" ? d.allowed_label : null;
          row.appendChild(el("td", said ? { title: said, "aria-label": said } : {}, text));
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
