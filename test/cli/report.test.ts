import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { runCli } from '../../src/cli/run.js';

const CHROMIUM = '/usr/bin/chromium';
const noChromium = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is not installed (apt-get install -y chromium): the HTML report is not checked in a browser`;

/** The DOM as far as the page scripts below read it (the program has no DOM lib: src must not see one). */
interface PageElement {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement> & { readonly length: number };
  getBoundingClientRect(): {
    readonly x: number;
    readonly right: number;
    readonly width: number;
    readonly height: number;
  };
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
  readonly classList: { contains(name: string): boolean };
}

describe('sluice demo --html', () => {
  let dir = '';
  let lines: string[] = [];
  let reportFile = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-report-'));
    reportFile = join(dir, 'report.html');
    lines = [];
    // No REDIS_URL: the demo starts its own private redis-server.
    const code = await runCli(['demo', '--html', reportFile], {
      out: (line) => lines.push(line),
      err: (line) => lines.push(`stderr: ${line}`),
      env: {},
    });
    assert.equal(code, 0, lines.join('\n'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('prints the demo (its lines are checked in test/cli/demo.test.ts), then where the report went', () => {
    assert.equal(lines.length, 11, lines.join('\n'));
    assert.equal(lines[4], 'fixed window: allowed in 200 ms around the edge: 10 of 10 (limit is 5 per second)');
    assert.equal(lines[10], `report written to ${reportFile}`);
  });

  it('writes a page that loads nothing from anywhere', async () => {
    const html = await readFile(reportFile, 'utf8');
    assert.doesNotMatch(html, /\b(src|href)=|url\(|@import|<script/i);
  });

  it('renders each timeline in Chromium with the measured counts', { skip: noChromium }, async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      const requested: string[] = [];
      page.on('request', (request) => requested.push(request.url()));
      const url = pathToFileURL(reportFile).href;
      await page.goto(url);
      assert.deepEqual(requested, [url]);
      const timelines = await page.$$eval('section.timeline', (sections: PageElement[]) =>
        sections.map((section) => {
          const svg = section.querySelector('svg');
          const box = svg?.getBoundingClientRect();
          const limit = section.querySelector('line.limit')?.getBoundingClientRect();
          const edgeX = section.querySelector('line.edge')?.getBoundingClientRect().x ?? Number.NaN;
          // No named helper here: tsx would wrap it in a __name() call that the page does not have.
          const marks = [...section.querySelectorAll('circle.request')].filter(
            (mark) => mark.getBoundingClientRect().right < edgeX,
          );
          return {
            algorithm: section.getAttribute('data-algorithm'),
            count: section.querySelector('.count')?.textContent,
            admitted: section.querySelectorAll('circle.request.admitted').length,
            denied: section.querySelectorAll('circle.request.denied').length,
            admittedBeforeEdge: marks.filter((mark) => mark.classList.contains('admitted')).length,
            deniedBeforeEdge: marks.filter((mark) => mark.classList.contains('denied')).length,
            // Drawn, not just present: the chart and its limit line take up room on the page.
            drawn: (box?.width ?? 0) > 300 && (box?.height ?? 0) > 100 && (limit?.width ?? 0) > 200,
          };
        }),
      );
      // GCRA's second burst gets one request or none, depending on which side of 200 ms the measured
      // gap falls (see test/cli/demo.test.ts); the page must show whichever it measured.
      const [fixed, log, bucket, evenlySpaced, weighted] = timelines;
      const gcraAdmitted = evenlySpaced?.admitted ?? 0;
      assert.ok(gcraAdmitted === 5 || gcraAdmitted === 6, String(gcraAdmitted));
      assert.deepEqual(evenlySpaced, {
        algorithm: 'gcra',
        count: `${gcraAdmitted} of 10 admitted in 200 ms around the edge`,
        admitted: gcraAdmitted,
        denied: 10 - gcraAdmitted,
        admittedBeforeEdge: 5,
        deniedBeforeEdge: 0,
        drawn: true,
      });
      assert.deepEqual(
        [fixed, log, bucket, weighted],
        [
          {
            algorithm: 'fixed-window',
            count: '10 of 10 admitted in 200 ms around the edge',
            admitted: 10,
            denied: 0,
            admittedBeforeEdge: 5,
            deniedBeforeEdge: 0,
            drawn: true,
          },
          {
            algorithm: 'sliding-log',
            count: '5 of 10 admitted in 200 ms around the edge',
            admitted: 5,
            denied: 5,
            admittedBeforeEdge: 5,
            deniedBeforeEdge: 0,
            drawn: true,
          },
          {
            algorithm: 'token-bucket',
            count: '5 of 10 admitted in 200 ms around the edge',
            admitted: 5,
            denied: 5,
            admittedBeforeEdge: 5,
            deniedBeforeEdge: 0,
            drawn: true,
          },
          {
            algorithm: 'sliding-window',
            count: '5 of 10 admitted in 200 ms around the edge',
            admitted: 5,
            denied: 5,
            admittedBeforeEdge: 5,
            deniedBeforeEdge: 0,
            drawn: true,
          },
        ],
      );
      const table = await page.$$eval('table tbody tr', (rows: PageElement[]) =>
        rows.map((row) => [...row.querySelectorAll('td')].slice(0, 2).map((cell) => cell.textContent)),
      );
      assert.deepEqual(table, [
        ['Fixed window', '10 of 10'],
        ['Sliding log', '5 of 10'],
        ['Token bucket', '5 of 10'],
        ['GCRA', `${gcraAdmitted} of 10`],
        ['Sliding window', '5 of 10'],
      ]);
    } finally {
      await browser.close();
    }
  });
});
