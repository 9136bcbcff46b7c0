// `kproxy cleanup --script`: cleanup's commands (each mode's cleanupCommands(), what `kproxy
// cleanup` runs) as a POSIX shell script that needs nothing of kproxy's, only the node's own tools:
// the package's prerm writes it at a removal, while kproxy is still installed, and postrm runs it at
// the purge, when kproxy is gone. The kernel may have changed in between (a reboot, an operator),
// so each removal runs only while its checks hold, and a removal that fails or lacks its tool is
// reported, not fatal: the script goes on with the next one and exits 1 when it left anything.
import type { CleanupCommand, ToolCheck, ToolRun } from '../../contract/dataplane.ts';
import { hereDocument } from '../../contract/tool-inputs.ts';

const HEADER = `#!/bin/sh
# Written by \`kproxy cleanup --script\`: removes the rules kproxy had on this node when it was
# written, with the node's own tools. Each removal runs only while its checks hold (the kernel may
# have changed since); what fails or lacks its tool is reported. Exits 1 when anything is left.
left=0
`;

/** A word as the shell reads it back unchanged. */
function quoted(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The command line of `run` (its here-document's lines follow the line `then` ends). */
function commandLine({ command, args, input }: ToolRun, redirect = ''): { line: string; lines: string } {
  const words = [command, ...args].map(quoted).join(' ');
  if (input === undefined) return { line: `${words}${redirect}`, lines: '' };
  const here = hereDocument(input);
  return { line: `${words}${redirect} ${here.redirection}`, lines: here.lines };
}

/** A condition that holds when `check` does; its output is not shown. */
function condition(check: ToolCheck): { line: string; lines: string } {
  if (check.printsLine === undefined) return commandLine(check, ' >/dev/null 2>&1');
  const run = commandLine(check, ' 2>/dev/null');
  return { line: `${run.line} | grep -qxF ${quoted(check.printsLine)}`, lines: run.lines };
}

/** `elif CHECK && CHECK; then` over several lines: each here-document follows its own line. */
function elifAll(checks: readonly ToolCheck[]): string {
  if (checks.length === 0) return 'elif true; then\n';
  const conditions = checks.map((check, i) => {
    const { line, lines } = condition(check);
    return `${i === 0 ? 'elif' : ' '} ${line}${i < checks.length - 1 ? ' &&' : ''}\n${lines}`;
  });
  return `${conditions.join('')}then\n`;
}

function echo(message: string, toStderr = false): string {
  return `echo ${quoted(message)}${toStderr ? ' >&2' : ''}`;
}

/**
 * One removal. Of the removals that share a `what` (the parts of one, IPVS's virtual servers), the
 * first reports a missing tool and the last reports it removed.
 */
function removal(command: CleanupCommand, first: boolean, last: boolean): string {
  const tools = [...new Set([command.command, ...command.when.map((check) => check.command)])];
  const missing = tools
    .map((tool) => {
      const report = first ? `${echo(`kproxy: left ${command.what}: ${tool} is not installed`, true)}; ` : '';
      return `if ! command -v ${quoted(tool)} >/dev/null 2>&1; then\n  ${report}left=1\n`;
    })
    .join('el');
  const run = commandLine(command);
  const done = last ? `  then ${echo(`removed ${command.what}`)}\n` : '  then :\n';
  return [
    `# ${command.what}\n`,
    missing,
    elifAll(command.when),
    `  if ${run.line}\n`,
    run.lines,
    done,
    `  else ${echo(`kproxy: could not remove ${command.what}`, true)}; left=1\n`,
    '  fi\n',
    'fi\n',
  ].join('');
}

/** The script: the commands in order, then its exit. */
export function cleanupScript(commands: readonly CleanupCommand[]): string {
  const removals = commands.map((command, i) =>
    removal(command, commands[i - 1]?.what !== command.what, commands[i + 1]?.what !== command.what),
  );
  return `${HEADER}${removals.join('')}exit $left\n`;
}
