package dev.registrar.eurekapeer;

import java.io.BufferedWriter;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import com.netflix.discovery.EurekaClient;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.LoadBalancerClient;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.event.EventListener;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * The application of the real-Eureka comparison (make bench-eureka-peer, test/eurekapeer), in
 * one of two roles (peer.mode):
 *
 * <ul>
 *   <li>instance: serves GET /hello; registers itself with the real Eureka client when
 *       eureka.client.enabled (the Eureka side), or registers nothing (registrar's side: the
 *       driver plays its pod). On SIGTERM it deregisters first (the Eureka client's cancel),
 *       then keeps serving for peer.drain-seconds before the web server stops.
 *   <li>caller: registers nothing, reads the services of peer.services through the real Eureka client
 *       (pointed at a Eureka server or at registrar's Eureka API), picks an instance with
 *       Spring Cloud LoadBalancer peer.rate times a second per service of peer.services and sends
 *       GET /hello to it (2 s timeout). Every request is one line of peer.log:
 *       "service sentMillis host:port ok|fail millis"
 *       ("-" as the address when the load balancer had no instance, "overload" when more than
 *       400 requests were in flight).
 * </ul>
 */
@SpringBootApplication
@RestController
public class EurekaPeerApp implements SmartLifecycle {

    public static void main(String[] args) {
        SpringApplication.run(EurekaPeerApp.class, args);
    }

    private final ObjectProvider<EurekaClient> eureka;
    private final ObjectProvider<LoadBalancerClient> loadBalancer;
    private final String mode;
    private final long drainSeconds;
    private final int rate;
    private final String[] services;
    private final String logPath;
    private volatile boolean running;
    private final AtomicBoolean drained = new AtomicBoolean();
    /** Requests in flight; over MAX_INFLIGHT a send is logged as "overload" instead (the machine starved the caller). */
    private final AtomicInteger inflight = new AtomicInteger();
    private static final int MAX_INFLIGHT = 400;
    private ScheduledExecutorService ticker;
    private BufferedWriter log;

    EurekaPeerApp(ObjectProvider<EurekaClient> eureka, ObjectProvider<LoadBalancerClient> loadBalancer,
            @Value("${peer.mode:instance}") String mode, @Value("${peer.drain-seconds:70}") long drainSeconds,
            @Value("${peer.rate:50}") int rate, @Value("${peer.services:target}") String[] services,
            @Value("${peer.log:}") String logPath) {
        this.eureka = eureka;
        this.loadBalancer = loadBalancer;
        this.mode = mode;
        this.drainSeconds = drainSeconds;
        this.rate = rate;
        this.services = services;
        this.logPath = logPath;
    }

    @GetMapping("/hello")
    public String hello() {
        return "ok";
    }

    @EventListener(ApplicationReadyEvent.class)
    public void ready() throws IOException {
        System.out.println("PEER-READY " + mode);
        if (!"caller".equals(mode)) {
            return;
        }
        log = Files.newBufferedWriter(Path.of(logPath), StandardCharsets.UTF_8);
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2))
                .executor(Executors.newFixedThreadPool(8)).build();
        LoadBalancerClient lb = loadBalancer.getObject();
        ticker = Executors.newScheduledThreadPool(2);
        for (String service : services) {
            ticker.scheduleAtFixedRate(() -> send(http, lb, service), 0, 1_000_000 / rate, TimeUnit.MICROSECONDS);
        }
        ticker.scheduleAtFixedRate(this::flush, 200, 200, TimeUnit.MILLISECONDS);
    }

    private void send(HttpClient http, LoadBalancerClient lb, String service) {
        long sent = System.currentTimeMillis();
        ServiceInstance si;
        try {
            si = lb.choose(service);
        } catch (RuntimeException e) {
            si = null;
        }
        if (si == null) {
            write(service, sent, "-", false);
            return;
        }
        String addr = si.getHost() + ":" + si.getPort();
        if (inflight.get() >= MAX_INFLIGHT) {
            write(service, sent, "overload", false);
            return;
        }
        inflight.incrementAndGet();
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + addr + "/hello"))
                .timeout(Duration.ofSeconds(2)).GET().build();
        http.sendAsync(req, HttpResponse.BodyHandlers.discarding()).whenComplete(
                (resp, err) -> {
                    inflight.decrementAndGet();
                    write(service, sent, addr, err == null && resp.statusCode() == 200);
                });
    }

    private synchronized void write(String service, long sent, String addr, boolean ok) {
        try {
            log.write(service + " " + sent + " " + addr + " " + (ok ? "ok" : "fail") + " " + (System.currentTimeMillis() - sent) + "\n");
        } catch (IOException e) {
            System.err.println("peer.log: " + e);
        }
    }

    private synchronized void flush() {
        try {
            log.flush();
        } catch (IOException e) {
            System.err.println("peer.log: " + e);
        }
    }

    @Override
    public void start() {
        running = true;
    }

    /**
     * Stops first of all lifecycles (highest phase), before the web server's graceful shutdown:
     * an instance cancels its Eureka lease, then keeps serving for the drain time.
     */
    @Override
    public void stop() {
        running = false;
        if (!"instance".equals(mode) || !drained.compareAndSet(false, true)) {
            return;
        }
        EurekaClient client = eureka.getIfAvailable();
        if (client != null) {
            client.shutdown();
            System.out.println("PEER-DEREGISTERED");
        }
        try {
            Thread.sleep(drainSeconds * 1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        System.out.println("PEER-DRAINED");
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public int getPhase() {
        return Integer.MAX_VALUE;
    }
}
