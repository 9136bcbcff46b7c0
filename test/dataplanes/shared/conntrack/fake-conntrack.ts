// A conntrack table in memory that answers the two `conntrack` calls kproxy makes as the real tool
// does (conntrack-tool.ts): `-L -f F -p udp -o extended` lists its UDP flows in the real format,
// `-D -f F -p P --orig-dst D --dport N --reply-src R` deletes the matches and prints the summary
// (exit 1 when nothing matched). The dataplanes' unit tests plug it into their fake runners.
import type { CommandResult, CommandRunner } from '../../../../dataplanes/shared/command-runner.ts';

export interface FakeFlow {
  readonly origDst: string;
  readonly dport: number;
  readonly replySrc: string;
  readonly protocol?: 'udp' | 'sctp';
}

const SUMMARY = 'conntrack v1.4.7 (conntrack-tools):';

export class FakeConntrack implements CommandRunner {
  flows: FakeFlow[];
  /** Every call, as "conntrack <args>". */
  readonly calls: string[] = [];
  /** When set, every call fails with this stderr (exit 1). */
  failWith: string | undefined;

  constructor(flows: readonly FakeFlow[] = []) {
    this.flows = [...flows];
  }

  async run(command: string, args: readonly string[]): Promise<CommandResult> {
    const result = this.answer(command, args);
    if (result === undefined) throw new Error(`FakeConntrack runs conntrack only, not ${command}`);
    return result;
  }

  /** The result of a `conntrack` call; undefined for any other command. */
  answer(command: string, args: readonly string[]): CommandResult | undefined {
    if (command !== 'conntrack') return undefined;
    this.calls.push(['conntrack', ...args].join(' '));
    if (this.failWith !== undefined) return { stdout: '', stderr: this.failWith, exitCode: 1 };
    const v6 = option(args, '-f') === 'ipv6';
    const protocol = option(args, '-p');
    const ofCall = (f: FakeFlow) => f.origDst.includes(':') === v6 && (f.protocol ?? 'udp') === protocol;
    if (args[0] === '-L') {
      const listed = this.flows.filter(ofCall);
      return {
        stdout: listed.map((f) => line(f, v6)).join(''),
        stderr: `${SUMMARY} ${listed.length} flow entries have been shown.\n`,
        exitCode: 0,
      };
    }
    if (args[0] === '-D') {
      const matches = (f: FakeFlow) =>
        ofCall(f) &&
        f.origDst === option(args, '--orig-dst') &&
        `${f.dport}` === option(args, '--dport') &&
        f.replySrc === option(args, '--reply-src');
      const deleted = this.flows.filter(matches).length;
      this.flows = this.flows.filter((f) => !matches(f));
      const stderr = `${SUMMARY} ${deleted} flow entries have been deleted.\n`;
      return { stdout: '', stderr, exitCode: deleted > 0 ? 0 : 1 };
    }
    throw new Error(`FakeConntrack: unexpected conntrack ${args.join(' ')}`);
  }

  /** The deletions asked for, as "conntrack -D ..." lines. */
  deletions(): string[] {
    return this.calls.filter((c) => c.startsWith('conntrack -D'));
  }
}

function option(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

function line(f: FakeFlow, v6: boolean): string {
  const client = v6 ? 'fd00:100::200' : '10.100.0.200';
  const family = v6 ? 'ipv6     10' : 'ipv4     2';
  const proto = f.protocol === 'sctp' ? 'sctp     132' : 'udp      17';
  return `${family} ${proto} 29 src=${client} dst=${f.origDst} sport=40000 dport=${f.dport} src=${f.replySrc} dst=${client} sport=5353 dport=40000 mark=0 use=1\n`;
}
