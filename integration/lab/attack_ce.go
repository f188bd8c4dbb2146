package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// The fake CE: the attacks on an FE need an FE that dials them, so the
// suite runs one of its own, the victim, a real `splitplane fe` with its XDP
// program on a veth of a namespace of its own (NAME-vfe), whose CE address
// is the fake CE's listener there. An attack on it holds when the victim is
// still running with its program attached, and answered or hung up.

// victimFE is the victim FE and the fake CE's listener.
type victimFE struct {
	o   *Options
	ns  string
	l   net.Listener
	pid int
}

const victimPort = "vport0"

// startVictim makes the victim's namespace and veth, the fake CE's listener
// and the victim FE, all recorded in the lab's state so that lab down
// removes them whatever happens to the suite.
func startVictim(ctx context.Context, o *Options) (*victimFE, error) {
	v := &victimFE{o: o, ns: o.Namespace("vfe")}
	s, err := o.loadState()
	if err != nil {
		return nil, err
	}
	if err := harness.AddNamespace(ctx, v.ns); err != nil {
		return nil, err
	}
	s.Namespaces = append(s.Namespaces, v.ns)
	if err := o.saveState(s); err != nil {
		return nil, err
	}
	if err := harness.AddVeth(ctx, harness.Veth{A: harness.End{NS: v.ns, Dev: victimPort}, B: harness.End{NS: v.ns, Dev: "vport1"}}); err != nil {
		return nil, err
	}
	for _, dev := range []string{victimPort, "vport1"} {
		if err := inNS(v.ns, "ip", "link", "set", dev, "up"); err != nil {
			return nil, err
		}
	}
	if err := inNS(v.ns, "ip", "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	if err := nsthread.Run(v.ns, func() error {
		var err error
		v.l, err = net.Listen("tcp", "127.0.0.1:6800")
		return err
	}); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`# the attack suite's victim FE: its CE is the suite's fake one
id: 1
name: victim
ce_address: 127.0.0.1:6800
ports: [%s]
kernel_routes: connected
xdp_mode: generic
heartbeat_interval: 1s
status_socket: %s
`, victimPort, o.Socket("victim"))
	path := filepath.Join(o.Dir, "victim.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	args := []string{"fe", "--config", path}
	if v.pid, err = o.start("victim", v.ns, args...); err != nil {
		return nil, err
	}
	if s, err = o.loadState(); err != nil {
		return nil, err
	}
	s.Processes["victim"] = v.pid
	s.Commands["victim"] = command{Namespace: v.ns, Args: args}
	return v, o.saveState(s)
}

func (v *victimFE) stop() {
	v.l.Close()
	_ = Stop(*v.o, "victim", false)
}

// healthy checks that the victim runs with its XDP program attached.
func (v *victimFE) healthy() error {
	if !harness.Alive(v.pid, "splitplane") {
		return fmt.Errorf("the victim FE (pid %d) is gone; its log: %s", v.pid, harness.Tail(filepath.Join(v.o.Dir, "victim.log"), 8))
	}
	out, err := harness.Output(context.Background(), "ip", "-n", v.ns, "link", "show", victimPort)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "xdp") {
		return errors.New("the victim FE's XDP program is gone from its port")
	}
	return nil
}

// fakeCE is one association the victim FE opened with the fake CE.
type fakeCE struct {
	nc   net.Conn
	conn *forces.Conn
	fe   forces.ID
	id   forces.ID
}

// accept waits for the victim's next connection and reads its setup.
func (v *victimFE) accept(ctx context.Context) (*fakeCE, *forces.Message, error) {
	tl := v.l.(*net.TCPListener)
	tl.SetDeadline(time.Now().Add(20 * time.Second))
	nc, err := tl.Accept()
	if err != nil {
		return nil, nil, fmt.Errorf("the victim FE did not connect: %w", err)
	}
	c := &fakeCE{nc: nc, conn: forces.NewConn(nc), id: forces.CEID(1)}
	m, err := forces.ReadSetup(c.conn, 5*time.Second)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	// A connection that waited in the listen queue longer than the
	// FE's setup timeout has been given up: the FE has closed it (and
	// sends nothing more before its answer). Take the next one.
	nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := nc.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		nc.Close()
		return v.accept(ctx)
	}
	nc.SetReadDeadline(time.Time{})
	c.fe = m.Header.Src
	return c, m, nil
}

// associated accepts the victim and answers its setup with success.
func (v *victimFE) associated(ctx context.Context) (*fakeCE, error) {
	c, m, err := v.accept(ctx)
	if err != nil {
		return nil, err
	}
	if err := forces.AnswerSetup(c.conn, c.id, m, forces.SetupSuccess); err != nil {
		c.nc.Close()
		return nil, err
	}
	return c, nil
}

// reply waits for the victim's answer to the message with correlator corr
// (heartbeats and events on the way are skipped), which must be a refusal:
// the Config Response's results, or how the FE hung up (a refusal too).
func (c *fakeCE) reply(corr uint64, timeout time.Duration) (string, error) {
	what, err := c.answer(corr, timeout)
	if err == nil && strings.Contains(what, forces.ResultSuccess.String()) {
		return what, errors.New("answered SUCCESS")
	}
	return what, err
}

// answer waits for the victim's answer to the message with correlator corr:
// the Config Response's result codes, or how the FE hung up.
func (c *fakeCE) answer(corr uint64, timeout time.Duration) (string, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		m, err := c.conn.ReadMessage()
		if err != nil {
			if isTimeout(err) {
				return "", errors.New("no answer and no teardown")
			}
			return "the FE ended the association (" + err.Error() + ")", nil
		}
		switch {
		case m.Header.Type == forces.MsgAssociationTeardown:
			return "the FE tore the association down", nil
		case m.Header.Type == forces.MsgConfigResponse && m.Header.Correlator == corr:
			rs, err := forces.ConfigResults(m)
			if err != nil {
				return "answered (" + err.Error() + ")", nil
			}
			var codes []string
			for _, r := range rs {
				codes = append(codes, r.String())
			}
			if len(codes) == 0 {
				return "answered with no results", nil
			}
			return "answered " + strings.Join(slices.Compact(codes), ", "), nil
		}
	}
}

func (c *fakeCE) close() { c.nc.Close() }

// config is a Config message from the fake CE with one operation.
func (c *fakeCE) config(corr uint64, class uint32, op forces.OpType, paths ...forces.PathData) *forces.Message {
	return &forces.Message{
		Header: forces.Header{Type: forces.MsgConfig, Src: c.id, Dst: c.fe, Correlator: corr, Flags: forces.Flags{ACK: forces.AlwaysACK}},
		LFBs:   []forces.LFBSelect{{ClassID: class, InstanceID: 1, Ops: []forces.Operation{{Type: op, Paths: paths}}}},
	}
}

// ceAttacks are played by the fake CE against the victim FE.
func ceAttacks() []attack {
	victim := func(play func(ctx context.Context, v *victimFE) (string, error)) func(context.Context, *attackRun) (string, error) {
		return func(ctx context.Context, r *attackRun) (string, error) {
			what, err := play(ctx, r.victim)
			if err == nil {
				err = r.victim.healthy()
			}
			return what, err
		}
	}
	table := forces.PathData{IDs: []uint32{forces.CompIPv4PrefixTable}}
	// opOnTables sends op on every route table as a whole, then on a row
	// of each, one Config each: every one must be refused, none crash.
	opOnTables := func(op forces.OpType) func(ctx context.Context, v *victimFE) (string, error) {
		return func(ctx context.Context, v *victimFE) (string, error) {
			c, err := v.associated(ctx)
			if err != nil {
				return "", err
			}
			defer func() { c.close() }()
			var answers []string
			corr := uint64(40)
			for t := forces.TableIPv4Prefix; t <= forces.TableIPv6Group; t++ {
				for _, path := range [][]uint32{{t.Component()}, {t.Component(), 1}} {
					corr++
					m := c.config(corr, t.Class(), op, forces.PathData{IDs: path})
					if err := c.conn.WriteMessage(m); err != nil {
						return "", fmt.Errorf("%s on %v: %w", op, path, err)
					}
					what, err := c.reply(corr, 5*time.Second)
					if err != nil {
						return "", fmt.Errorf("%s on class %d path %v: %w", op, t.Class(), path, err)
					}
					if !strings.HasPrefix(what, "answered") {
						// It hung up: a refusal too; go on with a new association.
						c.close()
						if c, err = v.associated(ctx); err != nil {
							return "", err
						}
					}
					answers = append(answers, what)
				}
			}
			return fmt.Sprintf("%s on each route table and on a row of each: %s", op, strings.Join(slices.Compact(answers), "; ")), nil
		}
	}
	return []attack{
		{"attack_fe_config_get_table", victim(opOnTables(forces.OpGet))},
		{"attack_fe_config_set_prop_table", victim(opOnTables(forces.OpSetProp))},
		{"attack_fe_config_report_table", victim(opOnTables(forces.OpReport))},
		{"attack_fe_config_commit_response", victim(func(ctx context.Context, v *victimFE) (string, error) {
			// A Config holding a COMMIT-RESPONSE (an FE's answer, not a
			// CE's request), then an ordinary Config: the FE must answer
			// both (or hang up), never go on with a dead applier.
			c, err := v.associated(ctx)
			if err != nil {
				return "", err
			}
			defer c.close()
			code := forces.ResultSuccess
			odd := c.config(51, forces.ClassFEObject, forces.OpCommitResponse)
			odd.LFBs[0].Ops[0].Result = &code
			if err := c.conn.WriteMessage(odd); err != nil {
				return "", err
			}
			first, err := c.answer(51, 5*time.Second)
			if err != nil || strings.HasPrefix(first, "the FE") {
				return "a COMMIT-RESPONSE in a Config: " + first, err
			}
			p := forces.HeartbeatPolicy{CEHBPolicy: 0, CEHDI: 3000, FEHBPolicy: 1, FEHI: 1000}
			ms, err := forces.BuildConfig(forces.Header{Src: c.id, Dst: c.fe, Correlator: 52, Flags: forces.Flags{ACK: forces.AlwaysACK}}, nil, p.Ops())
			if err != nil {
				return "", err
			}
			if err := c.conn.WriteMessages(ms...); err != nil {
				return "", err
			}
			second, err := c.answer(52, 5*time.Second)
			return fmt.Sprintf("a COMMIT-RESPONSE in a Config: %s; the next Config: %s", first, second), err
		})},
		{"attack_fe_config_unanswerable", victim(func(ctx context.Context, v *victimFE) (string, error) {
			// 15,000 DELs in one message, whose answer (a RESULT-TLV per
			// leaf) cannot fit a message: refused whole or torn down.
			c, err := v.associated(ctx)
			if err != nil {
				return "", err
			}
			defer c.close()
			m := &forces.Message{Header: forces.Header{Type: forces.MsgConfig, Src: c.id, Dst: c.fe, Correlator: 53, Flags: forces.Flags{ACK: forces.AlwaysACK}}}
			for range 4 {
				var paths []forces.PathData
				for i := range 3750 {
					paths = append(paths, forces.PathData{IDs: []uint32{forces.CompIPv4PrefixTable, uint32(i)}})
				}
				m.LFBs = append(m.LFBs, forces.LFBSelect{ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Ops: []forces.Operation{{Type: forces.OpDel, Paths: paths}}})
			}
			if err := c.conn.WriteMessage(m); err != nil {
				return "", err
			}
			what, err := c.reply(53, 5*time.Second)
			return "15,000 DELs whose answer cannot fit a message: " + what, err
		})},
		{"attack_fe_setup_response_not_ce", victim(func(ctx context.Context, v *victimFE) (string, error) {
			// The setup answered from an FE ID, not a CE's.
			c, m, err := v.accept(ctx)
			if err != nil {
				return "", err
			}
			defer c.close()
			if err := forces.AnswerSetup(c.conn, forces.FEID(5), m, forces.SetupSuccess); err != nil {
				return "", err
			}
			c.id = forces.FEID(5)
			if err := c.conn.WriteMessage(c.config(42, forces.ClassIPv4UcastLPM, forces.OpDel, table)); err != nil {
				return "the FE hung up at once", nil
			}
			what, err := c.reply(42, 5*time.Second)
			if err == nil && strings.HasPrefix(what, "answered") {
				return what, errors.New("the FE took Configs from an FE ID")
			}
			return "setup response from FE 5: " + what, err
		})},
		{"attack_fe_dead_interval_max", victim(func(ctx context.Context, v *victimFE) (string, error) {
			// A CE dead interval of 0xFFFFFFFF ms (49 days), then silence:
			// the FE must give up on its clamped dead interval.
			c, err := v.associated(ctx)
			if err != nil {
				return "", err
			}
			defer c.close()
			p := forces.HeartbeatPolicy{CEHBPolicy: 0, CEHDI: 0xFFFFFFFF, FEHBPolicy: 0, FEHI: 1000}
			ms, err := forces.BuildConfig(forces.Header{Src: c.id, Dst: c.fe, Correlator: 43}, nil, p.Ops())
			if err != nil {
				return "", err
			}
			if err := c.conn.WriteMessages(ms...); err != nil {
				return "", err
			}
			// The FE arms its dead timer at each message it reads: one
			// heartbeat after the policy is applied, then silence.
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			if err := c.conn.WriteMessage(forces.NewHeartbeat(c.id, c.fe, 1, forces.NoACK)); err != nil {
				return "", err
			}
			c.conn.SetReadDeadline(time.Now().Add(MaxCEDeadInterval + 10*time.Second))
			for {
				if _, err := c.conn.ReadMessage(); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						return "", fmt.Errorf("the FE still waits for a silent CE after %s", time.Since(start).Round(time.Second))
					}
					return fmt.Sprintf("the FE gave up on the silent CE after %.1fs", time.Since(start).Seconds()), nil
				}
			}
		})},
		{"attack_fe_config_item_paths", func(ctx context.Context, r *attackRun) (string, error) {
			v := r.victim
			what, err := r.bounded("victim FE", v.pid, func() error {
				c, err := v.associated(ctx)
				if err != nil {
					return err
				}
				defer c.close()
				h := forces.Header{Type: forces.MsgConfig, Src: c.id, Dst: c.fe, Correlator: 44, Flags: forces.Flags{ACK: forces.AlwaysACK}}
				if err := c.conn.WriteMessage(pathBomb(h, forces.OpSet, forces.ClassIPv4UcastLPM)); err != nil {
					return nil
				}
				_, _ = c.reply(44, 5*time.Second)
				return nil
			})
			if err == nil {
				err = v.healthy()
			}
			return what, err
		}},
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// MaxCEDeadInterval is the longest CE dead interval an FE honours.
const MaxCEDeadInterval = 30 * time.Second
