// The built package through its exports map, as an ES module user imports it.
import { Hono } from 'hono';
import { getConnInfo } from 'hono/cloudflare-workers';
import { Redis } from 'ioredis';
import * as sluice from 'sluice';
import { rateLimit } from 'sluice/hono';
import { main } from './workload.mjs';

await main({ sluice, rateLimit, Hono, getConnInfo, Redis }, process.argv.slice(2));
