package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc/status"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/host"
)

// feAttacks are played by the fake FE against the lab's CE.
func feAttacks() []attack {
	return []attack{
		{"attack_fe_no_tls", func(ctx context.Context, r *attackRun) (string, error) {
			// An FE without TLS, as FE 1, on the CE's own address.
			nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, nil, 0)
			if err != nil {
				return "connection refused: " + err.Error(), nil
			}
			what, err := refused(newFakeFE(nc, 1))
			return "setup in plaintext: " + what, err
		}},
		{"attack_fe_untrusted_cert", func(ctx context.Context, r *attackRun) (string, error) {
			// A certificate named like the lab's FE, from a CA of its own.
			dir, err := os.MkdirTemp("", "spatk-pki")
			if err != nil {
				return "", err
			}
			defer os.RemoveAll(dir)
			pki, err := forces.WritePKI(dir, time.Hour, certName(1))
			if err != nil {
				return "", err
			}
			cert := pki[certName(1)]
			nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, &cert, 0)
			if err != nil {
				return "TLS refused: " + err.Error(), nil
			}
			what, err := refused(newFakeFE(nc, 1))
			return "certificate of a foreign CA: " + what, err
		}},
		{"attack_fe_id_not_its_certificate", func(ctx context.Context, r *attackRun) (string, error) {
			// The spare FE's certificate, claiming FE 1's ID.
			return refusedAs(ctx, r, false, certName(SpareFE), 1, "the spare FE's certificate as FE 1")
		}},
		{"attack_fe_id_zero", func(ctx context.Context, r *attackRun) (string, error) {
			return refusedAs(ctx, r, false, certName(SpareFE), 0, "FE ID 0")
		}},
		{"attack_fe_id_not_allowed", func(ctx context.Context, r *attackRun) (string, error) {
			return refusedAs(ctx, r, false, certName(NotAllowedFE), NotAllowedFE, "a certificate of the lab's CA for an FE ID not on the CE's list")
		}},
		{"attack_fe_low_channel_hijack", func(ctx context.Context, r *attackRun) (string, error) {
			// FE 1 is associated; another identity opens its low-priority
			// channel to inject port events.
			return refusedAs(ctx, r, true, certName(SpareFE), 1, "the spare FE's certificate on FE 1's low-priority channel")
		}},
		{"attack_fe_duplicate_id", func(ctx context.Context, r *attackRun) (string, error) {
			// FE 1's own certificate (a stolen one), while FE 1 is
			// associated: the CE must keep the FE it has.
			return refusedAs(ctx, r, false, certName(1), 1, "FE 1's certificate while FE 1 is associated")
		}},
		{"attack_fe_port_address_poison", func(ctx context.Context, r *attackRun) (string, error) {
			// An admitted FE reports the BGP peer's address (and the
			// router's own on the peer's link) as its own: the routes
			// through the peer must stay.
			f, err := associate(ctx, r, SpareFE, []forces.PortInfo{{
				ID: 1, Name: "evil0", MAC: [6]byte{2, 0, 0, 0, 0, 9}, Up: true,
				Addrs: []netip.Prefix{netip.MustParsePrefix("10.10.3.2/24"), netip.MustParsePrefix("10.10.3.1/24")},
			}})
			if err != nil {
				return "", err
			}
			defer f.close()
			time.Sleep(2 * time.Second) // time for a poisoned RIB to withdraw
			return fmt.Sprintf("an admitted FE reported the BGP peer's address as its port's: FE 1 kept its %d routes", r.routes), r.routesIntact()
		}},
		{"attack_fe_discovery_item_paths", func(ctx context.Context, r *attackRun) (string, error) {
			// The discovery answer: 256 KiB whose leaves each have a 30 KiB
			// path, 300+ MiB if every leaf copies its parent's path.
			return r.bounded("ce", r.cePid, func() error {
				nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, labCert(&r.o, certName(SpareFE)), 0)
				if err != nil {
					return err
				}
				f := newFakeFE(nc, SpareFE)
				defer nc.Close()
				if err := f.setup(); err != nil {
					return err
				}
				for {
					f.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					m, err := f.conn.ReadMessage()
					if err != nil {
						return nil // the CE ended it
					}
					if m.Header.Type == forces.MsgQuery {
						h := forces.Header{Type: forces.MsgQueryResponse, Src: f.id, Dst: m.Header.Src, Correlator: m.Header.Correlator}
						if err := f.conn.WriteMessage(pathBomb(h, forces.OpGetResponse, forces.ClassFEObject)); err != nil {
							return nil
						}
						time.Sleep(time.Second)
						return nil
					}
				}
			})
		}},
		{"attack_fe_event_item_paths", func(ctx context.Context, r *attackRun) (string, error) {
			// The same on the low-priority channel, as an Event Notification.
			return r.bounded("ce", r.cePid, func() error {
				f, err := associate(ctx, r, SpareFE, nil)
				if err != nil {
					return err
				}
				defer f.close()
				nc, err := dialCE(ctx, &r.o, true, netip.Addr{}, labCert(&r.o, certName(SpareFE)), 0)
				if err != nil {
					return err
				}
				defer nc.Close()
				low := newFakeFE(nc, SpareFE)
				if err := low.setup(); err != nil {
					return fmt.Errorf("low-priority channel: %w", err)
				}
				h := forces.Header{Type: forces.MsgEventNotification, Src: low.id, Dst: low.ce, Correlator: 5}
				if err := low.conn.WriteMessage(pathBomb(h, forces.OpReport, forces.PortTableClass)); err != nil {
					return nil
				}
				time.Sleep(time.Second)
				return nil
			})
		}},
		{"attack_fe_stray_commit_response", func(ctx context.Context, r *attackRun) (string, error) {
			// An admitted FE sends a COMMIT-RESPONSE nobody asked for
			// (SUCCESS), then refuses the next transaction's COMMIT: the
			// transaction must fail, and change nothing anywhere.
			f, err := associate(ctx, r, SpareFE, nil)
			if err != nil {
				return "", err
			}
			defer f.close()
			stray, err := forces.NewCommitResponse(forces.NewCommit(f.ce, f.id, 999999), forces.ResultSuccess)
			if err != nil {
				return "", err
			}
			stray.Header.Src, stray.Header.Dst = f.id, f.ce
			f.mu.Lock()
			f.veto = true
			f.mu.Unlock()
			if err := f.conn.WriteMessage(stray); err != nil {
				return "", err
			}
			time.Sleep(200 * time.Millisecond)
			cc, err := r.apiClient(true)
			if err != nil {
				return "", err
			}
			defer cc.Close()
			rc := splitplanev1.NewRoutesClient(cc)
			route := &splitplanev1.Route{Prefix: "192.0.2.0/24", NextHops: []string{"10.10.1.2"}}
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err = rc.Transaction(tctx, &splitplanev1.TransactionRequest{Ops: []*splitplanev1.RouteOp{{Kind: splitplanev1.RouteOp_KIND_REPLACE, Route: route}}})
			if err == nil {
				_, _ = rc.Delete(ctx, &splitplanev1.DeleteRouteRequest{Prefix: route.Prefix})
				return "", errors.New("the transaction the FE refused was reported committed")
			}
			return "a stray COMMIT-RESPONSE, then a refused COMMIT: the transaction failed (" + status.Code(err).String() + ")", nil
		}},
		{"attack_fe_wrong_ids", func(ctx context.Context, r *attackRun) (string, error) {
			// 100,000 heartbeats to a CE ID that is not this CE's.
			f, err := associate(ctx, r, SpareFE, nil)
			if err != nil {
				return "", err
			}
			defer f.close()
			lines := r.logLines("ce")
			hb := forces.NewHeartbeat(f.id, forces.CEID(77), 0, forces.NoACK)
			b, err := hb.MarshalBinary()
			if err != nil {
				return "", err
			}
			for i := 0; i < 100000; i++ {
				if err := f.conn.WriteEncoded(b); err != nil {
					break // torn down: fine
				}
			}
			time.Sleep(time.Second)
			n := r.logLines("ce") - lines
			what := fmt.Sprintf("100,000 messages to a wrong CE ID: %d new lines in the CE's log", n)
			if n > 100 {
				return what, errors.New("the log grows with the messages")
			}
			return what, nil
		}},
		{"attack_fe_stalled_reader", func(ctx context.Context, r *attackRun) (string, error) {
			// An FE that associates and then stops reading (a receive
			// buffer of 1 KiB that it never drains) while the CE sends it
			// the full sync: the CE must tear it down within its dead
			// interval and free its ID, without the FE's help.
			nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, labCert(&r.o, certName(SpareFE)), 1024)
			if err != nil {
				return "", err
			}
			defer nc.Close()
			f := newFakeFE(nc, SpareFE)
			if err := f.setup(); err != nil {
				return "", err
			}
			// Answer discovery (so the CE starts the sync), then stop.
			f.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				m, err := f.conn.ReadMessage()
				if err != nil {
					return "", fmt.Errorf("before the sync: %w", err)
				}
				if m.Header.Type == forces.MsgQuery {
					if err := f.answer(m); err != nil {
						return "", err
					}
					break
				}
			}
			start := time.Now()
			for time.Since(start) < 20*time.Second {
				g, err := associate(ctx, r, SpareFE, nil)
				if err == nil {
					g.close()
					return fmt.Sprintf("the CE freed the stalled FE's ID after %.1fs", time.Since(start).Seconds()), nil
				}
				time.Sleep(500 * time.Millisecond)
			}
			return "", errors.New("the stalled FE's ID was still taken after 20s")
		}},
		{"attack_fe_no_setup", func(ctx context.Context, r *attackRun) (string, error) {
			// TLS done, then silence: the CE must close it in its setup
			// timeout.
			nc, err := dialCE(ctx, &r.o, false, netip.Addr{}, labCert(&r.o, certName(SpareFE)), 0)
			if err != nil {
				return "", err
			}
			defer nc.Close()
			start := time.Now()
			nc.SetReadDeadline(time.Now().Add(forces.DefaultSetupTimeout + 5*time.Second))
			var b [1]byte
			_, err = nc.Read(b[:])
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return "", errors.New("still open after the setup timeout")
			}
			return fmt.Sprintf("closed by the CE after %.1fs of silence", time.Since(start).Seconds()), nil
		}},
		{"attack_fe_connection_flood", func(ctx context.Context, r *attackRun) (string, error) {
			// 1,000 connections that never set up, from one source
			// (10.10.1.1, the router's own address on host A's link): the
			// spare FE, from another (the loopback), must still associate,
			// and the CE must not keep a thousand sockets.
			flood, err := openFlood(ctx, r, netip.MustParseAddr("10.10.1.1"), 1000)
			defer closeAll(flood)
			if err != nil {
				return "", err
			}
			time.Sleep(500 * time.Millisecond)
			fds := fdCount(r.cePid)
			f, err := associate(ctx, r, SpareFE, nil)
			if err != nil {
				return "", fmt.Errorf("with %d flood connections open: %w", len(flood), err)
			}
			f.close()
			what := fmt.Sprintf("%d idle connections from one source: the CE held %d file descriptors and admitted an FE from another", len(flood), fds)
			if fds > 500 {
				return what, errors.New("the CE keeps every idle connection")
			}
			return what, nil
		}},
		{"attack_fe_accept_emfile", func(ctx context.Context, r *attackRun) (string, error) {
			// The CE out of file descriptors (its limit lowered to what
			// it has open plus 16, then a flood): once the flood is gone,
			// an FE must be able to associate again.
			pid := strconv.Itoa(r.cePid)
			old, err := harness.Output(ctx, "prlimit", "--pid", pid, "--nofile", "--raw", "--noheadings", "--output=SOFT,HARD")
			if err != nil {
				return "", err
			}
			var soft, hard int
			if _, err := fmt.Sscan(old, &soft, &hard); err != nil {
				return "", fmt.Errorf("prlimit: %q: %w", old, err)
			}
			low := fdCount(r.cePid) + 16
			if err := run("prlimit", "--pid", pid, fmt.Sprintf("--nofile=%d:%d", low, hard)); err != nil {
				return "", err
			}
			flood, ferr := openFlood(ctx, r, netip.MustParseAddr("10.10.1.1"), 200)
			time.Sleep(time.Second)
			closeAll(flood)
			if err := run("prlimit", "--pid", pid, fmt.Sprintf("--nofile=%d:%d", soft, hard)); err != nil {
				return "", err
			}
			if ferr != nil {
				return "", ferr
			}
			time.Sleep(time.Second)
			f, err := associate(ctx, r, SpareFE, nil)
			if err != nil {
				return "", fmt.Errorf("after running out of file descriptors: %w; CE log: %s", err, harness.Tail(filepath.Join(r.o.Dir, "ce.log"), 5))
			}
			f.close()
			return fmt.Sprintf("the CE ran out of file descriptors (limit %d) under %d connections and admitted an FE after", low, len(flood)), nil
		}},
	}
}

// refusedAs dials the CE (low: its low-priority channel) with the lab's
// certificate cert and asks to associate as FE id: it must be refused.
func refusedAs(ctx context.Context, r *attackRun, low bool, cert string, id uint32, what string) (string, error) {
	nc, err := dialCE(ctx, &r.o, low, netip.Addr{}, labCert(&r.o, cert), 0)
	if err != nil {
		return what + ": TLS refused: " + err.Error(), nil
	}
	res, err := refused(newFakeFE(nc, id))
	return what + ": " + res, err
}

// bounded runs play and checks that the daemon's peak memory grew by less
// than 64 MiB meanwhile.
func (r *attackRun) bounded(daemon string, pid int, play func() error) (string, error) {
	_, before, err := host.ProcessMemory(pid)
	if err != nil {
		return "", err
	}
	if err := play(); err != nil {
		return "", err
	}
	_, after, err := host.ProcessMemory(pid)
	if err != nil {
		return "", fmt.Errorf("the %s is gone: %w", daemon, err)
	}
	what := fmt.Sprintf("the %s's peak memory grew by %.1f MB", daemon, after-before)
	if after-before > 64<<20/1e6 {
		return what, errors.New("more than 64 MiB for one message")
	}
	return what, nil
}

// routesIntact checks that FE 1 still has every route.
func (r *attackRun) routesIntact() error {
	st, err := GetStatus(r.o)
	if err != nil {
		return err
	}
	if st.FERoutes != r.routes {
		return fmt.Errorf("FE 1 has %d routes, had %d", st.FERoutes, r.routes)
	}
	return nil
}

// openFlood opens n TCP connections to the CE's ForCES port from src.
func openFlood(ctx context.Context, r *attackRun, src netip.Addr, n int) ([]net.Conn, error) {
	var cs []net.Conn
	for range n {
		c, err := dialCE(ctx, &r.o, false, src, nil, 0)
		if err != nil {
			if len(cs) > 0 {
				return cs, nil // the CE stopped taking them: that is its right
			}
			return cs, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}
