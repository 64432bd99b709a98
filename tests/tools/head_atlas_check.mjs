// The head atlas page as a person uses it, in headless Chromium driven by puppeteer-core: it loads
// with no network, shows every head in an overview that fits a 1,400 px window with each layer on
// one row, draws each head's map when its square is clicked, and answers hovering with the query
// token, the key token and the weight the server measured (from the response's float weights,
// which the page never sees: it carries 8-bit ones). Ends with a screenshot of the hovered page.
// Usage: node head_atlas_check.mjs CHROMIUM PAGE.html RESPONSE.json SCREENSHOT.png MAX_BYTES [HEIGHT [LAYER.HEAD]]
// (HEIGHT: the window's, default 900; LAYER.HEAD: the head hovered, default the middle one.)
import { readFileSync, statSync } from 'node:fs';
import puppeteer from 'puppeteer-core';

const [chromium, page_path, json_path, shot, max_bytes_arg, height_arg, head_arg] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const check = (ok, msg) => { if (!ok) fail(msg); };

const bytes = statSync(page_path).size;
const max_bytes = Number(max_bytes_arg);
check(bytes <= max_bytes, `the page is ${bytes} bytes, over the bound of ${max_bytes}`);
const html = readFileSync(page_path, 'utf8');
check(!/(src|href)=["'](?!#)|https?:\/\/|@import|url\(/.test(html), 'the page refers to something outside it');

const response = JSON.parse(readFileSync(json_path, 'utf8'));
const tokens = response.tokens;
const n = tokens.length, tri = n * (n + 1) / 2;
const heads = response.heads.map(h => ({ layer: h.layer ?? 0, head: h.head ?? 0, weights: h.weights }));
check(heads.length === (response.n_layers * response.n_heads), 'the response lacks heads');
check(heads.every(h => h.weights && h.weights.length === tri), 'the response lacks float weights');

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync',
         '--disable-component-update'],
});
try {
  const page = await browser.newPage();
  let external = 0;
  await page.setRequestInterception(true);
  page.on('request', r => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) ++external; r.continue(); });
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  await page.setViewport({ width: 1400, height: Number(height_arg || 900) });
  await page.goto('file://' + page_path, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready, { timeout: 30000 });
  check(await page.evaluate(() => document.body.dataset.ready) === '1', 'the page could not decode its weights: ' +
        await page.evaluate(() => document.getElementById('readout').textContent));
  check(errors.length === 0, 'script errors: ' + errors.join('; '));
  check(external === 0, `the page fetched ${external} things from outside`);
  check(Number(await page.evaluate(() => document.body.dataset.weights)) === heads.length * tri,
        'the decoded weights are not one triangle per head');

  // Every head in the overview, once, in its layer's row; the overview fits the window.
  const grid = await page.evaluate(() => {
    const rows = Array.from(document.querySelectorAll('.atlas .layer')).slice(1);  // after the head numbers
    return {
      scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
      right: document.querySelector('.atlas').getBoundingClientRect().right,
      rows: rows.map(r => Array.from(r.querySelectorAll('.cell')).map(c => {
        const b = c.getBoundingClientRect();
        return { href: c.getAttribute('href'), top: Math.round(b.top), right: b.right, width: b.width };
      })),
    };
  });
  check(grid.scroll <= grid.inner, `the page scrolls sideways: ${grid.scroll} px wide in a ${grid.inner} px window`);
  check(grid.right <= 1400, `the overview grid ends at ${grid.right} px`);
  const seen = new Set();
  grid.rows.forEach((row, layer) => {
    check(row.length === response.n_heads, `layer ${layer} shows ${row.length} heads`);
    check(new Set(row.map(c => c.top)).size === 1, `layer ${layer}'s heads are not on one row`);
    check(row.every(c => c.right <= 1400 && c.width >= 6), `layer ${layer}'s squares are cut off or too small`);
    row.forEach(c => seen.add(c.href));
  });
  for (const h of heads) check(seen.has(`#h-${h.layer}-${h.head}`), `head ${h.layer}.${h.head} is not in the overview`);

  // The roles table counts each label the server gave.
  const counts = await page.evaluate(() => Object.fromEntries(Array.from(document.querySelectorAll('#roles tr')).slice(1)
      .map(tr => [tr.cells[0].textContent.trim(), Number(tr.cells[2].textContent)])));
  for (const [role, count] of Object.entries(counts))
    check(count === response.heads.filter(h => h.label === role).length, `the roles table counts ${count} ${role} heads`);
  check(Object.values(counts).reduce((a, b) => a + b, 0) === heads.length, 'the roles table misses heads');

  // Clicking a square opens that head's map, every cell of its lower triangle painted.
  const step = Math.max(1, Math.floor(heads.length / 24));
  for (let i = 0; i < heads.length; i += step) {
    const h = heads[i];
    await page.click(`.cell[href="#h-${h.layer}-${h.head}"]`);
    const m = await page.evaluate(() => ({ ...document.getElementById('map').dataset }));
    check(Number(m.layer) === h.layer && Number(m.head) === h.head, `clicking ${h.layer}.${h.head} opened ${m.layer}.${m.head}`);
    check(Number(m.painted) === tri, `head ${h.layer}.${h.head}: ${m.painted} of ${tri} cells painted`);
  }

  // Hover: the cell of the chosen head's last query row on its strongest key, and on key 0.
  const chosen = head_arg ? heads.find(h => `${h.layer}.${h.head}` === head_arg) : heads[Math.floor(heads.length / 2)];
  check(chosen, `no head ${head_arg}`);
  await page.click(`.cell[href="#h-${chosen.layer}-${chosen.head}"]`);
  const r = n - 1, base = r * (r + 1) / 2;
  const row = chosen.weights.slice(base, base + n);
  const strongest = row.indexOf(Math.max(...row));
  for (const c of new Set([0, r, strongest])) {  // the strongest last: the screenshot shows it
    const at = await page.evaluate((r, c) => {
      const map = document.getElementById('map');
      map.scrollIntoView({ block: 'nearest' });
      const b = map.getBoundingClientRect();
      const label = Number(map.dataset.label), cell = Number(map.dataset.cell);
      return { x: b.left + label + (c + 0.5) * cell, y: b.top + label + (r + 0.5) * cell };
    }, r, c);
    await page.mouse.move(at.x, at.y);
    const text = await page.evaluate(() => document.getElementById('readout').textContent);
    const want = row[c];
    const m = /\(#(\d+)\) \u2192 key .*\(#(\d+)\): weight ([0-9.]+)/.exec(text);
    check(m && Number(m[1]) === r && Number(m[2]) === c, `hovering (${r}, ${c}) read "${text}"`);
    check(Math.abs(Number(m[3]) - want) <= 1 / 510 + 5e-4, `hovering (${r}, ${c}): weight ${m[3]}, the server measured ${want}`);
    const plain = t => !/<0x/.test(t);
    if (plain(tokens[r])) check(text.includes(tokens[r]), `the read-out lacks the query token ${tokens[r]}`);
    if (plain(tokens[c])) check(text.includes(tokens[c]), `the read-out lacks the key token ${tokens[c]}`);
    const strip = await page.evaluate(() => Array.from(document.querySelectorAll('#strip span')).map(s => s.className));
    check(strip.length === n && strip[r] === 'q' && strip.slice(0, r).every(s => s === ''),
          'the token strip does not frame the query and shade what it attends to');
    console.log(`hover (${r}, ${c}) on head ${chosen.layer}.${chosen.head}: "${text}"`);
  }
  await page.screenshot({ path: shot });
  console.log(`ok: ${heads.length} heads x ${n} tokens, ${bytes} bytes (bound ${max_bytes}), overview ${Math.round(grid.right)} px wide; screenshot ${shot}`);
} finally {
  await browser.close();
}
