package dev.registrar.eurekapeer;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.netflix.eureka.server.EnableEurekaServer;

/**
 * A stock Spring Cloud Netflix Eureka server: nothing of its own, its defaults unless the
 * driver (test/eurekapeer) passes a property on the command line.
 */
@SpringBootApplication
@EnableEurekaServer
public class EurekaPeerServer {
    public static void main(String[] args) {
        SpringApplication.run(EurekaPeerServer.class, args);
    }
}
