// The head atlas page's style and script, filled in by attention_report.cc. Everything but the
// head maps is static HTML (readable without JavaScript); the script decodes the 8-bit weights,
// draws the selected head's map on a canvas, and answers hovering. It marks what it did in data-*
// attributes (data-ready, data-painted, data-weights) for the browser test.
#pragma once

namespace kvserve::report {

constexpr const char* kStyle = R"CSS(
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; padding: 16px 20px; color: #1d2330; max-width: 1500px; }
h1 { font-size: 20px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 22px 0 6px; border-bottom: 1px solid #e3e6ec; padding-bottom: 3px; }
p { margin: 4px 0 8px; max-width: 72em; }
.sub { color: #4b5466; }
.how { color: #4b5466; font-size: 13px; }
code { background: #f2f4f7; padding: 0 3px; border-radius: 3px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eef0f3; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 6px 0 10px; font-size: 13px; }
span.sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: -2px; margin-right: 4px; }
.ramp { display: inline-block; width: 120px; height: 12px; vertical-align: -1px; border-radius: 2px; border: 1px solid #ccd; }
.atlas { display: grid; gap: 2px; width: 100%; max-width: calc(4.5em + var(--heads) * 40px); }
.layer { display: grid; grid-template-columns: 4.5em repeat(var(--heads), minmax(0, 1fr)); gap: 2px; align-items: center; }
.lname { font-size: 12px; color: #4b5466; white-space: nowrap; }
.hnum { font-size: 11px; color: #4b5466; text-align: center; overflow: hidden; }
.cell { display: block; aspect-ratio: 1 / 1; min-height: 6px; border-radius: 2px; text-align: center; font-size: 11px;
        line-height: 1; overflow: hidden; color: #1d2330; text-decoration: none; background: rgba(var(--rgb), var(--imp));
        display: flex; align-items: center; justify-content: center; outline-offset: 1px; }
.cell:hover { outline: 2px solid #7a8599; }
.cell.selected { outline: 3px solid #d0021b; }
.role-previous-token { --rgb: 31, 119, 180; } .role-induction { --rgb: 44, 160, 44; }
.role-sink { --rgb: 255, 127, 14; } .role-local { --rgb: 148, 103, 189; }
.role-diffuse { --rgb: 140, 140, 140; } .role-mixed { --rgb: 214, 199, 160; }
.panel { display: flex; flex-wrap: wrap; gap: 12px 28px; align-items: flex-start; }
.mapbox { position: relative; }
#map { display: block; cursor: crosshair; }
.side { flex: 1 1 320px; min-width: 280px; max-width: 560px; }
#readout { min-height: 3.2em; font-size: 14px; background: #f6f7f9; border-radius: 4px; padding: 6px 8px; margin: 6px 0; }
#readout b { font-family: ui-monospace, monospace; font-weight: 600; }
#scale { display: block; margin: 4px 0; }
.strip { font: 13px/1.9 ui-monospace, monospace; margin: 8px 0; word-break: break-all; }
.strip span { white-space: pre; padding: 1px 0; border-radius: 2px; cursor: default; }
.strip span.q { outline: 2px solid #d0021b; }
.strip span.later { color: #a8aebb; }
.noscript { background: #fff4d6; padding: 6px 8px; border-radius: 4px; }
)CSS";

constexpr const char* kScript = R"JS(
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('atlas-data').textContent);
  const n = D.tokens.length, tri = n * (n + 1) / 2;
  const cells = Array.from(document.querySelectorAll('.cell'));
  const map = document.getElementById('map'), readout = document.getElementById('readout');
  const strip = document.getElementById('strip'), title = document.getElementById('head-title');
  const scores = document.getElementById('head-scores');
  let W = null, sel = 0, row = n - 1, col = -1, geo = null;

  // White to dark blue over s = sqrt(weight): the square root keeps weights of 0.01-0.1 visible.
  const stops = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
  function ramp(w) {
    const s = Math.sqrt(Math.max(0, Math.min(1, w))) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(s)), f = s - i, a = stops[i], b = stops[i + 1];
    return [0, 1, 2].map(k => Math.round(a[k] + (b[k] - a[k]) * f));
  }
  const css = c => 'rgb(' + c.join(',') + ')';
  // Byte tokens (<0x41>) of printable ASCII as their character; newline and tab as symbols.
  const show = t => t.replace(/<0x([0-9A-F]{2})>/g, (m, x) => {
    const c = parseInt(x, 16);
    return c === 10 ? '\n' : c === 9 ? '\t' : c >= 32 && c < 127 ? String.fromCharCode(c) : m;
  }).replace(/\n/g, '\u23ce').replace(/\t/g, '\u21e5');
  const weight = (h, r, c) => W[h * tri + r * (r + 1) / 2 + c] / 255;

  async function decode() {
    const bytes = Uint8Array.from(atob(D.weights), ch => ch.charCodeAt(0));
    if (D.encoding !== 'deflate') return bytes;
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function drawScale() {
    const c = document.getElementById('scale'), g = c.getContext('2d');
    const w = c.width - 20;
    for (let x = 0; x <= w; ++x) { g.fillStyle = css(ramp((x / w) ** 2)); g.fillRect(10 + x, 0, 1, 14); }
    g.fillStyle = '#1d2330'; g.font = '11px system-ui'; g.textAlign = 'center';
    for (const t of [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1]) {
      const x = 10 + Math.sqrt(t) * w;
      g.fillRect(x, 14, 1, 4);
      g.fillText(String(t), x, 30);
    }
  }

  function layout() {
    const avail = Math.max(200, Math.min(document.body.clientWidth - 40, 1460) - 360);
    const label = n <= 48 ? 84 : 34;
    // At most the window's height, so that a whole map is visible at once.
    const side = Math.min(avail, 900, Math.max(320, window.innerHeight - 40));
    const cell = Math.max(1, Math.min(36, (side - label) / n));
    return { label, cell, side: label + cell * n };
  }

  function draw() {
    if (!W) return;
    geo = layout();
    const dpr = window.devicePixelRatio || 1, g0 = geo;
    map.style.width = map.style.height = g0.side + 'px';
    map.width = map.height = Math.round(g0.side * dpr);
    const g = map.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = '#fff'; g.fillRect(0, 0, g0.side, g0.side);
    const img = new ImageData(n, n);
    let painted = 0;
    for (let r = 0; r < n; ++r)
      for (let c = 0; c < n; ++c) {
        const p = (r * n + c) * 4;
        const rgb = c <= r ? ramp(weight(sel, r, c)) : [236, 238, 242];
        if (c <= r) ++painted;
        img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
      }
    const off = document.createElement('canvas');
    off.width = off.height = n;
    off.getContext('2d').putImageData(img, 0, 0);
    g.imageSmoothingEnabled = false;
    g.drawImage(off, g0.label, g0.label, g0.cell * n, g0.cell * n);
    g.fillStyle = '#1d2330';
    if (n <= 48) {
      const fs = Math.max(9, Math.min(12, g0.cell - 1));
      g.font = fs + 'px ui-monospace, monospace';
      for (let i = 0; i < n; ++i) {
        const t = show(D.tokens[i]).slice(0, 10), y = g0.label + (i + 0.5) * g0.cell;
        if (g0.cell >= 9) {
          g.textAlign = 'right'; g.textBaseline = 'middle'; g.fillText(t, g0.label - 4, y);
          g.save(); g.translate(y, g0.label - 4); g.rotate(-Math.PI / 2);
          g.textAlign = 'left'; g.fillText(t, 0, 0); g.restore();
        }
      }
    } else {
      g.font = '10px system-ui'; g.textBaseline = 'middle';
      const step = n > 128 ? 32 : 16;
      for (let i = 0; i < n; i += step) {
        const y = g0.label + (i + 0.5) * g0.cell;
        g.textAlign = 'right'; g.fillText(String(i), g0.label - 4, y);
        g.textAlign = 'center'; g.fillText(String(i), y, g0.label - 8);
      }
    }
    g.strokeStyle = 'rgba(208,2,27,0.8)'; g.lineWidth = 1;
    g.strokeRect(g0.label, g0.label + row * g0.cell, g0.cell * (row + 1), Math.max(1, g0.cell));
    if (col >= 0 && col <= row) {  // the hovered cell
      g.strokeStyle = '#111'; g.lineWidth = 2;
      const pad = Math.max(2, g0.cell / 2);
      g.strokeRect(g0.label + col * g0.cell - pad + g0.cell / 2, g0.label + row * g0.cell - pad + g0.cell / 2, 2 * pad, 2 * pad);
    }
    map.dataset.painted = painted;
    map.dataset.layer = D.heads[sel].layer;
    map.dataset.head = D.heads[sel].head;
    map.dataset.label = g0.label;
    map.dataset.cell = g0.cell;
  }

  function paintStrip(r) {
    const spans = strip.children;
    for (let u = 0; u < n; ++u) {
      const s = spans[u];
      s.className = u === r ? 'q' : u > r ? 'later' : '';
      if (u <= r) {
        const w = weight(sel, r, u), c = ramp(w);
        s.style.background = css(c);
        s.style.color = w > 0.3 ? '#fff' : '';
      } else { s.style.background = ''; s.style.color = ''; }
    }
  }

  function describe(r, c) {
    const q = '<b>' + esc(show(D.tokens[r])) + '</b> (#' + r + ')';
    if (c > r) return 'query ' + q + ' cannot attend to key #' + c + ', a later token';
    const w = weight(sel, r, c);
    return 'query ' + q + ' \u2192 key <b>' + esc(show(D.tokens[c])) + '</b> (#' + c + '): weight ' + w.toFixed(3) +
        ' <span class="how">(to the nearest 1/255)</span>';
  }
  function esc(s) { return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'); }

  function setRow(r) { row = r; paintStrip(r); draw(); }

  map.addEventListener('mousemove', ev => {
    if (!geo) return;
    const rect = map.getBoundingClientRect();
    const r = Math.floor((ev.clientY - rect.top - geo.label) / geo.cell);
    const c = Math.floor((ev.clientX - rect.left - geo.label) / geo.cell);
    if (r < 0 || r >= n || c < 0 || c >= n) return;
    readout.innerHTML = describe(r, c);
    col = c;
    if (r !== row) setRow(r); else draw();
  });

  function select(i) {
    if (i < 0 || i >= D.heads.length) return;
    cells[sel] && cells[sel].classList.remove('selected');
    sel = i;
    cells[sel].classList.add('selected');
    const h = D.heads[i];
    title.textContent = 'Layer ' + h.layer + ', head ' + h.head + ': ' + h.label;
    scores.textContent = 'previous-token ' + h.prev.toFixed(3) + ' \u00b7 sink ' + h.sink.toFixed(3) + ' \u00b7 local ' +
        h.local.toFixed(3) + ' \u00b7 entropy ' + h.entropy.toFixed(3) + ' \u00b7 induction ' + h.induction.toFixed(3) +
        (h.drop !== undefined ? ' \u00b7 importance: drop ' + h.drop.toFixed(4) + ' nats/token (rank ' + h.rank + ' of ' +
         D.heads.length + ')' : '');
    readout.innerHTML = 'Hover over the map: the row is the query token, the column the key token it attends to.';
    setRow(row);
  }

  function fromHash() {
    const m = /^#h-(\d+)-(\d+)$/.exec(location.hash);
    if (!m) return false;
    const i = D.heads.findIndex(h => h.layer === +m[1] && h.head === +m[2]);
    if (i >= 0) select(i);
    return i >= 0;
  }

  for (let u = 0; u < n; ++u) {
    const s = document.createElement('span');
    s.textContent = show(D.tokens[u]);
    s.title = '#' + u;
    s.addEventListener('mouseenter', () => { readout.innerHTML = describe(u, u); col = u; setRow(u); });
    strip.appendChild(s);
    strip.appendChild(document.createTextNode('\u200b'));
  }
  // Keep only the token spans as element children (paintStrip indexes them).
  cells.forEach((c, i) => c.addEventListener('click', ev => { ev.preventDefault(); history.replaceState(null, '', c.getAttribute('href')); select(i); }));
  window.addEventListener('hashchange', fromHash);
  window.addEventListener('resize', draw);
  document.addEventListener('keydown', ev => {
    const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -D.n_heads, ArrowDown: D.n_heads }[ev.key];
    if (step && ev.target === document.body) { ev.preventDefault(); select(sel + step); }
  });
  drawScale();
  decode().then(bytes => {
    W = bytes;
    document.body.dataset.weights = W.length;
    if (W.length !== D.heads.length * tri) throw new Error('weights: ' + W.length + ' bytes, expected ' + D.heads.length * tri);
    if (!fromHash()) select(D.first);
    document.body.dataset.ready = '1';
  }).catch(e => { readout.textContent = 'Cannot draw the maps: ' + e.message; document.body.dataset.ready = 'error'; });
})();
)JS";

}  // namespace kvserve::report
