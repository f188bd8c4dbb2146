package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/internal/peer"
	"github.com/splitplane/splitplane/internal/status"
)

// SIGHUP makes `splitplane ce` read its configuration again and apply only
// the difference: a neighbour added comes up without the established one
// being reset, a static route appears, an invalid file changes nothing, and
// a neighbour removed takes its routes away. Real GoBGP peers on loopback.
func TestCEReloadOnSIGHUP(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	const ceBGP, portA, portB = 17179, 17180, 17181
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startPeer := func(addr string, port int32, nh string, n int, seed int64) *peer.Peer {
		t.Helper()
		p, err := peer.Start(ctx, peer.Config{
			ASN: 65002, RouterID: netip.MustParseAddr(addr), ListenPort: port, ListenAddrs: []string{addr},
			LocalAddress: netip.MustParseAddr(addr), Neighbor: netip.MustParseAddr("127.0.0.1"), NeighborASN: 65001,
			NeighborPort: ceBGP, Passive: true, Routes: n, Seed: seed, NextHop: netip.MustParseAddr(nh),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop() })
		return p
	}
	startPeer("127.0.0.2", portA, "10.0.0.2", 100, 1)
	startPeer("127.0.0.3", portB, "10.0.0.3", 50, 2)

	sock := filepath.Join(dir, "ce.sock")
	cfgPath := filepath.Join(dir, "ce.yaml")
	config := func(neighbors, statics string) {
		t.Helper()
		body := fmt.Sprintf(`asn: 65001
router_id: 192.0.2.1
bgp_listen_port: %d
bgp_listen_addresses: [127.0.0.1]
forces_listen: 127.0.0.1:0
forces_listen_low: 127.0.0.1:0
status_socket: %s
api_listen: "off"
neighbors:
%s
static_routes:
  - {prefix: 10.0.0.0/8, connected: true}
%s`, ceBGP, sock, neighbors, statics)
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nbA := fmt.Sprintf("  - {address: 127.0.0.2, asn: 65002, port: %d, connect_retry: 1s, import: {default: accept}, export: {default: accept}}\n", portA)
	nbB := fmt.Sprintf("  - {address: 127.0.0.3, asn: 65002, port: %d, connect_retry: 1s, import: {default: accept}, export: {default: accept}}\n", portB)
	config(nbA, "")

	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "ce", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("CE log:\n%s", logs.String())
		}
	})
	get := func() ce.Status {
		var st ce.Status
		status.Get(sock, "/", &st)
		return st
	}
	established := func(st ce.Status, addr string) time.Time {
		for _, n := range st.Neighbors {
			if n.Address == addr && n.State == "established" {
				return n.Since
			}
		}
		return time.Time{}
	}
	eventually(t, 30*time.Second, "neighbour A up with its 100 routes", func() error {
		if st := get(); established(st, "127.0.0.2").IsZero() || st.Routes != 100 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	sinceA := established(get(), "127.0.0.2")

	// Add neighbour B and a static route.
	config(nbA+nbB, "  - {prefix: 192.0.2.0/24, next_hops: [10.0.0.9]}\n")
	cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "neighbour B up, its routes and the static route in", func() error {
		if st := get(); established(st, "127.0.0.3").IsZero() || st.Routes != 151 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if got := established(get(), "127.0.0.2"); !got.Equal(sinceA) {
		t.Fatalf("neighbour A was reset by the reload: established %s, before %s", got, sinceA)
	}

	// An invalid file: logged, nothing changes, the CE keeps running.
	if err := os.WriteFile(cfgPath, []byte("asn: 65001\nrouter_id: 192.0.2.1\nstatic_routes: [{prefix: nonsense}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the refused reload logged", func() error {
		if !strings.Contains(logs.String(), "configuration not applied") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})
	if st := get(); st.Routes != 151 || established(st, "127.0.0.3").IsZero() {
		t.Fatalf("after a refused reload: %+v", st)
	}

	// Neighbour B removed: its routes go, A stays.
	config(nbA, "  - {prefix: 192.0.2.0/24, next_hops: [10.0.0.9]}\n")
	cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "neighbour B gone with its routes", func() error {
		st := get()
		for _, n := range st.Neighbors {
			if n.Address == "127.0.0.3" {
				return fmt.Errorf("B still listed: %+v", st.Neighbors)
			}
		}
		if st.Routes != 101 {
			return fmt.Errorf("%d routes", st.Routes)
		}
		return nil
	})
	if got := established(get(), "127.0.0.2"); !got.Equal(sinceA) {
		t.Fatalf("neighbour A was reset: established %s, before %s", got, sinceA)
	}
}
