package procs_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
)

// netPair is two network namespaces joined by a veth pair, with one
// address each in a /30 of 198.18.0.0/15 (the range set aside for network
// tests), made for one test and removed after it.
type netPair struct {
	ns   [2]string
	addr [2]string
}

// newNetPair makes the namespaces, or skips the test saying why it cannot.
func newNetPair(t *testing.T) *netPair {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespace tests skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (ip netns add); not root")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (Debian packages iproute2 and iptables): %v", tool, err)
		}
	}
	id := os.Getpid() % 10000
	sub := os.Getpid() % 64 * 4
	p := &netPair{
		ns:   [2]string{fmt.Sprintf("xputcp%da", id), fmt.Sprintf("xputcp%db", id)},
		addr: [2]string{fmt.Sprintf("198.18.%d.%d", 200, sub+1), fmt.Sprintf("198.18.%d.%d", 200, sub+2)},
	}
	veth := [2]string{fmt.Sprintf("xv%da", id), fmt.Sprintf("xv%db", id)}
	if out, err := exec.Command("ip", "netns", "add", p.ns[0]).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.ns[0]).Run() })
	p.ip(t, "netns", "add", p.ns[1])
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.ns[1]).Run() })
	p.ip(t, "link", "add", veth[0], "netns", p.ns[0], "type", "veth", "peer", "name", veth[1], "netns", p.ns[1])
	for i := range 2 {
		p.ip(t, "-n", p.ns[i], "addr", "add", p.addr[i]+"/30", "dev", veth[i])
		p.ip(t, "-n", p.ns[i], "link", "set", veth[i], "up")
		p.ip(t, "-n", p.ns[i], "link", "set", "lo", "up")
	}
	// Check that iptables works inside a namespace (kernel support).
	if out, err := exec.Command("ip", "netns", "exec", p.ns[0], "iptables", "-L", "INPUT").CombinedOutput(); err != nil {
		t.Skipf("iptables does not work in a network namespace here: %v: %s", err, out)
	}
	return p
}

func (p *netPair) ip(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// iptables runs iptables in namespace i.
func (p *netPair) iptables(t *testing.T, i int, args ...string) {
	t.Helper()
	args = append([]string{"netns", "exec", p.ns[i], "iptables"}, args...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// job places rank i in namespace i, rank 0 being the master.
func (p *netPair) job(t *testing.T, env ...string) job {
	// The namespaces cut the network, not the machine: the ranks are told
	// to link through TCP, which is what these tests cut.
	env = append(env, procs.EnvLinks+"=tcp")
	return job{size: 2, master: p.addr[0], port: 29000 + os.Getpid()%500, secret: newSecret(t), env: env,
		wrapper: func(rank int) []string { return []string{"ip", "netns", "exec", p.ns[rank]} }}
}

// TestNetnsLinkCut runs 2 ranks in separate network namespaces doing
// allreduces, then drops every packet between them (iptables in both
// namespaces): both must report ErrPeerLost within the timeout — the
// heartbeat and TCP_USER_TIMEOUT at work, no FIN or RST ever comes.
func TestNetnsLinkCut(t *testing.T) {
	p := newNetPair(t)
	procs := p.job(t, "XPU_TCP_TIMEOUT="+detectTimeout.String()).start(t, roleUntilLost)
	for _, pr := range procs {
		pr.expect(t, "READY", time.Minute)
	}
	p.iptables(t, 0, "-A", "INPUT", "-s", p.addr[1], "-j", "DROP")
	p.iptables(t, 1, "-A", "INPUT", "-s", p.addr[0], "-j", "DROP")
	cut := time.Now()
	for _, pr := range procs {
		expectLoss(t, pr, cut, "the cut")
	}
}

// TestNetnsPacketLoss drops 10% of the packets between 2 ranks in
// separate namespaces (iptables' statistic match; tc netem where the
// kernel has it would do the same) and checks that a job of checked
// allreduces and exchanges still completes correctly: TCP retransmits,
// and the heartbeat timeout (the default 10 s) does not fire.
func TestNetnsPacketLoss(t *testing.T) {
	p := newNetPair(t)
	for i := range 2 {
		p.iptables(t, i, "-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", "0.1", "-j", "DROP")
	}
	procs := p.job(t, envIters+"=4", envCount+"=100000").start(t, roleChecked)
	for _, pr := range procs {
		pr.expect(t, "OK", 2*time.Minute)
		require.NoError(t, pr.wait(), "rank %d exit", pr.rank)
	}
}
