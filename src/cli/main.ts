// The kproxy command line: one table of subcommands. bin/kproxy.ts and `npm run kproxy` call main().
import { MAIN_USAGE } from './help.ts';
import { type CliIO, processIO } from './io.ts';
import { printVersion } from './version.ts';

type Command = (args: readonly string[], io: CliIO) => Promise<number>;

// Each command's modules are loaded when it runs: `kproxy run` on a node's boot waits for no
// renderer, tracer or netlink package (they were 0.14 s of its 0.84 s CPU to start, on a busy node).
const COMMANDS: Readonly<Record<string, Command>> = {
  render: async (args, io) => (await import('./render.ts')).renderCommand(args, io),
  trace: async (args, io) => (await import('./trace.ts')).traceCommand(args, io),
  diff: async (args, io) => (await import('./diff.ts')).diffCommand(args, io),
  run: async (args, io) => (await import('./run.ts')).runCommand(args, io),
  cleanup: async (args, io) => (await import('./cleanup.ts')).cleanupCommand(args, io),
  install: async (args, io) => (await import('./install.ts')).installCommand(args, io),
  help: helpCommand,
  '--help': helpCommand,
  '-h': helpCommand,
  version: versionCommand,
  '--version': versionCommand,
};

/** Runs one command and returns the exit code: 0 ok, 1 user error, 2 usage error. */
export async function main(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    io.stderr.write(MAIN_USAGE);
    return 2;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.stderr.write(`kproxy: unknown command ${JSON.stringify(name)} (see kproxy help)\n`);
    return 2;
  }
  return command(args, io);
}

async function helpCommand(_args: readonly string[], io: CliIO): Promise<number> {
  io.stdout.write(MAIN_USAGE);
  return 0;
}

async function versionCommand(_args: readonly string[], io: CliIO): Promise<number> {
  return printVersion(io);
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
