# The command runner a lab keeps inside each of its network namespaces (namespace-shell.ts starts it
# with `ip netns exec NS perl THIS DIR`). Requests come on stdin as NUL-terminated words: id, the
# command's stdin file, argc, argv. Each command starts at once (they run side by side), in a
# process group of its own, with its stdin from that file and its stdout and stderr in DIR/id.out
# and DIR/id.err. Answers are lines on stdout: "id started PID" (its process group, for a kill on
# timeout), then "id STATUS" when it ends (the shell's convention: 128 + the signal that ended it;
# 127 when it could not be found, 126 when it could not be run).
#
# Perl rather than a bash loop because of forks: bash with timeout(1) forked three times and
# executed twice per command, ~2.3x the CPU of the command's own start where a fork is dear (a VM);
# this forks once. perl-base is in every Debian system.
use strict;
use warnings;
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use POSIX qw(WNOHANG WIFSIGNALED WTERMSIG WEXITSTATUS setpgid _exit);

my $dir = shift @ARGV // die "usage: namespace-shell.pl DIR\n";
$| = 1;

# A child's end wakes the select below: the handler writes to this pipe. Perl runs a handler
# between its ops, not when the signal comes, so a signal that lands after the last check before
# select blocks is handled only once select returns: while commands run, select also returns
# after a while, so such an end is reaped then rather than never (a sweep hung on it). The while
# starts at 10 ms and doubles up to a second as nothing happens: at a steady 10 ms a shell beside
# one long command took 0.8 % of a core, ten times that under the VM's emulation.
pipe(my $wake_read, my $wake_write) or die "namespace shell: pipe: $!\n";
for my $end ($wake_read, $wake_write) {
  fcntl($end, F_SETFL, fcntl($end, F_GETFL, 0) | O_NONBLOCK) or die "namespace shell: fcntl: $!\n";
}
$SIG{CHLD} = sub { syswrite($wake_write, 'x') };
my ($POLL_FIRST, $POLL_MOST) = (0.01, 1);
my $poll = $POLL_FIRST;

my %id_of;    # pid => request id, while the command runs
my @words;    # complete words not yet part of a started request
my $partial = '';
my $drained;

sub start {
  my ($id, $stdin, @argv) = @_;
  my $pid = fork;
  if (!defined $pid) {
    my $why = "namespace shell: fork: $!\n";
    for my $name ("$id.out", "$id.err") {
      open(my $file, '>', "$dir/$name") or die "namespace shell: $dir/$name: $!\n";
      print $file $why if $name eq "$id.err";
      close $file;
    }
    print "$id 126\n";
    return;
  }
  if ($pid == 0) {
    $SIG{CHLD} = 'DEFAULT';
    setpgid(0, 0);
    # Output first: what goes wrong after is written where the lab reads it.
    open(STDOUT, '>', "$dir/$id.out") or _exit(126);
    open(STDERR, '>', "$dir/$id.err") or _exit(126);
    if (!open(STDIN, '<', $stdin)) {
      print STDERR "namespace shell: $stdin: $!\n";
      _exit(126);
    }
    { no warnings 'exec'; exec { $argv[0] } @argv; }
    print STDERR "namespace shell: $argv[0]: $!\n";
    _exit($!{ENOENT} ? 127 : 126);
  }
  # Both sides set the group, so that it exists once "started" is printed whoever ran first.
  setpgid($pid, $pid);
  $id_of{$pid} = $id;
  print "$id started $pid\n";
}

sub reap {
  while ((my $pid = waitpid(-1, WNOHANG)) > 0) {
    my $id = delete $id_of{$pid};
    next unless defined $id;
    print "$id ", (WIFSIGNALED($?) ? 128 + WTERMSIG($?) : WEXITSTATUS($?)), "\n";
  }
}

while (1) {
  my $want = '';
  vec($want, fileno(STDIN), 1) = 1;
  vec($want, fileno($wake_read), 1) = 1;
  my $ready = select(my $got = $want, undef, undef, %id_of ? $poll : undef);
  if ($ready < 0) {
    next if $!{EINTR};
    die "namespace shell: select: $!\n";
  }
  $poll = $ready == 0 ? ($poll * 2 < $POLL_MOST ? $poll * 2 : $POLL_MOST) : $POLL_FIRST;
  1 while sysread($wake_read, $drained, 4096) // 0;
  reap();
  next unless vec($got, fileno(STDIN), 1);
  my $read = sysread(STDIN, my $chunk, 65536);
  next if !defined $read && $!{EINTR};
  # The lab closed its end (or it failed): the commands still running are left to the lab.
  last unless $read;
  my @parts = split /\0/, $partial . $chunk, -1;
  $partial = pop @parts;
  push @words, @parts;
  while (@words >= 3 && @words >= 3 + $words[2]) {
    my ($id, $stdin, $argc) = splice(@words, 0, 3);
    start($id, $stdin, splice(@words, 0, $argc));
  }
}
