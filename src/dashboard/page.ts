import { PAGE_SCRIPT } from './page-script.js';

// The whole page, one self-contained document: no fonts, images, styles or scripts from anywhere.
const STYLE = `
:root { color-scheme: light; --admitted: #1a7f37; --denied: #b42318; --shadow: #8a5a00; --muted: #4b5563; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: #111827; background: #f9fafb; }
header { display: flex; gap: 1.5rem; align-items: baseline; padding: .75rem 1.25rem; background: #111827; color: #f9fafb; }
header h1 { margin: 0; font-size: 1.25rem; }
header p { margin: 0; }
main { display: grid; gap: 1rem; padding: 1rem 1.25rem; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); }
section { background: #fff; border: 1px solid #d1d5db; border-radius: 6px; padding: .75rem 1rem; min-width: 0; }
section.wide { grid-column: 1 / -1; }
h2 { margin: 0 0 .5rem; font-size: 1.05rem; }
h3 { margin: .75rem 0 .25rem; font-size: .95rem; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
caption { text-align: left; color: var(--muted); font-size: .85rem; padding-bottom: .25rem; }
th, td { text-align: left; padding: .2rem .5rem; border-bottom: 1px solid #e5e7eb; overflow-wrap: anywhere; }
td.n, th.n { text-align: right; }
svg { width: 100%; height: auto; display: block; }
svg text { font-size: 11px; fill: #374151; }
.legend { display: flex; gap: 1rem; list-style: none; padding: 0; margin: .25rem 0; }
.swatch { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; vertical-align: -1px; border-radius: 2px; }
.admitted { color: var(--admitted); } .denied { color: var(--denied); } .shadow { color: var(--shadow); }
.pill { padding: .1rem .5rem; border-radius: 999px; font-weight: 600; }
.up { background: #dcfce7; color: #14532d; } .down { background: #fee2e2; color: #7f1d1d; } .unknown { background: #e5e7eb; color: #111827; }
header .pill { color: #111827; }
.muted { color: var(--muted); font-size: .85rem; }
pre { margin: 0; white-space: pre-wrap; font-size: .85rem; }
form { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
input, select, button { font: inherit; padding: .25rem .5rem; }
button { background: #1d4ed8; color: #fff; border: 0; border-radius: 4px; cursor: pointer; }
`;

const BODY = `
<header>
  <h1>sluice dashboard</h1>
  <p>Store: <span id="store-pill" class="pill unknown">unknown</span></p>
  <p id="status" role="status" aria-live="polite">Connecting…</p>
</header>
<main>
  <section class="wide" aria-labelledby="rates-heading">
    <h2 id="rates-heading">Decisions per second</h2>
    <form id="series-form"><label for="series">Rule or policy</label>
      <select id="series"><option value="">All</option></select></form>
    <div id="rates-chart"></div>
    <ul class="legend">
      <li><span class="swatch" style="background:var(--admitted)"></span>Admitted</li>
      <li><span class="swatch" style="background:var(--denied)"></span>Denied</li>
      <li><span class="swatch" style="background:var(--shadow)"></span>Shadow-denied</li>
    </ul>
    <table id="series-table"><caption>Decisions since the dashboard started, and in the last whole second</caption>
      <thead><tr><th scope="col">Rule or policy</th><th scope="col" class="n">Admitted</th><th scope="col" class="n">Denied</th>
      <th scope="col" class="n">Shadow-denied</th><th scope="col" class="n">Last second</th></tr></thead><tbody></tbody></table>
  </section>
  <section aria-labelledby="denied-heading">
    <h2 id="denied-heading">Top keys by denials</h2>
    <table id="top-denied"><caption>Denied and shadow-denied requests; a count may be over by its error</caption>
      <thead><tr><th scope="col">Key</th><th scope="col">Rule or policy</th><th scope="col" class="n">Count</th><th scope="col" class="n">Error (±)</th></tr></thead><tbody></tbody></table>
  </section>
  <section aria-labelledby="used-heading">
    <h2 id="used-heading">Top keys by use</h2>
    <table id="top-used"><caption>Every decided request; a count may be over by its error</caption>
      <thead><tr><th scope="col">Key</th><th scope="col">Rule or policy</th><th scope="col" class="n">Count</th><th scope="col" class="n">Error (±)</th></tr></thead><tbody></tbody></table>
    <p id="bound" class="muted"></p>
  </section>
  <section aria-labelledby="store-heading">
    <h2 id="store-heading">Store</h2>
    <h3>Latency of decisions</h3>
    <div id="latency-chart"></div>
    <h3>Outages</h3>
    <table id="outages"><caption>Store outages and what the failure policy answered meanwhile</caption>
      <thead><tr><th scope="col">Began</th><th scope="col">Ended</th><th scope="col">Reason</th><th scope="col" class="n">Failures</th>
      <th scope="col" class="n">Admitted</th><th scope="col" class="n">Denied</th></tr></thead><tbody></tbody></table>
    <p id="no-outages" class="muted">None since the dashboard started.</p>
  </section>
  <section aria-labelledby="lookup-heading">
    <h2 id="lookup-heading">Key lookup</h2>
    <form id="lookup"><label for="lookup-key">Key</label><input id="lookup-key" name="key" required autocomplete="off">
      <button type="submit">Look up</button></form>
    <p class="muted">Read with peek: nothing is counted or written.</p>
    <div id="lookup-result" aria-live="polite"></div>
  </section>
  <section aria-labelledby="rules-heading">
    <h2 id="rules-heading">Rules</h2>
    <pre id="rules"></pre>
  </section>
  <section id="auth" aria-labelledby="auth-heading" hidden>
    <h2 id="auth-heading">Token</h2>
    <form id="token-form"><label for="token">Bearer token</label><input id="token" type="password" autocomplete="off">
      <button type="submit">Use</button></form>
  </section>
</main>`;

/** The dashboard's page: under 100 kB with everything it needs (test/dashboard checks both). */
export const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sluice dashboard</title>
<style>${STYLE}</style>
</head>
<body>${BODY}
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
