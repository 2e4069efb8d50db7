// The part of autocannon 9's API the HTTP bench uses (the package ships no types).
declare module 'autocannon' {
  interface RequestParams {
    method?: string;
    path?: string;
    headers: Record<string, string>;
    body?: string | Buffer;
  }

  interface Request {
    /** Called before each request is sent; returns the request to send. */
    setupRequest?: (request: RequestParams, context: Record<string, unknown>) => RequestParams;
  }

  interface Options {
    url: string;
    connections?: number;
    /** Seconds; ignored when `amount` is given. */
    duration?: number;
    /** Stop after this many responses. */
    amount?: number;
    /** ms between samples; the run also ends at a sample. Default 1000. */
    sampleInt?: number;
    requests?: Request[];
  }

  interface Percentiles {
    average: number;
    p50: number;
    p99: number;
    total: number;
  }

  interface Result {
    requests: Percentiles;
    /** Milliseconds, whole ones (autocannon records latencies at 1 ms resolution). */
    latency: Percentiles;
    /** Seconds, to 10 ms. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
  }

  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
