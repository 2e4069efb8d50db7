import { runOnServer } from '../support/matrix.js';

runOnServer('valkey-8.1');
