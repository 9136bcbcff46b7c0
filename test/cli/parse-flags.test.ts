// pflag's syntax, as kube-proxy's command line is read (spf13/pflag's flag.go): each habit a
// kube-proxy command line may use, and pflag's messages for what it refuses.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseFlags } from '../../src/cli/parse-flags.ts';
import { PROXY_FLAG_OPTIONS } from '../../src/config/proxy-flags.ts';

const values = (args: string[]) => {
  const parsed = parseFlags(args, PROXY_FLAG_OPTIONS);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
  return { ...parsed.values };
};
const error = (args: string[]) => {
  const parsed = parseFlags(args, PROXY_FLAG_OPTIONS);
  assert.ok(!parsed.ok, 'refused');
  return parsed.error;
};

test('-v takes its value in every form pflag accepts', () => {
  for (const args of [['-v=2'], ['-v', '2'], ['-v2'], ['--v=2'], ['--v', '2']]) {
    assert.deepEqual(values(args), { v: '2' }, args.join(' '));
  }
});

test("a bool flag is true bare, and takes Go's ParseBool spellings after =", () => {
  assert.deepEqual(values(['--ipvs-strict-arp']), { 'ipvs-strict-arp': true });
  for (const text of ['true', 'True', 'TRUE', '1', 't', 'T']) {
    assert.deepEqual(values([`--ipvs-strict-arp=${text}`]), { 'ipvs-strict-arp': true }, text);
  }
  for (const text of ['false', 'False', 'FALSE', '0', 'f', 'F']) {
    assert.deepEqual(values([`--masquerade-all=${text}`]), { 'masquerade-all': false }, text);
  }
  assert.equal(
    error(['--masquerade-all=yes']),
    'invalid argument "yes" for "--masquerade-all" flag: strconv.ParseBool: parsing "yes": invalid syntax',
  );
});

test('a bool flag does not take the next argument as its value', () => {
  const parsed = parseFlags(['--masquerade-all', 'false'], PROXY_FLAG_OPTIONS, true);
  assert.ok(parsed.ok);
  assert.deepEqual({ ...parsed.values }, { 'masquerade-all': true });
  assert.deepEqual(parsed.positionals, ['false']);
});

test('--flag= is an empty value, and the next argument is a value even when it starts with a dash', () => {
  assert.deepEqual(values(['--metrics-bind-address=']), { 'metrics-bind-address': '' });
  assert.deepEqual(values(['--hostname-override', '-odd-']), { 'hostname-override': '-odd-' });
});

test('a repeated flag: the last value wins, a list flag appends', () => {
  assert.deepEqual(values(['--proxy-mode=ipvs', '--proxy-mode=nftables']), { 'proxy-mode': 'nftables' });
  assert.deepEqual(values(['--nodeport-addresses=10.0.0.0/8', '--nodeport-addresses', 'primary']), {
    'nodeport-addresses': ['10.0.0.0/8', 'primary'],
  });
});

test('-- ends the flags', () => {
  const parsed = parseFlags(['-v=1', '--', '--proxy-mode=ipvs'], PROXY_FLAG_OPTIONS, true);
  assert.ok(parsed.ok);
  assert.deepEqual({ ...parsed.values }, { v: '1' });
  assert.deepEqual(parsed.positionals, ['--proxy-mode=ipvs']);
});

test("what pflag refuses, in pflag's words", () => {
  assert.equal(error(['--iptables-sync']), 'unknown flag: --iptables-sync');
  assert.equal(error(['-x']), "unknown shorthand flag: 'x' in -x");
  assert.equal(error(['--kubeconfig']), 'flag needs an argument: --kubeconfig');
  assert.equal(error(['-v']), "flag needs an argument: 'v' in -v");
  assert.equal(error(['---v=2']), 'bad flag syntax: ---v=2');
  assert.equal(error(['stray']), 'takes no arguments, got "stray"');
});
