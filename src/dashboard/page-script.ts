/**
 * The page's script: it polls `…/data` each second and draws what it gets, and looks keys up
 * through `…/key`. Plain ES2017 for any browser; a token comes from the page's form or its
 * `#token=` fragment (never sent in a URL) and is kept for the tab's session only.
 */
export const PAGE_SCRIPT = String.raw`
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var COLORS = { admitted: '#1a7f37', denied: '#b42318', shadowDenied: '#8a5a00' };
  var NAMES = { admitted: 'admitted', denied: 'denied', shadowDenied: 'shadow-denied' };
  var base = location.pathname.replace(/\/+$/, '');
  var token = sessionStorage.getItem('sluice-dashboard-token') || '';
  if (location.hash.indexOf('#token=') === 0) {
    token = decodeURIComponent(location.hash.slice(7));
    sessionStorage.setItem('sluice-dashboard-token', token);
    history.replaceState(null, '', location.pathname + location.search);
  }
  var $ = function (id) { return document.getElementById(id); };
  var selected = '';
  var latest = null;

  function get(path) {
    var headers = token ? { Authorization: 'Bearer ' + token } : {};
    return fetch(base + path, { headers: headers, cache: 'no-store' }).then(function (response) {
      if (response.status === 401) $('auth').hidden = false;
      return response.json().then(function (body) {
        if (!response.ok) throw new Error(body.detail || ('HTTP ' + response.status));
        return body;
      });
    });
  }
  function make(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function svg(tag, attributes) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attributes).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    return node;
  }
  function n(value) { return Number(value).toLocaleString('en-US'); }
  function rows(id, list, cells) {
    var body = $(id).tBodies[0];
    body.replaceChildren.apply(body, list.map(function (item) {
      var row = make('tr');
      cells(item).forEach(function (cell, i) { row.appendChild(make(i === 0 ? 'th' : 'td', cell.text, cell.n ? 'n' : '')); });
      row.firstChild.setAttribute('scope', 'row');
      return row;
    }));
  }
  function chosen(snapshot) {
    return snapshot.series.filter(function (s) { return selected === '' || s.name === selected; });
  }
  function summed(series, outcome, seconds) {
    var sums = new Array(seconds).fill(0);
    series.forEach(function (s) { s.perSecond[outcome].forEach(function (v, i) { sums[i] += v; }); });
    return sums;
  }
  function drawRates(snapshot) {
    var series = chosen(snapshot);
    var w = 720, h = 200, left = 48, bottom = 22, seconds = snapshot.seconds;
    var lines = {};
    var most = 1;
    Object.keys(COLORS).forEach(function (outcome) {
      lines[outcome] = summed(series, outcome, seconds);
      most = Math.max.apply(null, [most].concat(lines[outcome]));
    });
    var chart = svg('svg', { viewBox: '0 0 ' + w + ' ' + h, role: 'img' });
    var last = function (o) { return lines[o][seconds - 2] || 0; };
    chart.setAttribute('aria-label', 'Decisions per second over the last ' + seconds + ' seconds; in the last whole second ' +
      last('admitted') + ' admitted, ' + last('denied') + ' denied, ' + last('shadowDenied') + ' shadow-denied');
    var y = function (v) { return h - bottom - (v / most) * (h - bottom - 8); };
    var x = function (i) { return left + (i / Math.max(1, seconds - 1)) * (w - left - 8); };
    [0, most / 2, most].forEach(function (v) {
      chart.appendChild(svg('line', { x1: left, x2: w - 8, y1: y(v), y2: y(v), stroke: '#e5e7eb' }));
      var label = svg('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' });
      label.textContent = Math.round(v * 10) / 10;
      chart.appendChild(label);
    });
    var axis = svg('text', { x: w - 8, y: h - 4, 'text-anchor': 'end' });
    axis.textContent = 'now';
    chart.appendChild(axis);
    var start = svg('text', { x: left, y: h - 4 });
    start.textContent = '-' + seconds + ' s';
    chart.appendChild(start);
    Object.keys(COLORS).forEach(function (outcome) {
      var points = lines[outcome].map(function (v, i) { return x(i).toFixed(1) + ',' + y(v).toFixed(1); }).join(' ');
      chart.appendChild(svg('polyline', { points: points, fill: 'none', stroke: COLORS[outcome], 'stroke-width': 2, 'class': 'rate ' + outcome }));
    });
    $('rates-chart').replaceChildren(chart);
  }
  function drawSeries(snapshot) {
    var select = $('series');
    var names = snapshot.series.map(function (s) { return s.name; });
    var have = Array.prototype.slice.call(select.options, 1).map(function (o) { return o.value; });
    if (names.join('\n') !== have.join('\n')) {
      select.replaceChildren(make('option', 'All'));
      select.options[0].value = '';
      names.forEach(function (name) { var o = make('option', name); o.value = name; select.appendChild(o); });
      select.value = names.indexOf(selected) >= 0 ? selected : '';
    }
    rows('series-table', snapshot.series, function (s) {
      var at = snapshot.seconds - 2;
      var lastSecond = s.perSecond.admitted[at] + s.perSecond.denied[at] + s.perSecond.shadowDenied[at];
      return [{ text: s.name }, { text: n(s.total.admitted), n: 1 }, { text: n(s.total.denied), n: 1 },
        { text: n(s.total.shadowDenied), n: 1 }, { text: n(lastSecond), n: 1 }];
    });
  }
  function top(snapshot, field) {
    var all = [];
    chosen(snapshot).forEach(function (s) { s[field].forEach(function (hit) { all.push({ hit: hit, name: s.name }); }); });
    all.sort(function (a, b) { return b.hit.count - a.hit.count; });
    return all.slice(0, 10);
  }
  function drawTop(snapshot) {
    var cells = function (e) { return [{ text: e.hit.item }, { text: e.name }, { text: n(e.hit.count), n: 1 }, { text: n(e.hit.error), n: 1 }]; };
    rows('top-denied', top(snapshot, 'topDenied'), cells);
    rows('top-used', top(snapshot, 'topUsed'), cells);
    var seen = 0, bound = 0, sampled = 0, sampling = snapshot.sampling;
    chosen(snapshot).forEach(function (s) {
      seen += s.seen.used; bound = Math.max(bound, s.bound.used); sampled += s.sampled.used;
    });
    $('bound').textContent = 'Space-Saving summaries of ' + n(snapshot.capacity) + ' keys per rule over ' + n(seen) +
      ' requests: a count is over by at most its error (now at most ' + n(bound) + ', never more than requests / ' +
      n(snapshot.capacity) + ').' + (sampled === 0 ? '' : ' Past ' + n(sampling.exactPerSecond) +
      ' decisions a second per rule, 1 in ' + sampling.oneIn + ' is counted, weighted ' + sampling.oneIn + ' (' + n(sampled) +
      ' of these requests): a count may then also be off by about √(' + (sampling.oneIn - 1) + ' × count).') +
      ' Keys shown: ' + snapshot.keys + '.';
  }
  function drawStore(store) {
    var pill = $('store-pill');
    pill.textContent = store.status;
    pill.className = 'pill ' + store.status;
    var counts = store.latency.counts, bounds = store.latency.boundsMs;
    var w = 420, h = 150, bottom = 34, most = Math.max.apply(null, [1].concat(counts));
    var total = counts.reduce(function (a, b) { return a + b; }, 0);
    var chart = svg('svg', { viewBox: '0 0 ' + w + ' ' + h, role: 'img' });
    chart.setAttribute('aria-label', 'Latency histogram of ' + total + ' decisions' +
      (total ? ', mean ' + (store.latency.sumMs / total).toFixed(2) + ' ms' : ''));
    var bar = (w - 8) / counts.length;
    counts.forEach(function (count, i) {
      var height = (count / most) * (h - bottom - 8);
      chart.appendChild(svg('rect', { x: 4 + i * bar + 1, y: h - bottom - height, width: bar - 2, height: height, fill: '#1d4ed8', 'class': 'bucket' }));
      var label = svg('text', { x: 4 + i * bar + bar / 2, y: h - bottom + 12, 'text-anchor': 'middle' });
      label.textContent = i < bounds.length ? String(bounds[i]).replace(/^0\./, '.') : '>' + bounds[bounds.length - 1];
      chart.appendChild(label);
    });
    var unit = svg('text', { x: w / 2, y: h - 4, 'text-anchor': 'middle' });
    unit.textContent = 'at most this many milliseconds';
    chart.appendChild(unit);
    $('latency-chart').replaceChildren(chart);
    $('no-outages').hidden = store.outages.length > 0;
    var time = function (ms) { return new Date(ms).toLocaleTimeString('en-GB'); };
    rows('outages', store.outages.slice().reverse(), function (o) {
      return [{ text: time(o.began) }, { text: o.ended === undefined ? 'ongoing' : time(o.ended) }, { text: o.reason },
        { text: n(o.failures), n: 1 }, { text: n(o.answered.allowed), n: 1 }, { text: n(o.answered.denied), n: 1 }];
    });
  }
  function render(snapshot) {
    latest = snapshot;
    drawSeries(snapshot);
    drawRates(snapshot);
    drawTop(snapshot);
    drawStore(snapshot.store);
    $('rules').textContent = snapshot.rules || '(none yet)';
    $('status').textContent = 'Updated ' + new Date(snapshot.now).toLocaleTimeString('en-GB');
  }
  function poll() {
    get('/data?top=10').then(render, function (error) { $('status').textContent = 'Not updated: ' + error.message; })
      .then(function () { setTimeout(poll, 1000); });
  }
  function showLookup(result) {
    var table = make('table');
    table.appendChild(make('caption', 'State of ' + result.key + ' now'));
    var head = make('tr');
    ['Rule or policy', 'Policy', 'Allowed', 'Remaining', 'Limit', 'Resets in (ms)'].forEach(function (t) {
      var th = make('th', t); th.setAttribute('scope', 'col'); head.appendChild(th);
    });
    table.appendChild(make('thead')).appendChild(head);
    var body = table.appendChild(make('tbody'));
    result.states.forEach(function (state) {
      var policies = state.decision ? state.decision.policies : [{ name: state.error }];
      policies.forEach(function (p) {
        var row = body.appendChild(make('tr'));
        [state.name, p.name, state.decision ? (p.allowed ? 'yes' : 'no') + (state.decision.reason ? ' (store failing)' : '') : '',
          p.remaining, p.limit, p.resetAfterMs].forEach(function (t, i) { row.appendChild(make(i === 0 ? 'th' : 'td', t === undefined ? '' : t)); });
      });
    });
    $('lookup-result').replaceChildren(table);
  }
  $('lookup').addEventListener('submit', function (event) {
    event.preventDefault();
    get('/key?key=' + encodeURIComponent($('lookup-key').value)).then(showLookup, function (error) {
      $('lookup-result').replaceChildren(make('p', 'Lookup failed: ' + error.message));
    });
  });
  $('series').addEventListener('change', function () { selected = $('series').value; if (latest) render(latest); });
  $('token-form').addEventListener('submit', function (event) {
    event.preventDefault();
    token = $('token').value;
    sessionStorage.setItem('sluice-dashboard-token', token);
    $('auth').hidden = true;
  });
  poll();
})();
`;
