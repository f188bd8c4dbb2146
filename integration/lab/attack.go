package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/splitplane/splitplane/integration/harness"
)

// The hostile-input suite (issue 21): a lab of its own, and against it a
// fake FE, a fake CE and hostile API clients, one attack at a time. An
// attack holds when the router refused or survived it as docs/security.md
// says and, after it, forwarding (host A reaches host B through the XDP
// fast path), the BGP session and every route are as they were before, with
// the CE and FE processes the same (none crashed and came back).

// AttackOptions configure Attack. Zero values take the defaults.
type AttackOptions struct {
	// Name, Dir and Binary are the lab's (Options); Name is "spatk" by
	// default, so the suite does not take the default lab's namespaces.
	Name, Dir, Binary string
	// Only, when set, runs the attacks whose names match it (a regular
	// expression over the metric names, e.g. "api_").
	Only string
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// AttackResult is one attack's outcome.
type AttackResult struct {
	Name string // the metric's name, attack_...
	Held bool
	What string // what happened, one line
}

// Metric is the result in the benchmark JSON convention.
func (r AttackResult) Metric() map[string]any {
	v := 0
	if r.Held {
		v = 1
	}
	return map[string]any{"metric": r.Name, "value": v, "unit": "held", "what": r.What}
}

// attack is one entry of the suite: run plays it against the lab and
// says what happened, or why the router did not hold.
type attack struct {
	name string
	run  func(ctx context.Context, r *attackRun) (string, error)
}

// attacks is the suite, in the order it runs; attack_*.go hold them.
func attacks() []attack {
	var all []attack
	all = append(all, feAttacks()...)
	all = append(all, ceAttacks()...)
	all = append(all, apiAttacks()...)
	return all
}

// attackRun is the state the attacks share: the lab and what it looked
// like before the first attack.
type attackRun struct {
	o       Options
	out     io.Writer
	cePid   int
	fePid   int
	routes  int // the CE's and the FE's route count before any attack
	victim  *victimFE
	spareFE uint32 // an FE ID the CE admits with a certificate of the lab's, no FE runs it
}

// Attack brings up a lab, plays every attack against it and takes it down.
func Attack(ctx context.Context, ao AttackOptions) ([]AttackResult, error) {
	if ao.Name == "" {
		ao.Name = "spatk"
	}
	if ao.Out == nil {
		ao.Out = io.Discard
	}
	var only *regexp.Regexp
	if ao.Only != "" {
		var err error
		if only, err = regexp.Compile(ao.Only); err != nil {
			return nil, fmt.Errorf("only %q: %w", ao.Only, err)
		}
	}
	o := Options{
		Name: ao.Name, Dir: ao.Dir, Binary: ao.Binary, Out: ao.Out,
		// BIRD announces its routes with itself as the next hop, so an
		// FE that claims the peer's address takes them all.
		Routes: 1000, Peer: "bird", PersistAPIRoutes: true, Attackable: true,
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	fmt.Fprintf(ao.Out, "bringing up lab %s\n", o.Name)
	if err := Up(ctx, o); err != nil {
		return nil, err
	}
	defer func() {
		// The daemons' logs outlive the lab, for the operator to read.
		logs := o.Dir + "-logs"
		if err := keepLogs(o.Dir, logs); err == nil {
			fmt.Fprintf(ao.Out, "the daemons' logs are in %s\n", logs)
		}
		if err := Down(o); err != nil {
			fmt.Fprintf(ao.Out, "lab down: %v\n", err)
		}
	}()
	r := &attackRun{o: o, out: ao.Out, spareFE: SpareFE}
	var err error
	if r.cePid, err = Pid(o, "ce"); err != nil {
		return nil, err
	}
	if r.fePid, err = Pid(o, "fe"); err != nil {
		return nil, err
	}
	st, err := GetStatus(o)
	if err != nil {
		return nil, err
	}
	r.routes = st.FERoutes
	if err := r.healthy(ctx); err != nil {
		return nil, fmt.Errorf("the lab is not healthy before any attack: %w", err)
	}
	if r.victim, err = startVictim(ctx, &o); err != nil {
		return nil, fmt.Errorf("victim FE: %w", err)
	}
	defer r.victim.stop()

	var results []AttackResult
	for _, a := range attacks() {
		if only != nil && !only.MatchString(a.name) {
			continue
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		fmt.Fprintf(ao.Out, "--- %s\n", a.name)
		what, err := a.run(ctx, r)
		res := AttackResult{Name: a.name, Held: err == nil, What: what}
		if err != nil {
			res.What = strings.TrimSpace(what + " NOT HELD: " + err.Error())
		}
		if herr := r.healthy(ctx); herr != nil {
			res.Held = false
			res.What += " AFTER IT: " + herr.Error()
		}
		fmt.Fprintf(ao.Out, "%s: held=%v: %s\n", a.name, res.Held, res.What)
		results = append(results, res)
	}
	return results, nil
}

// healthy checks what every attack must leave as it was: the CE's and the
// FE's processes (the same ones), the BGP session, the association, every
// route, and forwarding through the XDP fast path. It waits a while for
// the session and association, which an attack may have shaken but not
// broken (the CE's restart in the persistence attack).
func (r *attackRun) healthy(ctx context.Context) error {
	for _, p := range []struct {
		name string
		pid  int
	}{{"ce", r.cePid}, {"fe", r.fePid}} {
		if !harness.Alive(p.pid, "splitplane") {
			return fmt.Errorf("the %s (pid %d) is gone; its log: %s", p.name, p.pid, harness.Tail(filepath.Join(r.o.Dir, p.name+".log"), 5))
		}
	}
	var st Status
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		st, err = GetStatus(r.o)
		switch {
		case err != nil:
		case st.BGPState != "established":
			err = fmt.Errorf("BGP session %s", st.BGPState)
		case !st.FEAssociated:
			err = errors.New("FE not associated")
		case st.FERoutes != r.routes || st.CERoutes < r.routes:
			err = fmt.Errorf("routes: FE %d, CE %d, want %d", st.FERoutes, st.CERoutes, r.routes)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := st.Counters["forwarded"]
	to := HostBAddr()
	if r.o.Peer == "bird" {
		to = AnycastAddr() // BIRD's own, behind it
	}
	if err := inNS(r.o.Namespace("a"), "ping", "-q", "-c", "3", "-i", "0.2", "-W", "2", to.String()); err != nil {
		return fmt.Errorf("host A cannot reach %s: %w", to, err)
	}
	st, err := GetStatus(r.o)
	if err != nil {
		return err
	}
	if d := st.Counters["forwarded"] - before; d < 3 {
		return fmt.Errorf("%d packets forwarded by XDP for 3 pings", d)
	}
	return nil
}

// keepLogs copies the *.log files of dir into to (emptied first).
func keepLogs(dir, to string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	os.RemoveAll(to)
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(l)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// logLines counts the lines of one of the lab's daemon logs.
func (r *attackRun) logLines(daemon string) int {
	b, err := os.ReadFile(filepath.Join(r.o.Dir, daemon+".log"))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// PrintAttack writes one line per attack.
func PrintAttack(w io.Writer, rs []AttackResult) error {
	held := 0
	for _, r := range rs {
		mark := "HELD    "
		if !r.Held {
			mark = "NOT HELD"
		} else {
			held++
		}
		if _, err := fmt.Fprintf(w, "%s %-40s %s\n", mark, r.Name, r.What); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d of %d attacks held\n", held, len(rs))
	return err
}

// WriteAttackJSON writes one JSON object per attack.
func WriteAttackJSON(w io.Writer, rs []AttackResult) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r.Metric()); err != nil {
			return err
		}
	}
	return nil
}
