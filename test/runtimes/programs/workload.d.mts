// The types of workload.mjs, which every runtime runs as plain JavaScript.
export const LONG_KEY: string;
export function work(sluice: typeof import('sluice'), store: import('sluice').Store, prefix: string): Promise<unknown>;
export function main(sluice: typeof import('sluice'), Redis: typeof import('ioredis').Redis, argv: readonly string[]): Promise<void>;
