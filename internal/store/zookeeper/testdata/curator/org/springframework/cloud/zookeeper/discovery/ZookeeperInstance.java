// A stand-in for Spring Cloud Zookeeper's payload class of the same name and fields (id, name,
// metadata), so that the test reads registrar's default payload as Spring Cloud Zookeeper does.
package org.springframework.cloud.zookeeper.discovery;

import java.util.HashMap;
import java.util.Map;

public class ZookeeperInstance {
    private String id;
    private String name;
    private Map<String, String> metadata = new HashMap<>();

    public ZookeeperInstance() {
    }

    public String getId() { return id; }
    public void setId(String id) { this.id = id; }
    public String getName() { return name; }
    public void setName(String name) { this.name = name; }
    public Map<String, String> getMetadata() { return metadata; }
    public void setMetadata(Map<String, String> metadata) { this.metadata = metadata; }
}
