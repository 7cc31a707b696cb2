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

// renewLoop renews every instance each renewal interval (registering it again on 404), as
// the Eureka client's heartbeat does.
func (e *eurekaServer) renewLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(e.renew) * time.Second):
		}
		e.mu.Lock()
		regs := append([]instance(nil), e.regs...)
		e.mu.Unlock()
		for _, in := range regs {
			req, err := http.NewRequest(http.MethodPut, e.base+"apps/"+strings.ToUpper(in.app)+"/"+in.id+"?status=UP", nil)
			if err != nil {
				continue
			}
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				_ = e.register(in)
			}
		}
	}
}

// cancel removes an instance as the client's shutdown does.
func (e *eurekaServer) cancel(app, id string) {
	req, err := http.NewRequest(http.MethodDelete, e.base+"apps/"+strings.ToUpper(app)+"/"+id, nil)
	if err != nil {
		return
	}
	if resp, err := hc.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
