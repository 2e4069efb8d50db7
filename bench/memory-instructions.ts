import { inProcessContenders } from './contenders.js';
import { keysFor } from './measure.js';

/*
 * One in-process contender's decisions, one awaited at a time over 10,000 keys, as bench/memory.ts
 * makes them, for counting under valgrind's callgrind: the same count for the same build, whatever
 * else the machine is doing, where timings move by tens of percent. Run it with 0 decisions and
 * with N after the same warm-up; the difference over N is the instructions per decision (garbage
 * collection and the promise machinery included). --single-threaded keeps V8's compiler and
 * collector on the main thread, so that two runs of one build count the same to a few in a million.
 *
 *   npm run build
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     node --single-threaded --import tsx bench/memory-instructions.ts <name filter> <decisions>
 */
const [filter = 'fixedWindow', decisions = '1000000'] = process.argv.slice(2);
const WARM_UP = 200_000;
const contender = inProcessContenders().find((c) => c.name.includes(filter));
if (contender === undefined) throw new Error(`no in-process contender matches ${filter}`);
const decideOne = contender.decide;
const keys = keysFor(10_000);
let next = 0;

// In a function, as bench/measure.ts's loop is: V8 optimizes it, where a module's top level runs unoptimized.
async function decide(count: number): Promise<void> {
  for (let i = 0; i < count; i++) await decideOne(keys[next++ % keys.length] as string);
}

await decide(WARM_UP);
await decide(Number(decisions));
console.log(`${contender.name}: ${WARM_UP} decisions to warm up, then ${decisions}`);
