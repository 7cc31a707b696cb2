//go:build eurekapeer

package eurekapeer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// eurekaServer is one of the Eureka servers, with the instances the driver registers in it
// itself (the fillers and the healthy instance of each service) and renews on time, through
// Eureka's REST API as its client does.
type eurekaServer struct {
	base            string // http://host:port/eureka/
	setup           string
	renew, duration int // the lease the instances declare (s)

	mu   sync.Mutex
	regs []instance
}

type instance struct{ app, id, ip string }

var hc = &http.Client{Timeout: 5 * time.Second}

func (e *eurekaServer) add(in instance) {
	e.mu.Lock()
	e.regs = append(e.regs, in)
	e.mu.Unlock()
	if err := e.register(in); err != nil {
		fmt.Println("eurekapeer:", err) // the renew loop registers it again
	}
}

func (e *eurekaServer) register(in instance) error {
	now := time.Now().UnixMilli()
	body := map[string]any{"instance": map[string]any{
		"instanceId": in.id, "hostName": in.ip, "app": strings.ToUpper(in.app), "ipAddr": in.ip,
		"status": "UP", "overriddenStatus": "UNKNOWN",
		"port":           map[string]any{"$": appPort, "@enabled": "true"},
		"securePort":     map[string]any{"$": 443, "@enabled": "false"},
		"countryId":      1,
		"dataCenterInfo": map[string]any{"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
		"leaseInfo":      map[string]any{"renewalIntervalInSecs": e.renew, "durationInSecs": e.duration},
		"metadata":       map[string]any{"@class": "java.util.Collections$EmptyMap"},
		"homePageUrl":    "http://" + addr(in.ip) + "/", "statusPageUrl": "http://" + addr(in.ip) + "/actuator/info",
		"healthCheckUrl": "http://" + addr(in.ip) + "/actuator/health",
		"vipAddress":     in.app, "secureVipAddress": in.app, "isCoordinatingDiscoveryServer": "false",
		"lastUpdatedTimestamp": fmt.Sprint(now), "lastDirtyTimestamp": fmt.Sprint(now),
	}}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, e.base+"apps/"+strings.ToUpper(in.app), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("register %s in %s: %w", in.id, e.setup, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("register %s in %s: %s", in.id, e.setup, resp.Status)
	}
	return nil
}

// renewLoop renews every instance at 0.9 × its renewal interval, all at once (registering
// one again on 404), as many clients' heartbeats would: a loaded machine must not make the
// fillers look late, or self-preservation would hide the evictions being measured.
func (e *eurekaServer) renewLoop(ctx context.Context) {
	tick := time.NewTicker(time.Duration(e.renew) * 900 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		e.mu.Lock()
		regs := append([]instance(nil), e.regs...)
		e.mu.Unlock()
		for _, in := range regs {
			go e.renewOne(in)
		}
	}
}

func (e *eurekaServer) renewOne(in instance) {
	req, err := http.NewRequest(http.MethodPut, e.base+"apps/"+strings.ToUpper(in.app)+"/"+in.id+"?status=UP", nil)
	if err != nil {
		return
	}
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		_ = e.register(in)
	}
}
