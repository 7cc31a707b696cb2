package dev.registrar.interop;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import com.netflix.spectator.api.DefaultRegistry;
import com.netflix.spectator.api.Measurement;
import com.netflix.spectator.api.Meter;
import com.netflix.spectator.api.Spectator;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.cloud.client.discovery.event.HeartbeatEvent;
import org.springframework.cloud.client.loadbalancer.LoadBalancerClient;
import org.springframework.context.event.EventListener;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * The caller of make test-interop: an ordinary Spring Cloud application that registers nothing
 * and reads its services through whichever discovery client is enabled (the Eureka client
 * pointed at registrar's Eureka API, or Spring Cloud Zookeeper over registrar's ZooKeeper
 * store). The Go test (test/interop) reads over HTTP what the application's own beans return:
 *
 * <ul>
 *   <li>GET /instances/{service}: DiscoveryClient.getInstances(service)
 *   <li>GET /picks/{service}?n=N: N calls of LoadBalancerClient.choose(service), "host:port" each
 *       ("" when the load balancer had no instance)
 *   <li>GET /stats: discovery client description, HeartbeatEvents seen (one per Eureka cache
 *       refresh), and the Eureka client's own Spectator meters (DiscoveryClient_*)
 * </ul>
 */
@SpringBootApplication
@RestController
public class InteropApp {

    /** Where the Eureka client's Spectator counters land (its default global registry keeps nothing). */
    static final DefaultRegistry METERS = new DefaultRegistry();

    public static void main(String[] args) {
        Spectator.globalRegistry().add(METERS);
        SpringApplication.run(InteropApp.class, args);
    }

    private final DiscoveryClient discovery;
    private final LoadBalancerClient loadBalancer;
    private final AtomicLong heartbeats = new AtomicLong();

    InteropApp(DiscoveryClient discovery, LoadBalancerClient loadBalancer) {
        this.discovery = discovery;
        this.loadBalancer = loadBalancer;
    }

    @GetMapping("/instances/{service}")
    public List<Map<String, Object>> instances(@PathVariable String service) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (ServiceInstance si : discovery.getInstances(service)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("instanceId", si.getInstanceId());
            m.put("serviceId", si.getServiceId());
            m.put("host", si.getHost());
            m.put("port", si.getPort());
            m.put("secure", si.isSecure());
            m.put("uri", String.valueOf(si.getUri()));
            m.put("metadata", new TreeMap<>(si.getMetadata()));
            out.add(m);
        }
        return out;
    }

    @GetMapping("/picks/{service}")
    public List<String> picks(@PathVariable String service, @RequestParam(defaultValue = "16") int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < Math.min(n, 1000); i++) {
            ServiceInstance si = loadBalancer.choose(service);
            out.add(si == null ? "" : si.getHost() + ":" + si.getPort());
        }
        return out;
    }

    @EventListener
    public void onHeartbeat(HeartbeatEvent event) {
        heartbeats.incrementAndGet();
    }

    @GetMapping("/stats")
    public Map<String, Object> stats() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("discovery", discovery.description());
        out.put("heartbeats", heartbeats.get());
        Map<String, Double> meters = new TreeMap<>();
        for (Meter meter : METERS) {
            if (!meter.id().name().startsWith("DiscoveryClient_")) {
                continue;
            }
            for (Measurement ms : meter.measure()) {
                meters.merge(ms.id().toString(), ms.value(), Double::sum);
            }
        }
        out.put("meters", meters);
        return out;
    }
}
