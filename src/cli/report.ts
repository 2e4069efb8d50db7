import { admittedCount, type EdgeTimeline } from './demo.js';
import { describePolicy } from './policy-spec.js';

/** What each algorithm trades, for the table under the timelines (docs: REFERENCE's measured sizes). */
const TRADE_OFFS: Readonly<Record<string, { title: string; exact: string; memory: string; bursts: string }>> = {
  'fixed-window': {
    title: 'Fixed window',
    exact: 'No: up to twice the limit across a window edge',
    memory: 'One counter per key (about 113 B in Redis)',
    bursts: 'The whole limit again at every window start',
  },
  'sliding-log': {
    title: 'Sliding log',
    exact: 'Yes: never more than the limit in any window',
    memory: 'One entry per admitted request (about 3.7 KB for 100)',
    bursts: 'Up to the limit in any window of its length',
  },
  'token-bucket': {
    title: 'Token bucket',
    exact: 'Yes, as a rate: a burst of its capacity, then the refill rate',
    memory: 'Two numbers in one string per key',
    bursts: 'Up to its capacity, then one per refilled token',
  },
  gcra: {
    title: 'GCRA',
    exact: 'Yes, as a rate: requests evenly spaced, a burst allowance on top',
    memory: 'One integer per key',
    bursts: 'Up to its burst, then one per emission interval',
  },
  'sliding-window': {
    title: 'Sliding window',
    exact: 'An estimate: the previous window weighted by its overlap (see docs/algorithms.md)',
    memory: 'Two counters per key',
    bursts: 'No 2x edge burst; close to the limit in any window',
  },
};

const WIDTH = 640;
const HEIGHT = 260;
const MARGIN = { left: 48, right: 24, top: 24, bottom: 44 };
/** The time axis: the bursts land about 100 ms either side of the edge. */
const SPAN_MS = 250;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function timelineSvg({ policy, requests }: EdgeTimeline): string {
  const top = Math.max(requests.length, policy.limit);
  const x = (ms: number) =>
    MARGIN.left +
    ((Math.max(-SPAN_MS, Math.min(SPAN_MS, ms)) + SPAN_MS) / (2 * SPAN_MS)) * (WIDTH - MARGIN.left - MARGIN.right);
  const y = (count: number) => HEIGHT - MARGIN.bottom - (count / top) * (HEIGHT - MARGIN.top - MARGIN.bottom);
  const parts: string[] = [];
  // Above the limit: the requests a limiter that honoured it over every window would deny.
  parts.push(
    `<rect class="over-limit" x="${MARGIN.left}" y="${MARGIN.top}" width="${WIDTH - MARGIN.left - MARGIN.right}" height="${y(policy.limit) - MARGIN.top}"/>`,
  );
  for (const ms of [-200, -100, 0, 100, 200]) {
    parts.push(
      `<text class="tick" x="${x(ms)}" y="${HEIGHT - MARGIN.bottom + 18}">${ms > 0 ? '+' : ''}${ms} ms</text>`,
    );
  }
  for (const count of [0, policy.limit, top]) {
    parts.push(`<text class="tick y" x="${MARGIN.left - 8}" y="${y(count) + 4}">${count}</text>`);
  }
  parts.push(`<line class="axis" x1="${MARGIN.left}" y1="${y(0)}" x2="${WIDTH - MARGIN.right}" y2="${y(0)}"/>`);
  parts.push(`<line class="edge" x1="${x(0)}" y1="${MARGIN.top}" x2="${x(0)}" y2="${y(0)}"/>`);
  parts.push(`<text class="label" x="${x(0) + 6}" y="${MARGIN.top + 12}">window edge</text>`);
  parts.push(
    `<line class="limit" x1="${MARGIN.left}" y1="${y(policy.limit)}" x2="${WIDTH - MARGIN.right}" y2="${y(policy.limit)}"/>`,
  );
  parts.push(
    `<text class="label limit-label" x="${MARGIN.left + 6}" y="${y(policy.limit) - 6}">${policy.algorithm === 'token-bucket' ? 'capacity' : 'limit'} ${policy.limit}</text>`,
  );
  // The running total of admitted requests: it rises above the limit line only where an algorithm lets too many through.
  let admitted = 0;
  const steps = [`${x(-SPAN_MS)},${y(0)}`];
  const marks = requests.map((request, i) => {
    steps.push(`${x(request.atMs)},${y(admitted)}`);
    if (request.allowed) admitted++;
    steps.push(`${x(request.atMs)},${y(admitted)}`);
    const outcome = request.allowed ? 'admitted' : 'denied';
    return `<circle class="request ${outcome}" cx="${x(request.atMs).toFixed(1)}" cy="${y(i + 1).toFixed(1)}" r="6"><title>request ${i + 1}: ${outcome} at ${request.atMs.toFixed(0)} ms</title></circle>`;
  });
  steps.push(`${x(SPAN_MS)},${y(admitted)}`);
  parts.push(`<polyline class="admitted-total" points="${steps.join(' ')}"/>`);
  parts.push(...marks);
  const label = `${TRADE_OFFS[policy.algorithm]?.title ?? policy.algorithm}: ${admittedCount({ policy, requests })} of ${requests.length} requests admitted around the window edge`;
  return `<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${escapeHtml(label)}">${parts.join('')}</svg>`;
}

function timelineSection(timeline: EdgeTimeline): string {
  const { policy, requests } = timeline;
  const admitted = admittedCount(timeline);
  const title = TRADE_OFFS[policy.algorithm]?.title ?? policy.algorithm;
  return `<section class="timeline" data-algorithm="${escapeHtml(policy.algorithm)}" data-admitted="${admitted}" data-requests="${requests.length}">
<h2>${escapeHtml(title)} <small>${escapeHtml(describePolicy(policy))}</small></h2>
<p class="count"><strong>${admitted} of ${requests.length}</strong> admitted in 200 ms around the edge</p>
${timelineSvg(timeline)}
</section>`;
}

function tradeOffTable(timelines: readonly EdgeTimeline[]): string {
  const rows = timelines.map((timeline) => {
    const traits = TRADE_OFFS[timeline.policy.algorithm];
    const cells = [
      traits?.title ?? timeline.policy.algorithm,
      `${admittedCount(timeline)} of ${timeline.requests.length}`,
      traits?.exact ?? '',
      traits?.memory ?? '',
      traits?.bursts ?? '',
    ];
    return `<tr>${cells.map((cell) => `<td>${escapeHtml(cell)}</td>`).join('')}</tr>`;
  });
  return `<table>
<thead><tr><th>Algorithm</th><th>Admitted around the edge (measured)</th><th>Exact?</th><th>Memory</th><th>Bursts</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
}

const STYLE = `
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 44rem; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-bottom: 0; } h2 small { font-weight: normal; color: #666; }
.count { margin: 0.2rem 0; }
svg { width: 100%; height: auto; background: #fafafa; border: 1px solid #ddd; }
.over-limit { fill: #fdecea; } .axis { stroke: #999; } .edge { stroke: #555; stroke-dasharray: 4 3; }
.limit { stroke: #c0392b; stroke-width: 2; stroke-dasharray: 8 4; } .limit-label { fill: #c0392b; }
.admitted-total { fill: none; stroke: #2e86c1; stroke-width: 2; }
.admitted { fill: #27ae60; } .denied { fill: #fff; stroke: #c0392b; stroke-width: 2; }
.tick { font-size: 11px; fill: #666; text-anchor: middle; } .tick.y { text-anchor: end; } .label { font-size: 12px; fill: #444; }
.legend span { margin-right: 1.2rem; } .dot { display: inline-block; width: 0.7rem; height: 0.7rem; border-radius: 50%; vertical-align: middle; box-sizing: border-box; }
.dot.admitted { background: #27ae60; } .dot.denied { background: #fff; border: 2px solid #c0392b; }
table { border-collapse: collapse; margin-top: 1rem; font-size: 14px; } td, th { border: 1px solid #ddd; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
`;

/** One self-contained page (inline CSS and SVG, nothing fetched) picturing each algorithm's edge run. */
export function renderEdgeReport(timelines: readonly EdgeTimeline[], generatedAt = new Date()): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sluice: requests around a window edge</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Requests around a window edge</h1>
<p>Five requests arrive 100 ms before a window edge and five 100 ms after it, at each limiter, as measured by
<code>sluice demo</code> on ${escapeHtml(generatedAt.toISOString())}. Each dot is a request, placed at the time it was
decided (server clock, relative to the edge) and at its place in the order of answers; the blue line counts the
admitted ones. Above the red dashed line lies more than the limit allows in one window.</p>
<p class="legend"><span><i class="dot admitted"></i> admitted</span><span><i class="dot denied"></i> denied</span></p>
${timelines.map(timelineSection).join('\n')}
<h2>Trade-offs</h2>
${tradeOffTable(timelines)}
</body>
</html>
`;
}
