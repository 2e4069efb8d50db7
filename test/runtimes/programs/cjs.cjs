// The built package through its exports map, as a CommonJS user requires it.
const { Hono } = require('hono');
const { getConnInfo } = require('hono/cloudflare-workers');
const { Redis } = require('ioredis');
const sluice = require('sluice');
const { rateLimit } = require('sluice/hono');

import('./workload.mjs').then(({ main }) =>
  main({ sluice, rateLimit, Hono, getConnInfo, Redis }, process.argv.slice(2)),
);
