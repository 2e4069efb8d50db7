import type { MeterLike, MetricAttributes, StoreWatcher } from '../index.js';

/** One series: plain data, also as it is sent between processes. */
interface Series {
  readonly labels: MetricAttributes;
  value: number;
  /** A histogram's cumulative counts, one per bound (then +Inf is `count`). */
  buckets?: number[];
  sum: number;
  count: number;
}

interface Family {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly help: string;
  readonly bounds: readonly number[];
  readonly series: Map<string, Series>;
}

/** An OpenTelemetry name as Prometheus writes it: `sluice.requests.allowed` is `sluice_requests_allowed_total`. */
function prometheusName(name: string, type: Family['type'], unit: string | undefined): string {
  const base = name.replace(/[^a-zA-Z0-9_]/g, '_');
  if (type === 'counter') return `${base}_total`;
  return unit === 's' ? `${base}_seconds` : base;
}

/** A family as plain data, to send between processes. */
export interface FamilyData {
  readonly name: string;
  readonly type: Family['type'];
  readonly help: string;
  readonly bounds: readonly number[];
  readonly series: readonly Series[];
}

const NO_ATTRIBUTES: MetricAttributes = {};

const escapeLabel = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

function labelText(labels: MetricAttributes, extra = ''): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k.replace(/[^a-zA-Z0-9_]/g, '_')}="${escapeLabel(v)}"`);
  if (extra) parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

/**
 * The service's metrics, in memory, rendered as Prometheus text for GET /metrics. Its `meter()` is
 * what observe() records into, with the domain and rule added to every series; `descriptor()`
 * counts the service's own answers.
 */
export class Metrics {
  private readonly families = new Map<string, Family>();
  /** sluice_serve_descriptors_total's series by domain, then rule: OK, OVER_LIMIT, then the same shadow-denied. */
  private readonly descriptors = new Map<string, Map<string, (Series | undefined)[]>>();
  // Made at once, so that the gauge reads 0 from the start, also where every call is answered at once.
  private readonly inFlightSeries = { grpc: this.inFlightOf('grpc'), http: this.inFlightOf('http') };

  private family(name: string, type: Family['type'], help: string, bounds: readonly number[] = []): Family {
    let family = this.families.get(name);
    if (family === undefined) this.families.set(name, (family = { name, type, help, bounds, series: new Map() }));
    return family;
  }

  private series(family: Family, labels: MetricAttributes): Series {
    const id = JSON.stringify(labels);
    let series = family.series.get(id);
    if (series === undefined) {
      series = {
        labels,
        value: 0,
        sum: 0,
        count: 0,
        ...(family.type === 'histogram' ? { buckets: family.bounds.map(() => 0) } : {}),
      };
      family.series.set(id, series);
    }
    return series;
  }

  /**
   * A meter for observe(): every series it records carries `scope` too. observe() passes the same
   * attributes object for the same series, so each instrument finds its series by that object.
   */
  meter(scope: MetricAttributes): MeterLike {
    const seriesOf = (family: Family) => {
      const known = new WeakMap<MetricAttributes, Series>();
      return (attributes: MetricAttributes = NO_ATTRIBUTES): Series => {
        let series = known.get(attributes);
        if (series === undefined) known.set(attributes, (series = this.series(family, { ...scope, ...attributes })));
        return series;
      };
    };
    return {
      createCounter: (name, options) => {
        const series = seriesOf(
          this.family(prometheusName(name, 'counter', options?.unit), 'counter', options?.description ?? name),
        );
        return { add: (value, attributes) => void (series(attributes).value += value) };
      },
      createHistogram: (name, options) => {
        const family = this.family(
          prometheusName(name, 'histogram', options?.unit),
          'histogram',
          options?.description ?? name,
          options?.advice?.explicitBucketBoundaries ?? [],
        );
        const series = seriesOf(family);
        return {
          record: (value, attributes) => {
            const recorded = series(attributes);
            recorded.sum += value;
            recorded.count++;
            // Counted in the first bucket that holds it; render() sums them into Prometheus's cumulative ones.
            const { bounds } = family;
            let bucket = 0;
            while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
            if (bucket < bounds.length && recorded.buckets)
              recorded.buckets[bucket] = (recorded.buckets[bucket] ?? 0) + 1;
          },
        };
      },
    };
  }

  /** Counts the store failures `source` reports, as observe() counts a limiter's, with `scope` on every series. */
  countStoreErrors(source: { watchStore(watcher: StoreWatcher): void }, scope: MetricAttributes): void {
    const errors = this.meter(scope).createCounter('sluice.store.errors', {
      description: "Store calls that failed or timed out, as the limiter's failure guard reports them",
    });
    source.watchStore({
      onOutage: ({ operation, reason }) =>
        errors.add(1, { 'sluice.operation': operation, 'sluice.error.reason': reason }),
    });
  }

  /** One descriptor's answer: by domain, rule and code, shadow-mode would-be denials apart. */
  descriptor(domain: string, rule: string, code: 'OK' | 'OVER_LIMIT', shadowDenied: boolean): void {
    // Found by maps of the strings the call has at hand, not by a key built per call.
    let rules = this.descriptors.get(domain);
    if (rules === undefined) this.descriptors.set(domain, (rules = new Map<string, (Series | undefined)[]>()));
    let slots = rules.get(rule);
    if (slots === undefined) rules.set(rule, (slots = []));
    const slot = (code === 'OK' ? 0 : 1) + (shadowDenied ? 2 : 0);
    let series = slots[slot];
    if (series === undefined) {
      const family = this.family(
        'sluice_serve_descriptors_total',
        'counter',
        'Descriptors decided, by domain, rule and code (shadow_denied: admitted by shadow mode only)',
      );
      slots[slot] = series = this.series(family, { domain, rule, code, shadow_denied: String(shadowDenied) });
    }
    series.value++;
  }

  private inFlightOf(transport: 'grpc' | 'http'): Series {
    return this.series(this.family('sluice_serve_in_flight', 'gauge', 'Calls being decided now, by transport'), {
      transport,
    });
  }

  /** A call taken (+1) or answered (-1), by transport; one decided in the turn it came is never counted. */
  inFlight(transport: 'grpc' | 'http', change: 1 | -1): void {
    this.inFlightSeries[transport].value += change;
  }

  /** Every family now, as plain data: what a worker sends for the whole service's /metrics. */
  snapshot(): FamilyData[] {
    return [...this.families.values()].map((family) => ({
      name: family.name,
      type: family.type,
      help: family.help,
      bounds: [...family.bounds],
      series: [...family.series.values()].map((s) => ({
        ...s,
        ...(s.buckets === undefined ? {} : { buckets: [...s.buckets] }),
      })),
    }));
  }

  /** Prometheus text format 0.0.4. */
  render(): string {
    return renderFamilies(this.snapshot());
  }
}

/** Several processes' families as one: the series with the same name and labels summed. */
export function mergeFamilies(lists: readonly (readonly FamilyData[])[]): FamilyData[] {
  const merged = new Map<string, { family: FamilyData; series: Map<string, Series> }>();
  for (const family of lists.flat()) {
    let into = merged.get(family.name);
    if (into === undefined) merged.set(family.name, (into = { family: { ...family, series: [] }, series: new Map() }));
    for (const series of family.series) {
      const id = JSON.stringify(series.labels);
      const sum = into.series.get(id);
      if (sum === undefined) {
        into.series.set(id, { ...series, ...(series.buckets ? { buckets: [...series.buckets] } : {}) });
        continue;
      }
      sum.value += series.value;
      sum.sum += series.sum;
      sum.count += series.count;
      series.buckets?.forEach((count, i) => sum.buckets && (sum.buckets[i] = (sum.buckets[i] ?? 0) + count));
    }
  }
  return [...merged.values()].map(({ family, series }) => ({ ...family, series: [...series.values()] }));
}

/** Families in Prometheus text format 0.0.4. */
export function renderFamilies(families: readonly FamilyData[]): string {
  const lines: string[] = [];
  for (const family of families) {
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const series of family.series) {
      if (family.type !== 'histogram') {
        lines.push(`${family.name}${labelText(series.labels)} ${series.value}`);
        continue;
      }
      let cumulative = 0;
      family.bounds.forEach((bound, i) => {
        cumulative += series.buckets?.[i] ?? 0;
        lines.push(`${family.name}_bucket${labelText(series.labels, `le="${bound}"`)} ${cumulative}`);
      });
      lines.push(`${family.name}_bucket${labelText(series.labels, 'le="+Inf"')} ${series.count}`);
      lines.push(
        `${family.name}_sum${labelText(series.labels)} ${series.sum}`,
        `${family.name}_count${labelText(series.labels)} ${series.count}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
