package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/splitplane/splitplane/integration/lab"
)

// The API through the real binaries: a route added with `splitplane route
// add` reaches the FE and forwards (A pings an address of host B only that
// route leads to), is listed with its origin, survives a CE crash without
// a packet lost (api_routes_file) and with the restarted CE claiming its
// forwarding state preserved (the FE kept its FIB) to BIRD, and, deleted, stops forwarding; `fe list` shows the FE's own counters; the CE's /metrics
// counts the API's calls.
func TestAPIEndToEnd(t *testing.T) {
	requireLab(t)
	requireBIRD(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spa", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin, Peer: "bird", Routes: 100}
	// The peer's routes, and the API's route the test adds.
	peerRoutes := o.RouteCount()
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() { splitplane(t, bin, args("lab", "down")...) })
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--routes", fmt.Sprint(o.Routes), "--persist-api-routes", "--peer", o.Peer)...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	api := "unix:" + o.Socket("api")
	cli := func(a ...string) (string, error) { return splitplane(t, bin, append(a, "--api", api)...) }

	// An address of host B that no route leads to yet.
	const extra = "192.0.2.77"
	if out, err := exec.Command("ip", "-n", o.Namespace("b"), "addr", "add", extra+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ping := func() error {
		out, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"), "ping", "-c", "1", "-W", "1", extra).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if ping() == nil {
		t.Fatal("the address answered before any route led to it")
	}
	if out, err := cli("route", "add", extra+"/32", "via", lab.HostB().String()); err != nil {
		t.Fatalf("route add: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "ping through the API's route", ping)

	out, err := cli("route", "list", extra+"/32", "-o", "json")
	if err != nil {
		t.Fatalf("route list: %v\n%s", err, out)
	}
	checkLabFallback(t, bin, o, extra+"/32")
	checkStandardTools(t, o)
	checkRouteCheck(t, o, cli) // before checkMonitoring: the verify metrics exist after a check
	checkMonitoring(t, o)
	var routes []map[string]any
	if err := json.Unmarshal([]byte(out), &routes); err != nil || len(routes) != 1 || routes[0]["origin"] != "api" || routes[0]["installed"] != true {
		t.Fatalf("route list: %v\n%s", err, out)
	}
	// A second add of the same prefix: exit code 4 (already exists).
	if out, err := cli("route", "add", extra+"/32", "via", lab.HostB().String()); exitCode(err) != 4 {
		t.Fatalf("second add: %v\n%s", err, out)
	}

	// The CE crashes and restarts: with api_routes_file the route is back
	// before the FE's resync, which so never takes it away: no ping to it
	// is lost.
	eventually(t, 5*time.Second, "the API's route saved", func() error {
		b, err := os.ReadFile(filepath.Join(o.Dir, "api-routes"))
		if err != nil || !strings.Contains(string(b), extra+"/32 "+lab.HostB().String()+" 5\n") {
			return fmt.Errorf("api-routes: %q %v", b, err)
		}
		return nil
	})
	pings := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"), "ping", "-q", "-i", "0.02", "-c", "300", "-W", "1", extra)
	var pingOut strings.Builder
	pings.Stdout, pings.Stderr = &pingOut, &pingOut
	if err := pings.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if out, err := splitplane(t, bin, args("lab", "restart", "ce", "--kill")...); err != nil {
		t.Fatalf("restart ce: %v\n%s", err, out)
	}
	eventually(t, 40*time.Second, "the FE resynced by the new CE, the API's route included", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != 1 || !st.CE.FEs[0].Synced || st.CERoutes != peerRoutes+1 || st.FERoutes != peerRoutes+1 {
			return fmt.Errorf("CE routes %d, FE routes %d, FEs %+v", st.CERoutes, st.FERoutes, st.CE.FEs)
		}
		// The FE kept its FIB through the restart, so the CE came back
		// claiming its forwarding state preserved to its graceful-restart
		// peers.
		if !st.CE.FEs[0].FIBKept || !st.CE.ForwardingPreserved {
			return fmt.Errorf("after the CE's restart: FE fib_kept %v, CE forwarding_preserved %v; want both", st.CE.FEs[0].FIBKept, st.CE.ForwardingPreserved)
		}
		return nil
	})
	// BIRD, the graceful-restart neighbour, saw the Restart State bit
	// ("Restart recovery" among the CE's capabilities) and the Forwarding
	// State bit of both families ("AF preserved").
	eventually(t, 10*time.Second, "BIRD sees the CE restarting with its forwarding state", func() error {
		out, err := exec.Command("birdc", "-s", o.BIRDSocket("peer"), "show", "protocols", "all", "splitplane").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Restart recovery") || !regexp.MustCompile(`AF preserved:\s+ipv4 ipv6`).Match(out) {
			return fmt.Errorf("birdc: %v\n%s", err, out)
		}
		return nil
	})
	if err := pings.Wait(); err != nil || !strings.Contains(pingOut.String(), " 0% packet loss") {
		t.Fatalf("pings to the API's route across the CE restart: %v\n%s", err, pingOut.String())
	}
	if out, err := cli("route", "list", extra+"/32", "-o", "json"); err != nil || !strings.Contains(out, `"origin": "api"`) {
		t.Fatalf("route list after the restart: %v\n%s", err, out)
	}

	out, err = cli("fe", "list", "-o", "json")
	var fes []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &fes) != nil || len(fes) != 1 || fes[0]["counters"] == nil {
		t.Fatalf("fe list: %v\n%s", err, out)
	}

	if out, err := cli("route", "del", extra+"/32"); err != nil {
		t.Fatalf("route del: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "no more forwarding to the deleted route", func() error {
		if ping() == nil {
			return fmt.Errorf("still answers")
		}
		return nil
	})
	if out, err := cli("route", "del", extra+"/32"); exitCode(err) != 3 {
		t.Fatalf("second delete: %v\n%s", err, out)
	}
	// A martian prefix is refused, naming it (exit code 2: InvalidArgument).
	if out, err := cli("route", "add", "127.0.0.0/8", "via", lab.HostB().String()); exitCode(err) != 2 || !strings.Contains(out, "127.0.0.0/8") || !strings.Contains(out, "martian") {
		t.Fatalf("martian add: %v\n%s", err, out)
	}

	// The (restarted) CE's metrics, from inside the router's namespace.
	body := getInNetns(t, o.Namespace("rtr"), "http://127.0.0.1:9101/metrics")
	for _, want := range []string{"splitplane_ce_fib_routes", `splitplane_api_requests_total{code="OK",method="Delete",service="splitplane.v1.Routes"}`, "splitplane_ce_fe_synced",
		`splitplane_api_requests_total{code="InvalidArgument",method="Add",service="splitplane.v1.Routes"}`, "splitplane_api_routes_restore_failed 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// A corrupt api_routes_file does not keep the CE down: it is moved
	// aside, and the CE comes back without the API's routes, saying so.
	file := filepath.Join(o.Dir, "api-routes")
	if err := os.WriteFile(file, []byte("\x00garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := splitplane(t, bin, args("lab", "restart", "ce", "--kill")...); err != nil {
		t.Fatalf("restart ce with a corrupt api_routes_file: %v\n%s", err, out)
	}
	eventually(t, 40*time.Second, "the CE back with a corrupt api_routes_file, the FE synced", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != 1 || !st.CE.FEs[0].Synced || st.CERoutes != peerRoutes || st.FERoutes != peerRoutes {
			return fmt.Errorf("CE routes %d, FE routes %d, FEs %+v", st.CERoutes, st.FERoutes, st.CE.FEs)
		}
		return nil
	})
	if aside, _ := filepath.Glob(file + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("the corrupt file moved aside as %v", aside)
	}
	if body := getInNetns(t, o.Namespace("rtr"), "http://127.0.0.1:9101/metrics"); !strings.Contains(body, "splitplane_api_routes_restore_failed 1") {
		t.Fatal("metrics do not say the API's routes were not restored")
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// getInNetns fetches url from inside network namespace ns.
func getInNetns(t *testing.T, ns, url string) string {
	t.Helper()
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the thread dies with the goroutine, still in ns
		h, err := netns.GetFromName(ns)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			res <- result{err: err}
			return
		}
		// The socket must be made on this thread, in ns: the transport
		// would dial from another goroutine (and thread).
		u, _ := neturl.Parse(url)
		conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			res <- result{err: err}
			return
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}}
		resp, err := c.Get(url)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res <- result{body: string(b), err: err}
	}()
	r := <-res
	if r.err != nil {
		t.Fatalf("GET %s in %s: %v", url, ns, r.err)
	}
	return r.body
}

// checkLabFallback: with no --api and no $SPLITPLANE_API, and no CE at the
// default socket, the CLI finds the running lab (one under
// /run/splitplane/lab-*, where 'lab up' puts it by default; this lab's
// directory is elsewhere, so it is linked there for the test) and says so.
func checkLabFallback(t *testing.T, bin string, o lab.Options, prefix string) {
	t.Helper()
	if _, err := os.Stat("/run/splitplane/ce-api.sock"); err == nil {
		t.Log("a CE serves /run/splitplane/ce-api.sock here: the lab fallback is not taken; not checked")
		return
	}
	if others, _ := filepath.Glob("/run/splitplane/lab-*/api.sock"); len(others) > 0 {
		t.Logf("other labs run here (%v): the fallback would have to choose; not checked", others)
		return
	}
	dir := fmt.Sprintf("/run/splitplane/lab-%s-%d", o.Name, os.Getpid())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Symlink(o.Socket("api"), filepath.Join(dir, "api.sock")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "route", "list", prefix, "-o", "json")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "SPLITPLANE_API=") })
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("route list without --api: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), `"origin": "api"`) {
		t.Errorf("route list without --api printed %q, want the lab's route", stdout.String())
	}
	if !strings.Contains(stderr.String(), filepath.Join(dir, "api.sock")) {
		t.Errorf("route list without --api said %q, want the lab's socket it used", stderr.String())
	}
}
