import { median } from './measure.js';
import { FLOOR_KINDS, type FloorKind } from './serve-floor.js';
import type { ServeBench, ServeSample } from './serve.js';

// What `npm run bench:serve` prints: a line per path, then the cost targets, each a median of the
// rounds' own ratios, and with --floor what one Node process could serve at most.

/** sluice serve's server CPU per call, at most this many times grpc-go's (the target). */
const TO_GO = 1.5;
/** Where TO_GO is out of reach on Node: at most this many times the cheapest Node gRPC floor's. */
const TO_NODE_FLOOR = 1.2;

const micros = (n: number) => (Number.isNaN(n) ? 'n/a' : n.toFixed(0).padStart(4));

function ratioText(ratios: readonly number[]): string {
  if (ratios.length === 0) return 'n/a';
  const x = (n: number) => `${n.toFixed(2)}x`;
  return `${x(median(ratios))} (rounds ${ratios.map(x).join(', ')})`;
}

function target(met: boolean, text: string): void {
  console.log(`  ${met ? 'met   ' : 'MISSED'} ${text}`);
}

function printCost(result: ServeBench): void {
  const { cost } = result;
  if (!cost) return;
  console.log(
    '\nServer CPU per call, `sluice serve` on its memory store over gRPC, over each floor (ratios within a round):',
  );
  const toGo = median(cost.toGo);
  if (cost.toGo.length > 0) target(toGo <= TO_GO, `at most ${TO_GO}x bare grpc-go: ${ratioText(cost.toGo)}`);
  else console.log('  (no grpc-go row: no `go` on PATH)');
  target(
    median(cost.toHttp2) <= TO_NODE_FLOOR,
    `at most ${TO_NODE_FLOOR}x bare node:http2, the cheapest Node gRPC floor measured: ${ratioText(cost.toHttp2)}`,
  );
  console.log(
    "\nRedis CPU per decision, `sluice serve` on Redis over envoyproxy/ratelimit's commands for the same requests at its rate:",
  );
  target(median(cost.redisToPattern) <= 1, `at most 1x: ${ratioText(cost.redisToPattern)}`);
}

function printCeilings(result: ServeBench, served: readonly [string, ServeSample][]): void {
  // One Node process runs its JavaScript on one thread, so one core bounds it: 1,000,000 µs of CPU
  // a second. Where its other threads (the garbage collector's helpers) get a second core, its
  // main thread's CPU alone bounds it.
  const library = result.inProcess.decisionsPerSecond;
  const half = library / 2;
  console.log(
    `\nThe most one process serves, 1,000,000 / server CPU µs per call (the process; its main thread alone), ` +
      `against half the library, ${Math.round(half)}/s, which allows a server at most ${(1e6 / half).toFixed(0)} µs per call:`,
  );
  const most = (micros: number) => {
    const perSecond = 1e6 / micros;
    return `${Math.round(perSecond).toString().padStart(7)}/s ${(perSecond / library).toFixed(2)}x`;
  };
  for (const [name, s] of served) {
    const { service, serviceMainThread } = s.cpuMicros;
    const verdict =
      1e6 / service >= half
        ? 'reachable'
        : 1e6 / serviceMainThread >= half
          ? 'reachable only with its other threads on another core'
          : 'out of reach';
    console.log(`${name.padEnd(36)} ${most(service)}; ${most(serviceMainThread)}: 0.5x ${verdict}`);
  }
}

export function printServeBench(result: ServeBench, inFlight: number, floor: boolean): void {
  const library = result.inProcess.decisionsPerSecond;
  const line = (name: string, s: ServeSample) =>
    `${name.padEnd(36)} ${Math.round(s.decisionsPerSecond).toString().padStart(7)}/s ` +
    `${((100 * s.decisionsPerSecond) / library).toFixed(0).padStart(3)}% of in-process  ` +
    `p50 ${s.p50Ms.toFixed(2).padStart(6)} ms  p99 ${s.p99Ms.toFixed(2).padStart(6)} ms  ` +
    `CPU µs/call: callers ${micros(s.cpuMicros.callers)}, server ${micros(s.cpuMicros.service)} ` +
    `(main thread ${micros(s.cpuMicros.serviceMainThread)}), Redis ${micros(s.cpuMicros.redis)}`;
  console.log(`${inFlight} in flight; each server asked by ${result.loadProcesses} load processes`);
  const served: [string, ServeSample][] = [
    ['sluice serve, gRPC', result.grpc],
    ['sluice serve --workers 2, gRPC', result.twoWorkers],
    ['sluice serve, /json', result.json],
  ];
  if (result.cost) served.push(['sluice serve, memory store, gRPC', result.cost.memory]);
  console.log(line('in-process library', result.inProcess));
  for (const [name, s] of served) console.log(line(name, s));
  if (result.cost) console.log(line("envoyproxy/ratelimit's Redis commands", result.cost.pattern));
  console.log(`sluice serve --workers 2 over 1 process, decisions/s: ${ratioText(result.twoWorkersToOne)}`);
  const floors = (Object.keys(FLOOR_KINDS) as FloorKind[]).filter((kind) => result.floor[kind] !== undefined);
  if (floors.length > 0) {
    console.log('\nFloors: a constant answer, no decision (bench/serve-floor.ts), the same loads');
    for (const kind of floors) {
      const s = result.floor[kind] as ServeSample;
      console.log(line(FLOOR_KINDS[kind], s));
      served.push([FLOOR_KINDS[kind], s]);
    }
  }
  printCost(result);
  if (floor) printCeilings(result, served);
}
