package fe

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

func setConn(row uint32, pfx string, fe, port uint32) forces.TableOp {
	p := netip.MustParsePrefix(pfx)
	class := forces.ClassIPv4ConnectedEgress
	if p.Addr().Is6() {
		class = forces.ClassIPv6ConnectedEgress
	}
	b, err := forces.ConnectedEgressInfo{Prefix: p, FE: fe, Port: port}.AppendFullData(nil, p.Addr().Is6())
	if err != nil {
		panic(err)
	}
	return forces.TableOp{Op: forces.OpSet, ClassID: class, InstanceID: 1, Path: []uint32{1, row}, FullData: b}
}

// connCluster is clusterAgent with this FE's own port subnets 10.20.1.0/24
// and fd00:20:1::/64 (on p7) and 10.9.0.0/24 (a subnet FE 2 has too), set
// up as setupPorts does.
func connCluster(t *testing.T) (*Agent, *fakeDatapath) {
	t.Helper()
	a, dp := clusterAgent(t)
	a.setPeerMAC(8, peerMAC(2))
	a.setPeerMAC(9, peerMAC(3))
	const connID = forces.MaxNexthopID + 1
	if err := dp.SetNexthop(connID, datapath.Nexthop{Ifindex: 7, SrcMAC: a.ports[7].mac}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"10.20.1.0/24", "fd00:20:1::/64", "10.9.0.0/24"} {
		p := netip.MustParsePrefix(s)
		if err := dp.SetRoute(p, connID); err != nil {
			t.Fatal(err)
		}
		if p.Addr().Is4() {
			a.prog.connected[prefix.FromV4(p)] = connID
		} else {
			a.prog.connected6[p] = connID
		}
	}
	return a, dp
}

// What FE 1 of a cluster programs as the CE's connected egress rows come
// and change, against testdata/connected.golden: another FE's subnet is a
// route to a remote nexthop keyed ConnectedKeyBase + row, this FE's own
// subnet a key to its connected nexthop, a subnet this FE has too nothing;
// a CE route for a remote subnet's prefix loses to it and comes back when
// the row goes, a longer one inside it wins by longest match; a row moves
// to another FE; the whole table goes.
func TestConnectedGolden(t *testing.T) {
	a, dp := connCluster(t)
	var out strings.Builder
	steps := []goldenStep{
		{"this FE's subnets, FE 2's, FE 3's (IPv6), and one FE 2 shares with this FE", []forces.TableOp{
			setConn(0, "10.20.1.0/24", 1, 7), setConn(1, "10.20.2.0/24", 2, 5), setConn(2, "fd00:20:3::/64", 3, 4),
			setConn(3, "10.9.0.0/24", 2, 6), setConn(4, "fd00:20:1::/64", 1, 7)}},
		{"the same again", []forces.TableOp{setConn(0, "10.20.1.0/24", 1, 7), setConn(1, "10.20.2.0/24", 2, 5)}},
		{"CE routes for FE 2's subnet and a longer prefix in it", []forces.TableOp{
			setNH(1, "192.0.2.1"), setRoute(1, "10.20.2.0/24", 1), setRoute(2, "10.20.2.128/25", 1)}},
		{"FE 2's row goes: the CE route comes back", []forces.TableOp{del(forces.ClassIPv4ConnectedEgress, 1)}},
		{"and comes again: the CE route loses", []forces.TableOp{setConn(5, "10.20.2.0/24", 2, 5)}},
		{"FE 2's subnet moves to FE 3", []forces.TableOp{setConn(5, "10.20.2.0/24", 3, 6)}},
		{"the IPv4 table is deleted", []forces.TableOp{{Op: forces.OpDel, ClassID: forces.ClassIPv4ConnectedEgress, InstanceID: 1, Path: []uint32{1}}}},
	}
	applySteps(t, a, dp, &out, steps)
	checkGolden(t, "connected.golden", out.String())
	st := a.Status()
	if st.ConnectedRows != 2 || st.RemoteConnected != 1 {
		t.Fatalf("status: %d connected rows, %d remote; want 2 and 1", st.ConnectedRows, st.RemoteConnected)
	}
	want := []ConnectedRow{{Row: 2, Prefix: netip.MustParsePrefix("fd00:20:3::/64"), FE: 3, Port: 4, Programmed: true},
		{Row: 4, Prefix: netip.MustParsePrefix("fd00:20:1::/64"), FE: 1, Port: 7}}
	if got := a.ConnectedRows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
}

// Bad connected rows are refused, each with its reason, and change
// nothing: a row index past the table, a DEL of a missing row, a row index
// the other family's table holds, FULLDATA that does not decode.
func TestConnectedRowsRefused(t *testing.T) {
	a, dp := connCluster(t)
	before := dp.String()
	bad := setConn(1, "10.20.2.0/24", 2, 5)
	bad.FullData[4] = 40
	resp, failed := a.applyConfig(configMsg(t,
		setConn(forces.MaxConnectedRows, "10.20.2.0/24", 2, 5),
		del(forces.ClassIPv4ConnectedEgress, 3),
		setConn(2, "fd00:20:3::/64", 3, 4), setConn(2, "10.20.3.0/24", 3, 4),
		bad,
	))
	want := fmt.Sprint([]forces.ResultCode{forces.ResultValueOutOfRange, forces.ResultNotFound, forces.ResultSuccess,
		forces.ResultInvalidParameters, forces.ResultInvalidParameters})
	if got := fmt.Sprint(results(t, resp)); !failed || got != want {
		t.Fatalf("results %s, want %s", got, want)
	}
	if _, ok := dp.Remote("10.20.3.0/24"); ok {
		t.Fatal("the refused row was programmed")
	}
	if r, ok := dp.Remote("fd00:20:3::/64"); !ok || r != (datapath.RemoteNexthop{FE: 3, Key: datapath.ConnectedKeyBase + 2, Port: 4}) {
		t.Fatalf("the good row: %+v %v\nbefore:\n%s", r, ok, before)
	}
}

// An FE without inter-FE links keeps the rows and programs nothing.
func TestConnectedNotCluster(t *testing.T) {
	a, dp := testAgent(t, Config{ID: 1})
	resp, failed := a.applyConfig(configMsg(t, setConn(1, "10.20.2.0/24", 2, 5)))
	if failed {
		t.Fatalf("results %v", results(t, resp))
	}
	if dp.String() != "" {
		t.Fatalf("programmed:\n%s", dp)
	}
	if st := a.Status(); st.ConnectedRows != 1 || st.RemoteConnected != 0 {
		t.Fatalf("status: %d rows, %d remote", st.ConnectedRows, st.RemoteConnected)
	}
}

// The kernel's copy of the CE's routes (kernel_routes: all) follows: a CE
// route that a remote subnet takes over leaves the kernel's table, and
// comes back with the CE route when the row goes.
func TestConnectedKernelCopy(t *testing.T) {
	a, _ := connCluster(t)
	f := &ipRoutes{routes: map[netip.Prefix]string{}}
	k := newKernelFIBOn(KernelRoutesAll, f)
	t.Cleanup(k.close)
	a.prog.kernel = k
	p := netip.MustParsePrefix("10.20.2.0/24")
	steps := []struct {
		title string
		ops   []forces.TableOp
		want  string // the kernel's route for p, "" for none
	}{
		{"a CE route", []forces.TableOp{setNH(1, "192.0.2.1"), setRoute(1, "10.20.2.0/24", 1)}, fmt.Sprintf("via 192.0.2.1 proto %d", kernelProto)},
		{"FE 2's subnet takes it over", []forces.TableOp{setConn(1, "10.20.2.0/24", 2, 5)}, ""},
		{"FE 2's row goes", []forces.TableOp{del(forces.ClassIPv4ConnectedEgress, 1)}, fmt.Sprintf("via 192.0.2.1 proto %d", kernelProto)},
	}
	for _, s := range steps {
		if resp, failed := a.applyConfig(configMsg(t, s.ops...)); failed {
			t.Fatalf("%s: %v", s.title, results(t, resp))
		}
		k.flush()
		f.mu.Lock()
		got := f.routes[p]
		f.mu.Unlock()
		if got != s.want {
			t.Fatalf("%s: the kernel's route for %s is %q, want %q", s.title, p, got, s.want)
		}
	}
}
