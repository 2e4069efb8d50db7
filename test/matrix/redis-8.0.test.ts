import { runOnServer } from '../support/matrix.js';

runOnServer('redis-8.0');
