export { createServer, type ServeOptions, type SluiceServer } from './server.js';
export type { TlsOptions } from './tls.js';
export { loadConfig, parseConfig, type ConfigOptions, type ServeConfig } from './config.js';
export { InvalidConfigError } from '../core/errors.js';
