#!/usr/bin/env node
// The installed entry point; npm scripts and the systemd unit run it with the bundled Node 24.
import { main } from '../src/cli/main.ts';

process.exitCode = await main(process.argv.slice(2));
