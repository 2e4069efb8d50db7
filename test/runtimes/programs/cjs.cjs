// The built package through its exports map, as a CommonJS user requires it.
const sluice = require('sluice');
const { Redis } = require('ioredis');

import('./workload.mjs').then(({ main }) => main(sluice, Redis, process.argv.slice(2)));
