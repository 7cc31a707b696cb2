// CuratorRead lists the instances of one service with Apache Curator's ServiceDiscovery, the
// way a JVM caller does, and prints one line per instance. The Go tests of
// internal/store/zookeeper compile and run it against what registrar wrote.
//
// Usage: CuratorRead <connect string> <basePath> <service> map|spring
//   map:    payload class java.util.Map (registrar's --zookeeper-payload-class=java.util.LinkedHashMap)
//   spring: payload class ZookeeperInstance (registrar's default @class; a stand-in class of the
//           same name and fields as Spring Cloud Zookeeper's)
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.springframework.cloud.zookeeper.discovery.ZookeeperInstance;

public class CuratorRead {
    public static void main(String[] args) throws Exception {
        try (CuratorFramework zk = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100))) {
            zk.start();
            if (!zk.blockUntilConnected(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no ZooKeeper connection to " + args[0]);
            }
            List<String> lines = args[3].equals("spring") ? spring(zk, args[1], args[2]) : map(zk, args[1], args[2]);
            Collections.sort(lines);
            lines.forEach(System.out::println);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static List<String> map(CuratorFramework zk, String base, String service) throws Exception {
        List<String> out = new ArrayList<>();
        try (ServiceDiscovery<Map> d = ServiceDiscoveryBuilder.builder(Map.class).client(zk).basePath(base)
                .serializer(new JsonInstanceSerializer<>(Map.class)).build()) {
            d.start();
            for (ServiceInstance<Map> i : d.queryForInstances(service)) {
                Map<String, String> meta = (Map<String, String>) i.getPayload().get("metadata");
                out.add(line(i, meta.get("registrar.dev/owner")));
            }
        }
        return out;
    }

    static List<String> spring(CuratorFramework zk, String base, String service) throws Exception {
        List<String> out = new ArrayList<>();
        try (ServiceDiscovery<ZookeeperInstance> d = ServiceDiscoveryBuilder.builder(ZookeeperInstance.class).client(zk)
                .basePath(base).serializer(new JsonInstanceSerializer<>(ZookeeperInstance.class)).build()) {
            d.start();
            for (ServiceInstance<ZookeeperInstance> i : d.queryForInstances(service)) {
                out.add(line(i, i.getPayload().getMetadata().get("registrar.dev/owner")));
            }
        }
        return out;
    }

    static String line(ServiceInstance<?> i, String owner) {
        return i.getName() + " " + i.getId() + " " + i.getAddress() + " " + i.getPort() + " " + i.getSslPort() + " "
                + i.getServiceType() + " " + i.isEnabled() + " " + i.buildUriSpec() + " owner=" + owner;
    }
}
