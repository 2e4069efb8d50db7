// How long one estimate of the offset serves before a newer one replaces it: long enough to hold a
// reply that travelled fast, short enough that clock drift (NTP slews at most 500 ppm) stays
// under a millisecond.
const WINDOW_MS = 2_000;

/**
 * The Redis server's clock, as known from the server times its replies carry: a reply naming server
 * time `s` that arrives at local time `t` (performance.now()) shows a lead of at least `s - t`; the
 * estimate is the largest such bound in this window and the last. It never overstates the lead but
 * by drift within the window, or on a cluster by how far one node's clock leads another's.
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
