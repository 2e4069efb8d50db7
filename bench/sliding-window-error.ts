/**
 * How far the sliding window counter strays from the exact sliding log, on a simulated trace, in
 * the terms Cloudflare used for theirs: the share of requests wrongly allowed or wrongly denied.
 *
 *   npx tsx bench/sliding-window-error.ts [sources] [minutes] [seed] [profile]
 *
 * profile 'mixed' (default): a quarter of the sources quiet (10-50 requests per minute), half near
 * the limit (70-130), a quarter flooding (150-400). profile 'mostly-under': 95% quiet (5-80), 5%
 * near the limit (80-120), closer to the traffic of Cloudflare's measurement.
 *
 * Each source sends Poisson traffic at its own rate, drawn so that some stay well under the limit,
 * many hover around it and some flood it; the run is deterministic for a seed.
 */
const LIMIT = 100;
const WINDOW_MS = 60_000;

function random(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    // xorshift32: fast, and the same trace for the same seed everywhere
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 4_294_967_296;
  };
}

function main(): void {
  const [sources = 2_000, minutes = 30, seed = 2017] = process.argv.slice(2, 5).map(Number);
  const profile = process.argv[5] ?? 'mixed';
  if (profile !== 'mixed' && profile !== 'mostly-under')
    throw new Error(`profile must be mixed or mostly-under; got ${profile}`);
  const next = random(seed);
  // Requests per minute per source, by profile.
  const rates = Array.from({ length: sources }, () => {
    const kind = next();
    const [low, high] =
      profile === 'mixed'
        ? kind < 0.25
          ? [10, 50]
          : kind < 0.75
            ? [70, 130]
            : [150, 400]
        : kind < 0.95
          ? [5, 80]
          : [80, 120];
    return low + (high - low) * next();
  });
  const events: { at: number; source: number }[] = [];
  rates.forEach((perMinute, source) => {
    for (let at = 0; ;) {
      at += (-Math.log(1 - next()) * WINDOW_MS) / perMinute;
      if (at >= minutes * WINDOW_MS) break;
      events.push({ at: Math.floor(at), source });
    }
  });
  events.sort((a, b) => a.at - b.at);

  // Both estimates are judged on the same history: the requests the exact sliding log admitted.
  // Running each limiter on its own state instead would count every later divergence of the two
  // histories as an error of the estimate, which is not what Cloudflare measured.
  const logs = rates.map((): number[] => []);
  const windows = rates.map(() => new Map<number, number>());
  let wronglyAllowed = 0;
  let wronglyDenied = 0;
  let allowed = 0;
  for (const { at, source } of events) {
    const log = logs[source] as number[];
    while (log.length > 0 && (log[0] as number) <= at - WINDOW_MS) log.shift();
    const exact = log.length + 1 <= LIMIT;
    // The sliding window counter, exactly as src/algorithms/sliding-window.ts computes it.
    const counts = windows[source] as Map<number, number>;
    const start = at - (at % WINDOW_MS);
    const previous = counts.get(start - WINDOW_MS) ?? 0;
    const current = counts.get(start) ?? 0;
    const estimate = previous * (WINDOW_MS - (at - start)) + (current + 1) * WINDOW_MS <= LIMIT * WINDOW_MS;
    if (estimate && !exact) wronglyAllowed++;
    if (exact && !estimate) wronglyDenied++;
    if (exact) {
      allowed++;
      log.push(at);
      counts.set(start, current + 1);
      counts.delete(start - 2 * WINDOW_MS);
    }
  }
  const pct = (n: number) => `${((100 * n) / events.length).toFixed(3)}%`;
  console.log(
    `trace (${profile}): ${events.length} requests from ${sources} sources over ${minutes} min, limit ${LIMIT} per ${WINDOW_MS / 1000} s, seed ${seed}`,
  );
  console.log(`exact sliding log: allowed ${allowed} (${pct(allowed)})`);
  console.log(
    `sliding window counter: wrongly allowed ${wronglyAllowed} (${pct(wronglyAllowed)}), wrongly denied ${wronglyDenied} (${pct(wronglyDenied)}), in all ${pct(wronglyAllowed + wronglyDenied)}`,
  );
}

main();
