// The types of workload.mjs, which every runtime runs as plain JavaScript.
export const LONG_KEY: string;
export function clientsWork(request: (address: string) => Promise<Response>): Promise<unknown>;
export const COUNTING: string;
