// How long one estimate of the offset serves before a newer one replaces it: long enough to hold a
// reply that travelled fast, short enough that clock drift (NTP slews at most 500 ppm) stays
// under a millisecond.
const WINDOW_MS = 2_000;

/**
 * The Redis server's clock, as this process can know it from the server times its replies carry.
 *
 * A reply that names server time `s` and arrives at local time `t` was made no later than `t`, so
 * the server's lead over the local clock is at least `s - t`. The estimate is the largest such
 * bound seen lately (this window and the last): the reply that travelled fastest, so the closest.
 * It never overstates the lead, except by drift within the window and, on a cluster, by how far one
 * node's clock is ahead of another's: a local time converted with it is at most that much late in
 * the server's terms. The local clock is performance.now(), which no wall-clock step moves.
 */
export class ServerClock {
  private current = -Infinity;
  private previous = -Infinity;
  private windowStart = -Infinity;

  /** Learns from a reply made at server time `serverMs` and received at local time `localMs`. */
  observe(serverMs: number, localMs = performance.now()): void {
    if (localMs - this.windowStart > WINDOW_MS) {
      this.previous = this.current;
      this.current = -Infinity;
      this.windowStart = localMs;
    }
    if (serverMs - localMs > this.current) this.current = serverMs - localMs;
  }

  /** The server's time at local time `localMs`, in whole ms; undefined until a reply has been seen. */
  serverTime(localMs: number): number | undefined {
    const lead = Math.max(this.current, this.previous);
    return lead === -Infinity ? undefined : Math.floor(localMs + lead);
  }
}
