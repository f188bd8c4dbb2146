package fe

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/status"
)

func TestConfigInterFELinks(t *testing.T) {
	base := func(links ...InterFELink) Config {
		return Config{ID: 1, Ports: []string{"eth0", "ife2", "ife3"}, InterFELinks: links}
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{base(InterFELink{Port: "eth9", PeerFE: 2}), `inter_fe_links[0].port "eth9": not one of ports`},
		{base(InterFELink{Port: "ife2", PeerFE: 1}), "inter_fe_links[0].peer_fe 1: is this FE's own id"},
		{base(InterFELink{Port: "ife2", PeerFE: 0}), "inter_fe_links[0].peer_fe 0: must be 1 to 1073741823"},
		{base(InterFELink{Port: "ife2", PeerFE: 1 << 30}), "inter_fe_links[0].peer_fe 1073741824: must be 1 to 1073741823"},
		{base(InterFELink{Port: "ife2", PeerFE: 2}, InterFELink{Port: "ife3", PeerFE: 2}), "inter_fe_links[1].peer_fe 2: a second link to the same FE"},
		{base(InterFELink{Port: "ife2", PeerFE: 2}, InterFELink{Port: "ife2", PeerFE: 3}), `inter_fe_links[1].port "ife2": already the link to another FE`},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an ErrConfig naming %q", tc.cfg.InterFELinks, err, tc.want)
		}
	}
	// The default id is 1, so a link to FE 1 of an FE without an id is to
	// itself.
	self := Config{Ports: []string{"ife"}, InterFELinks: []InterFELink{{Port: "ife", PeerFE: 1}}}
	if err := self.Validate(); err == nil {
		t.Error("a link to FE 1 from an FE of the default id 1 was accepted")
	}
	good := base(InterFELink{Port: "ife2", PeerFE: 2}, InterFELink{Port: "ife3", PeerFE: 3})
	if err := good.Validate(); err != nil {
		t.Errorf("a mesh of two links: %v", err)
	}
}

func setEgress(v6 bool, nh, fe, port uint32) forces.TableOp {
	class := forces.ClassIPv4NexthopEgress
	if v6 {
		class = forces.ClassIPv6NexthopEgress
	}
	b, _ := forces.NexthopEgressInfo{FE: fe, Port: port}.AppendFullData(nil)
	return forces.TableOp{Op: forces.OpSet, ClassID: class, InstanceID: 1, Path: []uint32{1, nh}, FullData: b}
}

// The FE keeps the CE's egress rows per family, counts those naming
// another FE in its status, and refuses a DEL of a row it does not have and
// a row of FE 0; the datapath is not touched.
func TestEgressRows(t *testing.T) {
	a, dp := testAgent(t, Config{ID: 2})
	bad := setEgress(false, 9, 1, 1)
	bad.FullData = []byte{0, 0, 0, 0, 0, 0, 0, 1}
	resp, failed := a.applyConfig(configMsg(t,
		setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1),
		setEgress(false, 1, 1, 7), setEgress(false, 2, 2, 5), setEgress(true, 1, 3, 4),
		del(forces.ClassIPv4NexthopEgress, 3), bad,
	))
	want := fmt.Sprint([]forces.ResultCode{forces.ResultSuccess, forces.ResultSuccess, forces.ResultSuccess, forces.ResultSuccess,
		forces.ResultSuccess, forces.ResultNotFound, forces.ResultInvalidParameters})
	if got := fmt.Sprint(results(t, resp)); !failed || got != want {
		t.Fatalf("results %s, want %s", got, want)
	}
	wantRows := []EgressRow{
		{Nexthop: 1, FE: 1, Port: 7, Remote: true},
		{Nexthop: 2, FE: 2, Port: 5},
		{IPv6: true, Nexthop: 1, FE: 3, Port: 4, Remote: true},
	}
	if got := a.EgressRows(); !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("rows %+v, want %+v", got, wantRows)
	}
	st := a.Status()
	if st.EgressRows != 3 || st.RemoteNexthops != 2 {
		t.Fatalf("status: %d egress rows, %d remote nexthops; want 3 and 2", st.EgressRows, st.RemoteNexthops)
	}
	if dp.Gateway("198.51.100.0/24") != "192.0.2.1" {
		t.Fatalf("the route's gateway is %q", dp.Gateway("198.51.100.0/24"))
	}
	a.applyConfig(configMsg(t, forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv4NexthopEgress, InstanceID: 1, Path: []uint32{1}}))
	if got := a.EgressRows(); len(got) != 1 || !got[0].IPv6 {
		t.Fatalf("after a DEL of the IPv4 table: %+v", got)
	}
}

// A staged transaction's egress rows are not live until COMMIT, and an
// abort leaves the live ones as they were.
func TestEgressRowsStaged(t *testing.T) {
	a, _ := testAgent(t, Config{ID: 2})
	a.applyConfig(configMsg(t, setEgress(false, 1, 1, 7)))
	live := a.table
	staged := live.stage()
	for _, it := range forces.Items(configMsg(t, setEgress(false, 1, 3, 3), setEgress(false, 2, 3, 3))) {
		if err := applyItem(staged, it, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := live.egress.counts(2); n != 1 || live.egress.v4[1].FE != 1 {
		t.Fatalf("staging changed the live rows: %+v", live.egress.v4)
	}
	if n, remote := staged.egress.counts(2); n != 2 || remote != 2 {
		t.Fatalf("staged: %d rows, %d remote", n, remote)
	}
	var undo []func()
	if err := applyItem(live, forces.Items(configMsg(t, del(forces.ClassIPv4NexthopEgress, 1)))[0], nil, &undo); err != nil {
		t.Fatal(err)
	}
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	if live.egress.v4[1].FE != 1 {
		t.Fatalf("undo of a DEL: %+v", live.egress.v4)
	}
}

// The FE answers a GET of the inter-FE link table with its links, ports by
// ifindex; the SupportedLFBs list the egress classes.
func TestInterFELinksAnswered(t *testing.T) {
	a, _ := testAgent(t, Config{ID: 1, Ports: []string{"p7"}, InterFELinks: []InterFELink{{Port: "p7", PeerFE: 2}}})
	b, code := a.answer(forces.Item{Op: forces.OpGet, ClassID: forces.PortTableClass, InstanceID: 1, Path: []uint32{forces.InterFELinksComponent}})
	if code != forces.ResultSuccess {
		t.Fatal(code)
	}
	links, err := forces.ParseInterFELinks(b)
	if err != nil || !reflect.DeepEqual(links, []forces.InterFELink{{Port: 7, PeerFE: 2}}) {
		t.Fatalf("links %+v, %v", links, err)
	}
	if st := a.Status(); len(st.InterFELinks) != 1 || st.InterFELinks[0] != (forces.FEInterFELinkStatus{Port: "p7", Ifindex: 7, PeerFE: 2}) {
		t.Fatalf("status links %+v", st.InterFELinks)
	}
	b, _ = a.answer(forces.Item{Op: forces.OpGet, ClassID: forces.ClassFEObject, InstanceID: 1, Path: []uint32{forces.FEObjectSupportedLFBs}})
	lfbs, _ := forces.ParseSupportedLFBs(b)
	var n int
	for _, l := range lfbs {
		if l.ClassID == forces.ClassIPv4NexthopEgress || l.ClassID == forces.ClassIPv6NexthopEgress {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("SupportedLFBs %+v: want both egress classes", lfbs)
	}
}

// inter_fe_links cannot change at run time: a reload lists them among the
// settings that need a restart.
func TestInterFELinksNeedRestart(t *testing.T) {
	old := Config{ID: 1, Ports: []string{"ife2"}, InterFELinks: []InterFELink{{Port: "ife2", PeerFE: 2}}}
	cur := old
	cur.InterFELinks = []InterFELink{{Port: "ife2", PeerFE: 3}}
	if got := changedFields("", reflect.ValueOf(old), reflect.ValueOf(cur)); !reflect.DeepEqual(got, []string{"inter_fe_links"}) {
		t.Fatalf("changed fields %q, want inter_fe_links", got)
	}
}

// The status socket serves the egress rows at /egress.
func TestEgressDebugView(t *testing.T) {
	a, _ := testAgent(t, Config{ID: 2})
	a.applyConfig(configMsg(t, setEgress(false, 4, 1, 7)))
	socket := filepath.Join(t.TempDir(), "fe.sock")
	stop, err := status.Serve(socket, func() any { return a.Status() }, a.statusHandlers())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var rows []EgressRow
	if err := status.Get(socket, "/egress", &rows); err != nil {
		t.Fatal(err)
	}
	if want := []EgressRow{{Nexthop: 4, FE: 1, Port: 7, Remote: true}}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("/egress: %+v, want %+v", rows, want)
	}
}

// A port event carries the inter-FE link table beside the port's row, as
// a second REPORT; an FE without links sends the port's row alone.
func TestPortEventCarriesLinks(t *testing.T) {
	for _, links := range [][]InterFELink{nil, {{Port: "p7", PeerFE: 2}}} {
		a, _ := testAgent(t, Config{ID: 1, Ports: []string{"p7"}, InterFELinks: links})
		data, err := forces.PortInfo{ID: 7, Name: "p7"}.AppendFullData(nil)
		if err != nil {
			t.Fatal(err)
		}
		m := forces.NewEventNotification(a.id, forces.CEID(0), 1, forces.PortTableClass, forces.PortTableInstance,
			[]uint32{forces.PortTableComponent, 7}, data)
		a.withLinks(m)
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := forces.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		reports, err := forces.Reports(back)
		if err != nil {
			t.Fatal(err)
		}
		if len(reports) != 1+len(links) || !reflect.DeepEqual(reports[0].Path, []uint32{forces.PortTableComponent, 7}) {
			t.Fatalf("links %v: reports %+v", links, reports)
		}
		if len(links) > 0 {
			got, err := forces.ParseInterFELinks(reports[1].FullData)
			if err != nil || !reflect.DeepEqual(reports[1].Path, []uint32{forces.InterFELinksComponent}) ||
				!reflect.DeepEqual(got, []forces.InterFELink{{Port: 7, PeerFE: 2}}) {
				t.Fatalf("second report %+v: %+v, %v", reports[1], got, err)
			}
		}
	}
}
