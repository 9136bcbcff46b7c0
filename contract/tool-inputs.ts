// What a sync feeds the kernel's tools, in the order `kproxy run` applies it: `render` prints each
// input under a comment line naming its tool, `render --script` wraps each in the shell command
// that applies it, so one list is both the dry run and the script (no second copy of the steps).

/** One step of a sync as a person applies it. */
export interface ToolInput {
  /** The comment line above the input (without "# "); none for a single input whose tool is known (nft -f). */
  readonly title?: string;
  /** The command that reads `input` on its stdin (`nft -f -`); absent when the lines are commands (`nfacct add NAME`). */
  readonly command?: string;
  /** Complete lines, each ending in "\n"; "" when the step has nothing to do. */
  readonly input: string;
}

/** The inputs as `render` prints them: each under its comment line. */
export function printInputs(inputs: readonly ToolInput[]): string {
  return inputs.map(({ title, input }) => `${title === undefined ? '' : `# ${title}\n`}${input}`).join('');
}

/** The first lines of a `render --script` output: any failed step stops the script. */
export const SCRIPT_PREAMBLE = '#!/bin/sh\nset -e\n';

/** Ends each here-document. */
const HEREDOC_END = 'KPROXY_INPUT_END';

/**
 * `input` (complete lines) as a here-document: the redirection that ends its command's line, and
 * the lines that follow that line. The delimiter is quoted, so the shell expands nothing in it.
 */
export function hereDocument(input: string): { readonly redirection: string; readonly lines: string } {
  // A rule or comment line equal to the delimiter would end the input early: a bug, not a user error.
  if (input.split('\n').includes(HEREDOC_END)) throw new Error(`input holds the line ${HEREDOC_END}`);
  if (!input.endsWith('\n')) throw new Error('input does not end in a newline');
  return { redirection: `<<'${HEREDOC_END}'`, lines: `${input}${HEREDOC_END}\n` };
}

/**
 * The inputs as POSIX shell commands (without SCRIPT_PREAMBLE, which a script has once): each under
 * its comment line, fed to its tool as a here-document; a step with nothing to do runs nothing.
 */
export function shellScript(inputs: readonly ToolInput[]): string {
  return inputs
    .map(({ title, command, input }) => {
      const comment = title === undefined ? '' : `# ${title}\n`;
      if (input === '' || command === undefined) return comment + input;
      const { redirection, lines } = hereDocument(input);
      return `${comment}${command} ${redirection}\n${lines}`;
    })
    .join('');
}
