#!/usr/bin/env node
// planc command-line entry: registers the TypeScript loader (tsx) and runs cli/main.ts.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
