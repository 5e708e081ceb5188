// keygate bench report: draws the SVG charts of the page from the
// keygate.bench.report/v1 document in #report-data. No library, no network;
// data reaches the page through textContent and setAttribute only.
(function () {
  'use strict';
  var SVGNS = 'http://www.w3.org/2000/svg'; // an XML namespace name, not fetched
  var COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#1d2430', '#8C564B'];
  var W = 640, H = 340, M = {l: 70, r: 20, t: 14, b: 48}, INSET = 10;
  var PERCENTILES = [
    {key: 'p50_ns', name: 'p50', q: 0.5, dash: ''},
    {key: 'p90_ns', name: 'p90', q: 0.9, dash: '8 4'},
    {key: 'p99_ns', name: 'p99', q: 0.99, dash: '3 3'},
    {key: 'p99_9_ns', name: 'p99.9', q: 0.999, dash: '0.5 4'}
  ];

  var doc = {};
  try {
    doc = JSON.parse(document.getElementById('report-data').textContent) || {};
  } catch (e) {
    doc = {};
  }
  var xKind = document.body.getAttribute('data-x') === 'rate' ? 'rate' : 'connections';
  function isObj(v) { return v && typeof v === 'object'; }
  var SEVERITY = {invalid: {label: 'not valid', color: '#b42318'}, warning: {label: 'warning', color: '#dc6803'}};
  var findings = isObj(doc.validity) && Array.isArray(doc.validity.findings) ? doc.validity.findings.filter(isObj) : [];
  // flagOf is what the checks found on step i (an index into the
  // document's steps, nil ones counted) of the series named name: the
  // worst severity and the findings' texts, or null. Findings name the
  // series by its own name, as the page's tables match them.
  function flagOf(name, i) {
    var f = null;
    findings.forEach(function (x) {
      if (x.series !== name || x.step !== i) return;
      var sev = x.severity === 'invalid' ? 'invalid' : 'warning';
      if (!f) f = {severity: sev, texts: []};
      if (sev === 'invalid') f.severity = sev;
      f.texts.push(typeof x.text === 'string' ? x.text : '');
    });
    return f;
  }
  var series = [];
  (Array.isArray(doc.series) ? doc.series : []).forEach(function (s) {
    if (!isObj(s)) return;
    var i = series.length, own = typeof s.name === 'string' ? s.name : '', steps = [], flags = [];
    (Array.isArray(s.steps) ? s.steps : []).forEach(function (st, j) {
      if (!isObj(st)) return;
      steps.push(st);
      flags.push(flagOf(own, j));
    });
    series.push({name: own !== '' ? own : 'series ' + (i + 1), color: COLORS[i % COLORS.length], steps: steps, flags: flags});
  });

  // ---- numbers and their labels

  function num(v) { return typeof v === 'number' && isFinite(v) ? v : NaN; }
  function xOf(st) { return num(xKind === 'rate' ? st.target_rate : st.connections); }
  function trim(v) {
    var a = Math.abs(v);
    var s = a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
    if (s.indexOf('.') >= 0) s = s.replace(/0+$/, '').replace(/\.$/, '');
    return s;
  }
  function fmtSI(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return trim(v / 1e9) + 'G';
    if (a >= 1e6) return trim(v / 1e6) + 'M';
    if (a >= 1e3) return trim(v / 1e3) + 'k';
    return trim(v);
  }
  function fmtInt(v) { return Math.round(v).toLocaleString('en-US'); }
  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return trim(ns / 1e9) + ' s';
    if (a >= 1e6) return trim(ns / 1e6) + ' ms';
    if (a >= 1e3) return trim(ns / 1e3) + ' \u00b5s';
    return trim(ns) + ' ns';
  }
  function fmtPct(v) { return trim(v) + '%'; }
  function fmtBytes(v) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : trim(v)) + ' ' + units[i];
  }
  // The distribution's x is 1/(1-q) for the fraction q of requests: 10 is
  // the 90th percentile, 100 the 99th.
  function fmtQ(x) {
    if (x <= 1) return '0%';
    var digits = Math.max(0, Math.round(Math.log10(x)) - 2);
    return (100 * (1 - 1 / x)).toFixed(digits) + '%';
  }
  var xTitle = xKind === 'rate' ? 'target rate (requests/s)' : 'connections';
  function xName(x) { return xKind === 'rate' ? fmtSI(x) + ' requests/s' : fmtInt(x) + ' connections'; }

  // ---- axes

  function niceStep(span, n) {
    var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  // linAxis spans vals, widened to nice ends, or exactly [lo, hi] of exact.
  function linAxis(vals, zero, exact) {
    if (exact) return exactAxis(exact[0], exact[1]);
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (zero) { lo = Math.min(0, lo); hi = Math.max(0, hi); }
    if (hi === lo) {
      var d = Math.abs(hi) / 2 || 1;
      lo = zero && lo >= 0 ? 0 : lo - d;
      hi += d;
    }
    var step = niceStep(hi - lo, 5);
    lo = Math.floor(lo / step + 1e-9) * step;
    hi = Math.ceil(hi / step - 1e-9) * step;
    var ticks = [];
    for (var i = 0; lo + i * step <= hi + step * 1e-6; i++) ticks.push(lo + i * step);
    return {ticks: ticks, pos: function (v) { return (v - lo) / (hi - lo); }};
  }
  function exactAxis(lo, hi) {
    var step = niceStep(hi - lo, 5), ticks = [];
    if (!(step > 0 && isFinite(step))) step = hi - lo; // a span too small for niceStep
    for (var t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-6 && ticks.length < 20; t += step) ticks.push(t);
    return {ticks: ticks, pos: function (v) { return (v - lo) / (hi - lo); }};
  }
  function niceBelow(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v)) + 1), ms = [5, 2, 1];
    for (;;) {
      p /= 10;
      for (var i = 0; i < ms.length; i++) if (ms[i] * p <= v * (1 + 1e-9)) return ms[i] * p;
    }
  }
  function niceAbove(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v)) - 1), ms = [1, 2, 5];
    for (;;) {
      p *= 10;
      for (var i = 0; i < ms.length; i++) if (ms[i] * p >= v * (1 - 1e-9)) return ms[i] * p;
    }
  }
  // logAxis spans vals (all > 0) with ticks at 1, 2 and 5 times powers of
  // ten over a few decades, at powers of ten over more; decades: whole
  // decades only.
  function logAxis(vals, decades) {
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (decades) {
      lo = Math.pow(10, Math.floor(Math.log10(lo) + 1e-9));
      hi = Math.pow(10, Math.ceil(Math.log10(hi) - 1e-9));
      if (hi <= lo) hi = lo * 10;
    } else {
      if (hi / lo < 2) { lo /= 1.5; hi *= 1.5; }
      lo = niceBelow(lo);
      hi = niceAbove(hi);
    }
    var l0 = Math.log10(lo), l1 = Math.log10(hi), span = l1 - l0;
    var ms = decades || span > 3 ? [1] : [1, 2, 5], ticks = [];
    var every = span > 8 ? 2 : 1;
    for (var k = Math.floor(l0); k <= Math.ceil(l1); k++) {
      if ((k - Math.floor(l0)) % every) continue;
      ms.forEach(function (m) {
        var t = m * Math.pow(10, k);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push(t);
      });
    }
    return {ticks: ticks, pos: function (v) { return (Math.log10(v) - l0) / span; }};
  }

  // ---- drawing

  function svg(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function svgText(parent, s, attrs) {
    var t = svg('text', attrs, parent);
    t.textContent = s;
    return t;
  }
  function html(name, cls, parent, text) {
    var e = document.createElement(name);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  // clear empties fig but for what the page wrote: its caption, its notes
  // and the step picker.
  function clear(fig) {
    Array.prototype.slice.call(fig.children).forEach(function (c) {
      if (c.tagName !== 'FIGCAPTION' && !c.classList.contains('controls') && !c.classList.contains('chart-note')) fig.removeChild(c);
    });
  }
  // put adds e to fig above the page's notes, which stay under the chart.
  function put(fig, e) {
    fig.insertBefore(e, fig.querySelector('.chart-note'));
    return e;
  }
  function swatch(li, e) {
    var s = svg('svg', {viewBox: '0 0 28 12', 'aria-hidden': 'true'}, li);
    if (e.ring) {
      svg('circle', {cx: 14, cy: 6, r: 4.5, fill: 'none', stroke: e.color, 'stroke-width': 2}, s);
      return;
    }
    if (e.band) {
      svg('rect', {x: 2, y: 1, width: 24, height: 10, 'class': 'hole'}, s);
      return;
    }
    svg('line', {x1: 1, y1: 6, x2: 27, y2: 6, stroke: e.color, 'stroke-width': 2.5, 'stroke-dasharray': e.dash || 'none', 'stroke-linecap': 'round'}, s);
    if (e.marker) svg('circle', {cx: 14, cy: 6, r: 3, fill: e.color}, s);
  }

  // draw replaces fig's chart with spec's and returns the number of data
  // points drawn. spec: xTitle, yTitle; x, y: {log, zero, decades, exact:
  // [lo, hi], fmt}; lines: [{color, dash, width, pts: [[x, y, tip, brk]],
  // noLine, markers, radius, count (the data points it stands for; default
  // its points)}], a point with brk true starting a new stretch of line;
  // rules: [{y, label, tip}], dashed across the chart; rings: [{x, y,
  // severity, tip}] around flagged points; holes: [{x0, x1, label, tip}],
  // spans without readings; legend: [{label, color, dash, marker, ring, band}];
  // empty: the text without data.
  function draw(fig, spec) {
    clear(fig);
    var xs = [], ys = [], n = 0;
    function ok(x, y) { return isFinite(x) && isFinite(y) && (!spec.x.log || x > 0) && (!spec.y.log || y > 0); }
    spec.lines.forEach(function (l) {
      var brk = false;
      l.pts = l.pts.filter(function (p) {
        if (ok(p[0], p[1])) {
          if (brk) { p[3] = true; brk = false; }
          return true;
        }
        brk = brk || p[3] === true; // the stretch still starts at the next point drawn
        return false;
      });
      l.pts.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); });
    });
    if (xs.length === 0) {
      put(fig, html('p', 'nodata', null, spec.empty));
      return 0;
    }
    var rules = (spec.rules || []).filter(function (r) { return isFinite(r.y) && (!spec.y.log || r.y > 0); });
    rules.forEach(function (r) { ys.push(r.y); });
    var rings = (spec.rings || []).filter(function (r) { return ok(r.x, r.y); });
    var xa = spec.x.log ? logAxis(xs, spec.x.decades) : linAxis(xs, spec.x.zero, spec.x.exact);
    var ya = spec.y.log ? logAxis(ys, spec.y.decades) : linAxis(ys, spec.y.zero);
    var pw = W - M.l - M.r, ph = H - M.t - M.b;
    function X(v) { return (M.l + INSET + xa.pos(v) * (pw - 2 * INSET)).toFixed(1); }
    function Y(v) { return (M.t + (1 - ya.pos(v)) * ph).toFixed(1); }
    var cap = fig.querySelector('figcaption');
    var root = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': cap ? cap.textContent : ''}, null);
    var grid = svg('g', {'class': 'grid'}, root), axis = svg('g', {'class': 'axis'}, root);
    ya.ticks.forEach(function (t) {
      svg('line', {x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t)}, grid);
      svgText(axis, spec.y.fmt(t), {x: M.l - 7, y: (+Y(t) + 4).toFixed(1), 'text-anchor': 'end'});
    });
    xa.ticks.forEach(function (t) {
      svg('line', {x1: X(t), x2: X(t), y1: M.t, y2: H - M.b}, grid);
      svg('line', {x1: X(t), x2: X(t), y1: H - M.b, y2: H - M.b + 5}, axis);
      svgText(axis, spec.x.fmt(t), {x: X(t), y: H - M.b + 18, 'text-anchor': 'middle'});
    });
    svg('path', {d: 'M' + M.l + ' ' + M.t + 'V' + (H - M.b) + 'H' + (W - M.r), fill: 'none'}, axis);
    svgText(root, spec.xTitle, {'class': 'label', x: M.l + pw / 2, y: H - 8, 'text-anchor': 'middle'});
    svgText(root, spec.yTitle, {'class': 'label', x: 0, y: 0, 'text-anchor': 'middle',
      transform: 'translate(15 ' + (M.t + ph / 2) + ') rotate(-90)'});
    var holes = drawHoles(root, spec.holes || [], X);
    rules.forEach(function (r) {
      var g = svg('g', {'class': 'rule'}, root);
      svg('line', {x1: M.l, x2: W - M.r, y1: Y(r.y), y2: Y(r.y)}, g);
      svgText(g, r.label, {x: W - M.r - 4, y: (+Y(r.y) - 4).toFixed(1), 'text-anchor': 'end'});
      tip(g, r.tip);
    });
    spec.lines.forEach(function (l) {
      if (l.pts.length === 0) return;
      var g = svg('g', {}, root);
      stretches(l.pts).forEach(function (run) {
        if (run.length > 1 && !l.noLine) {
          svg('polyline', {points: run.map(function (p) { return X(p[0]) + ',' + Y(p[1]); }).join(' '),
            fill: 'none', stroke: l.color, 'stroke-width': l.width || 2, 'stroke-dasharray': l.dash || 'none',
            'stroke-linecap': 'round', 'stroke-linejoin': 'round'}, g);
        }
      });
      l.pts.forEach(function (p, i) {
        // A point that no line reaches is drawn, however small.
        var alone = (p[3] || i === 0) && (i + 1 === l.pts.length || l.pts[i + 1][3]);
        if (!l.markers && !alone) return;
        var c = svg('circle', {cx: X(p[0]), cy: Y(p[1]), r: l.radius || 3.2, fill: l.color, stroke: '#fff', 'stroke-width': 1}, g);
        tip(c, p[2]);
      });
      n += l.count !== undefined ? l.count : l.pts.length;
    });
    rings.forEach(function (r) {
      var c = svg('circle', {'class': 'ring ' + r.severity, cx: X(r.x), cy: Y(r.y), r: 7.5, fill: 'none',
        stroke: SEVERITY[r.severity].color, 'stroke-width': 2.5}, root);
      tip(c, r.tip);
    });
    put(fig, root);
    var legend = put(fig, html('ul', 'legend', null));
    spec.legend.forEach(function (e) {
      var li = html('li', '', legend);
      swatch(li, e);
      html('span', '', li, e.label);
    });
    fig.setAttribute('data-flags', String(rings.length));
    fig.setAttribute('data-holes', String(holes));
    if (spec.x.exact) fig.setAttribute('data-x-span', spec.x.exact.join(' '));
    else fig.removeAttribute('data-x-span');
    return n;
  }
  function tip(e, text) {
    if (text) svg('title', {}, e).textContent = text;
  }
  // stretches splits pts where a point starts a new stretch of line.
  function stretches(pts) {
    var out = [];
    pts.forEach(function (p, i) {
      if (i === 0 || p[3]) out.push([]);
      out[out.length - 1].push(p);
    });
    return out;
  }
  // drawHoles shades the spans of the x axis without readings and returns
  // how many it drew.
  function drawHoles(root, holes, X) {
    var n = 0;
    holes.forEach(function (h) {
      if (!(isFinite(h.x0) && isFinite(h.x1) && h.x1 > h.x0)) return;
      var x0 = +X(h.x0), x1 = +X(h.x1), g = svg('g', {'class': 'hole'}, root);
      svg('rect', {x: x0.toFixed(1), y: M.t, width: Math.max(1, x1 - x0).toFixed(1), height: H - M.t - M.b}, g);
      svgText(g, h.label || 'no reading', {x: ((x0 + x1) / 2).toFixed(1), y: M.t + 12, 'text-anchor': 'middle'});
      tip(g, h.tip);
      n++;
    });
    return n;
  }
  // flagRings rings the point of each flagged step of each series at f(step)
  // and adds the rings' legend entries.
  function flagRings(f, legend) {
    var rings = [], seen = {};
    series.forEach(function (s) {
      s.steps.forEach(function (st, j) {
        var fl = s.flags[j];
        if (!fl) return;
        rings.push({x: xOf(st), y: f(st), severity: fl.severity, tip: SEVERITY[fl.severity].label + ': ' + fl.texts.join('\n')});
        seen[fl.severity] = true;
      });
    });
    ['invalid', 'warning'].forEach(function (sev) {
      if (seen[sev]) legend.push({label: 'step ' + SEVERITY[sev].label + ' (see the verdict)', color: SEVERITY[sev].color, ring: true});
    });
    return rings;
  }

  function byX(a, b) { return a[0] - b[0]; }
  var allX = [];
  series.forEach(function (s) { s.steps.forEach(function (st) { if (isFinite(xOf(st))) allX.push(xOf(st)); }); });
  // The x axis of the charts against connections or rate: logarithmic when
  // the steps span a factor of 10 or more.
  var stepAxis = {zero: false, log: allX.length > 0 && Math.min.apply(null, allX) > 0 &&
    Math.max.apply(null, allX) / Math.min.apply(null, allX) >= 10, fmt: fmtSI};
  function seriesLegend() {
    return series.map(function (s) { return {label: s.name, color: s.color, marker: true}; });
  }
  // stepLines is one line per series through f(step) for the steps that
  // have it; tip(step, y) labels each point.
  function stepLines(f, tip) {
    return series.map(function (s) {
      var pts = [];
      s.steps.forEach(function (st) {
        var y = f(st);
        if (y !== undefined) pts.push([xOf(st), y, s.name + ' at ' + xName(xOf(st)) + ': ' + tip(st, y)]);
      });
      return {color: s.color, pts: pts.sort(byX), markers: true};
    });
  }
  // count is a count from the document, 0 when absent or not a count.
  function count(v) { return num(v) > 0 ? num(v) : 0; }
  function sum(o, keys) { return keys.reduce(function (t, k) { return t + count(o[k]); }, 0); }
  // timeoutRules is a dashed line at each timeout the steps ran with.
  function timeoutRules() {
    var seen = {}, out = [];
    series.forEach(function (s) {
      s.steps.forEach(function (st) {
        var t = num(st.timeout_ns);
        if (t > 0 && !seen[t]) { seen[t] = true; out.push(t); }
      });
    });
    return out.map(function (t) {
      return {y: t, label: out.length > 1 ? 'timeout ' + fmtNs(t) : 'timeout', tip: 'the requests\u2019 timeout: ' + fmtNs(t)};
    });
  }
  function server(st) { return st.server && typeof st.server === 'object' ? st.server : null; }

  // stepPicker adds a step selector to fig for the x values xs and returns
  // a function giving the one selected (first, the one at index first).
  function stepPicker(fig, xs, first, redraw) {
    var controls = html('div', 'controls', null);
    var label = html('label', '', controls, 'step');
    var sel = html('select', '', label);
    xs.forEach(function (x, i) {
      var o = html('option', '', sel, xName(x));
      o.value = String(i);
    });
    sel.value = String(first);
    sel.addEventListener('change', function () { render(fig, redraw); });
    var cap = fig.querySelector('figcaption');
    fig.insertBefore(controls, cap ? cap.nextSibling : fig.firstChild);
    return function () { return xs[+sel.value]; };
  }
  // stepsWith is the sorted x values of the steps for which has(step)
  // holds; last is the x of the last such step of the first series with
  // one (the step charts of one step show at first).
  function stepsWith(has) {
    var seen = {}, xs = [], last = NaN;
    series.forEach(function (s) {
      var lastHere = NaN;
      s.steps.forEach(function (st) {
        var x = xOf(st);
        if (!isFinite(x) || !has(st)) return;
        lastHere = x;
        if (!seen[x]) { seen[x] = true; xs.push(x); }
      });
      if (isNaN(last)) last = lastHere;
    });
    xs.sort(function (a, b) { return a - b; });
    xs.last = last;
    return xs;
  }
  function stepAt(s, x) {
    for (var i = s.steps.length - 1; i >= 0; i--) if (xOf(s.steps[i]) === x) return s.steps[i];
    return null;
  }
  // perStep makes the setup of a chart of one step at a time.
  function perStep(has, spec) {
    return function (fig) {
      var xs = stepsWith(has), chosen = function () { return NaN; };
      function redraw() { return draw(fig, spec(chosen())); }
      if (xs.length > 0) chosen = stepPicker(fig, xs, Math.max(0, xs.indexOf(xs.last)), redraw);
      return redraw;
    };
  }
  function timeline(st) {
    var u = server(st);
    return u && Array.isArray(u.timeline) ? u.timeline.filter(function (p) { return p && typeof p === 'object'; }) : [];
  }
  function buckets(st) {
    return (Array.isArray(st.histogram) ? st.histogram : []).filter(function (b) {
      return b && num(b.le_ns) > 0 && num(b.count) > 0;
    });
  }

  // ---- the charts: each setup returns the function that draws it

  var charts = {
    'throughput': function (fig) {
      return function () {
        var lines = stepLines(function (st) { return num(st.requests_per_s); },
          function (st, y) { return fmtInt(y) + ' requests/s'; });
        var legend = seriesLegend();
        if (xKind === 'rate' && allX.length > 0) {
          // Open loop: the rate asked for, which the series reach or not.
          var asked = stepsWith(function () { return true; }).map(function (x) { return [x, x]; });
          lines.push({color: '#8a93a1', dash: '5 4', width: 1.5, pts: asked, count: 0});
          legend.push({label: 'rate asked for', color: '#8a93a1', dash: '5 4'});
        }
        var rings = flagRings(function (st) { return num(st.requests_per_s); }, legend);
        return draw(fig, {
          xTitle: xTitle, yTitle: 'throughput (requests/s)', x: stepAxis, y: {zero: true, fmt: fmtSI},
          lines: lines, rings: rings, legend: legend, empty: 'No data: the document has no measured steps.'
        });
      };
    },
    'latency': function (fig) {
      return function () {
        var lines = [], legend = seriesLegend();
        series.forEach(function (s) {
          PERCENTILES.forEach(function (p) {
            var pts = s.steps.map(function (st) {
              var v = st.latency ? num(st.latency[p.key]) : NaN;
              return [xOf(st), v, s.name + ' at ' + xName(xOf(st)) + ': ' + p.name + ' ' + fmtNs(v)];
            });
            lines.push({color: s.color, dash: p.dash, pts: pts.sort(byX), markers: true, radius: 2.6});
          });
        });
        PERCENTILES.forEach(function (p) { legend.push({label: p.name, color: '#5b6575', dash: p.dash}); });
        var rings = flagRings(function (st) { return st.latency ? num(st.latency.p99_ns) : NaN; }, legend);
        return draw(fig, {
          xTitle: xTitle, yTitle: 'latency (log scale)', x: stepAxis, y: {log: true, fmt: fmtNs},
          lines: lines, rules: timeoutRules(), rings: rings, legend: legend,
          empty: 'No data: the document has no measured latencies.'
        });
      };
    },
    'errors': function (fig) {
      return function () {
        var lines = [], legend = seriesLegend();
        series.forEach(function (s) {
          var errs = [], non = [];
          s.steps.forEach(function (st) {
            var secs = num(st.duration_s), x = xOf(st), at = s.name + ' at ' + xName(x) + ': ';
            if (!(secs > 0)) return;
            var e = isObj(st.errors) ? st.errors : {}, c = isObj(st.status) ? st.status : {};
            var nErr = sum(e, ['connect', 'read', 'write', 'timeout', 'parse']), nBad = sum(c, ['3xx', '4xx', '5xx', 'other']);
            errs.push([x, nErr / secs, at + fmtSI(nErr / secs) + ' errors/s (' + fmtInt(nErr) + ': connect ' + count(e.connect) +
              ', read ' + count(e.read) + ', write ' + count(e.write) + ', timeout ' + count(e.timeout) + ', parse ' + count(e.parse) + ')']);
            non.push([x, nBad / secs, at + fmtSI(nBad / secs) + ' non-2xx answers/s (' + fmtInt(nBad) + ': 3xx ' + count(c['3xx']) +
              ', 4xx ' + count(c['4xx']) + ', 5xx ' + count(c['5xx']) + ', other ' + count(c.other) + ')']);
          });
          lines.push({color: s.color, pts: errs.sort(byX), markers: true});
          lines.push({color: s.color, dash: '6 4', pts: non.sort(byX), markers: true, radius: 2.6});
        });
        legend.push({label: 'errors (no answer)', color: '#5b6575'}, {label: 'non-2xx answers', color: '#5b6575', dash: '6 4'});
        return draw(fig, {
          xTitle: xTitle, yTitle: 'per second', x: stepAxis, y: {zero: true, fmt: fmtSI},
          lines: lines, legend: legend, empty: 'No data: no step has a measured duration.'
        });
      };
    },
    'distribution': perStep(function (st) { return buckets(st).length > 0; }, function (x) {
      var lines = [], legend = [];
      series.forEach(function (s) {
        var st = stepAt(s, x);
        if (!st) return;
        var bs = buckets(st).sort(function (a, b) { return a.le_ns - b.le_ns; });
        var total = bs.reduce(function (t, b) { return t + b.count; }, 0);
        if (total === 0) return;
        var cap = Math.max(total, 10);
        var at = function (q) { return 1 / Math.max(1 - q, 1 / cap); };
        var pts = [], cum = 0;
        bs.forEach(function (b) {
          pts.push([at(cum / total), b.le_ns]);
          cum += b.count;
          pts.push([at(cum / total), b.le_ns]);
        });
        lines.push({color: s.color, pts: pts, count: bs.length, width: 2});
        var marks = PERCENTILES.map(function (p) {
          var v = st.latency ? num(st.latency[p.key]) : NaN;
          return [at(p.q), v, s.name + ': ' + p.name + ' ' + fmtNs(v)];
        });
        lines.push({color: s.color, pts: marks, markers: true, noLine: true, count: 0});
        legend.push({label: s.name + ' (' + fmtInt(total) + ' requests)', color: s.color});
      });
      return {
        xTitle: 'percentile (log scale of 1/(1\u2212p); markers: p50, p90, p99, p99.9)', yTitle: 'latency (log scale)',
        x: {log: true, decades: true, fmt: fmtQ}, y: {log: true, fmt: fmtNs},
        lines: lines, legend: legend, empty: 'No data: no step has a latency histogram.'
      };
    }),
    'server-cpu': function (fig) {
      return function () {
        return draw(fig, {
          xTitle: xTitle, yTitle: 'target CPU (100% = one core)', x: stepAxis, y: {zero: true, fmt: fmtPct},
          lines: stepLines(function (st) { var u = server(st); return u ? num(u.cpu_percent) : undefined; },
            function (st, y) {
              var rss = num(server(st).rss_bytes);
              return fmtPct(y) + ' CPU' + (rss > 0 ? ', RSS ' + fmtBytes(rss) : '');
            }),
          legend: seriesLegend(), empty: 'No data: no step measured the target\u2019s CPU.'
        });
      };
    },
    'server-allocs': function (fig) {
      return function () {
        return draw(fig, {
          xTitle: xTitle, yTitle: 'target allocations/s', x: stepAxis, y: {zero: true, fmt: fmtSI},
          lines: stepLines(function (st) { var u = server(st); return u && num(u.allocs_per_s) > 0 ? u.allocs_per_s : undefined; },
            function (st, y) {
              var u = server(st), t = fmtSI(y) + ' allocs/s';
              if (num(u.alloc_bytes_per_s) > 0) t += ', ' + fmtBytes(u.alloc_bytes_per_s) + '/s';
              if (num(u.allocs_per_request) > 0) t += ', ' + trim(u.allocs_per_request) + ' allocs/request';
              return t;
            }),
          legend: seriesLegend(), empty: 'No data: the allocation rate comes from the target\u2019s /metrics, which no step read.'
        });
      };
    },
    'timeline-cpu': perStep(function (st) { return timeline(st).length > 0; }, function (x) {
      return timelineSpec(x, function (p) { return num(p.cpu_percent); }, 'target CPU (100% = one core)', fmtPct, ' CPU', true);
    }),
    'timeline-allocs': perStep(function (st) {
      return timeline(st).some(function (p) { return num(p.allocs_per_s) > 0; });
    }, function (x) {
      return timelineSpec(x, function (p) { return num(p.allocs_per_s) > 0 ? p.allocs_per_s : NaN; }, 'target allocations/s', fmtSI, ' allocs/s');
    })
  };
  // timelineSpec draws f of the samples of each series' step at x over that
  // step's own window (never the longest of all steps, which would squeeze
  // a short one), with no line across an interval the probe read late;
  // others: also the CPU other processes took meanwhile, when known.
  function timelineSpec(x, f, yTitle, fmt, unit, others) {
    var lines = [], holes = [], end = 0, legend = seriesLegend(), anyOthers = false;
    series.forEach(function (s) {
      var st = stepAt(s, x);
      if (!st) return;
      var u = server(st), samples = timeline(st).filter(function (p) { return num(p.t_s) >= 0; });
      samples.sort(function (a, b) { return a.t_s - b.t_s; });
      end = Math.max(end, count(st.duration_s), u ? count(u.window_s) : 0);
      var pts = [], prev = 0;
      samples.forEach(function (p) {
        var t = p.t_s, y = f(p), gap = p.gap === true;
        if (gap) {
          holes.push({x0: prev, x1: t, label: series.length > 1 ? s.name + ': no reading' : 'no reading',
            tip: s.name + ': no reading from ' + trim(prev) + ' s to ' + trim(t) + ' s (the probe ran late)'});
        }
        pts.push([t, y, s.name + ' at ' + trim(t) + ' s: ' + fmt(y) + unit + (gap ? ', the average since ' + trim(prev) + ' s' : ''), gap]);
        prev = t;
        end = Math.max(end, t);
      });
      lines.push({color: s.color, pts: pts, markers: true, radius: 2.4});
      if (others && hasOthers(u, samples)) {
        anyOthers = true;
        lines.push({color: s.color, dash: '2 3', width: 1.5, pts: samples.map(function (p) {
          var y = count(p.others_cpu_percent);
          return [p.t_s, y, s.name + ' at ' + trim(p.t_s) + ' s: other processes ' + fmtPct(y) + ' CPU', p.gap === true];
        })});
      }
    });
    if (anyOthers) legend.push({label: 'other processes', color: '#5b6575', dash: '2 3'});
    if (holes.length > 0) legend.push({label: 'no reading (the probe ran late)', band: true});
    return {
      xTitle: 'seconds into the measured window', yTitle: yTitle,
      x: {zero: true, exact: end > 0 ? [0, end] : null, fmt: trim}, y: {zero: true, fmt: fmt},
      lines: lines, holes: holes, legend: legend, empty: 'No data: no step sampled the target over time.'
    };
  }
  // hasOthers: the generator could see other processes during the step
  // (a sample leaves out a zero, so one sample with it is not enough to ask).
  function hasOthers(u, samples) {
    return (u && isObj(u.others)) || samples.some(function (p) { return num(p.others_cpu_percent) > 0; });
  }

  // render draws one chart and records the outcome on its element:
  // data-rendered "true" with data-points, "empty", or "error".
  function render(fig, redraw) {
    try {
      var n = redraw();
      fig.setAttribute('data-points', String(n));
      fig.setAttribute('data-rendered', n > 0 ? 'true' : 'empty');
      fig.removeAttribute('data-error');
    } catch (e) {
      clear(fig);
      put(fig, html('p', 'nodata', null, 'This chart failed to draw: ' + e));
      fig.setAttribute('data-rendered', 'error');
      fig.setAttribute('data-error', String(e));
    }
  }

  Array.prototype.forEach.call(document.querySelectorAll('figure[data-chart]'), function (fig) {
    var setup = charts[fig.getAttribute('data-chart')];
    if (!setup) {
      render(fig, function () { throw new Error('no such chart'); });
      return;
    }
    try {
      render(fig, setup(fig));
    } catch (e) {
      render(fig, function () { throw e; });
    }
  });
})();
