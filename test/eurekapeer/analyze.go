// Package eurekapeer is the real-Eureka comparison (make bench-eureka-peer, issue 36 §3): a
// stock Spring Cloud Netflix Eureka server (defaults, and a 5 s / 15 s lease) and registrar's
// Eureka API, read by the same Spring Cloud caller application while instances are shut down,
// killed, hung and lost. The driver (driver_test.go, build tag eurekapeer: it needs Maven's
// applications and takes half an hour) runs everything as processes; this file reads the
// callers' request logs, and its test runs in make test.
package eurekapeer

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// Request is one line of a caller's log: "service sentMillis host:port ok|fail millis" ("-"
// as the address when the load balancer had no instance, "overload" when the caller had too
// many requests in flight to send one more: the machine, not the registry, failed it).
type Request struct {
	Service string
	Sent    int64 // Unix milliseconds
	Addr    string
	OK      bool
}

// ParseLog reads a caller's log; a torn last line (the caller still writing) is left out.
func ParseLog(r io.Reader) ([]Request, error) {
	var out []Request
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			continue
		}
		sent, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, Request{Service: f[0], Sent: sent, Addr: f[2], OK: f[3] == "ok"})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read caller log: %w", err)
	}
	return out, nil
}

// Gap is the pause in a caller's picks of an address that counts as having stopped picking
// it: at 50 req/s over two instances the address is picked every 40 ms.
const Gap = 3 * time.Second

// Analyze is what a caller saw of one fault: the requests of service from the fault to end,
// those that failed, and when it stopped picking victim (the last pick before a pause of at
// least gap that began before faultEnd, the moment the fault was over; nil: never).
func Analyze(reqs []Request, service, victim string, fault, faultEnd, end time.Time, gap time.Duration) benchfmt.EurekaPeerCell {
	c := benchfmt.EurekaPeerCell{GapSeconds: gap.Seconds()}
	from, until, over := fault.UnixMilli(), end.UnixMilli(), faultEnd.UnixMilli()
	last := int64(-1) // the last pick of victim at or after the fault
	stopped := false
	for _, r := range reqs {
		if r.Service != service || r.Sent < from || r.Sent >= until {
			continue
		}
		if r.Addr == "overload" {
			c.Overload++
			continue
		}
		c.Requests++
		if !r.OK {
			c.Failed++
			s := float64(r.Sent-from) / 1000
			c.LastFailSeconds = &s
			if r.Addr == "-" {
				c.NoTarget++
			}
		}
		if r.Addr != victim || stopped {
			continue
		}
		if last >= 0 && r.Sent-last >= gap.Milliseconds() && last < over {
			stopped = true
			continue
		}
		if last < 0 && r.Sent-from >= gap.Milliseconds() && from < over {
			last = from // not picked from the fault until now: stopped at once
			stopped = true
			continue
		}
		last = r.Sent
	}
	if !stopped && last >= 0 && until-last >= gap.Milliseconds() && last < over {
		stopped = true // never picked again until the end
	}
	if !stopped && last < 0 && until-from >= gap.Milliseconds() {
		last, stopped = from, true
	}
	if stopped {
		s := float64(last-from) / 1000
		c.StopSeconds = &s
	}
	return c
}
