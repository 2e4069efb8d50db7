// The built package through its exports map, as an ES module user imports it.
import * as sluice from 'sluice';
import { Redis } from 'ioredis';
import { main } from './workload.mjs';

await main(sluice, Redis, process.argv.slice(2));
