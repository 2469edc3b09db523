#!/usr/bin/env node
// planc command-line entry: registers the TypeScript loader and runs cli/main.ts.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
register('tsx/esm', pathToFileURL('./'));
await import('../cli/main.ts');
