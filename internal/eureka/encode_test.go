package eureka

import (
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
)

func sampleApps() []*Application {
	in := rec("orders", "shop", "o-1", "10.0.0.1", map[string]int32{"http": 8080})
	in.Zone = "z<1>"
	inst := FromInstance(&in, 1700000000000)
	inst.Action = Added
	return []*Application{{Name: "ORDERS", Instances: []*Instance{inst}}}
}

func TestEncodeApplicationsJSON(t *testing.T) {
	body := EncodeApplications(JSON, 7, "UP_1_", sampleApps())
	var doc struct {
		Applications struct {
			Version     string `json:"versions__delta"`
			Hash        string `json:"apps__hashcode"`
			Application []struct {
				Name     string
				Instance []map[string]any
			}
		}
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	a := doc.Applications
	if a.Version != "7" || a.Hash != "UP_1_" || len(a.Application) != 1 || a.Application[0].Name != "ORDERS" {
		t.Fatalf("wrapper: %+v", a)
	}
	inst := a.Application[0].Instance[0]
	for k, want := range map[string]any{
		"instanceId": "o-1.shop", "app": "ORDERS", "hostName": "10.0.0.1", "ipAddr": "10.0.0.1", "status": "UP",
		"overriddenStatus": "UNKNOWN", "vipAddress": "orders", "secureVipAddress": "orders", "actionType": "ADDED",
		"isCoordinatingDiscoveryServer": "false", "lastUpdatedTimestamp": "1700000000000", "countryId": float64(1),
		"homePageUrl": "http://10.0.0.1:8080/",
	} {
		if inst[k] != want {
			t.Errorf("%s = %v, want %v", k, inst[k], want)
		}
	}
	port := inst["port"].(map[string]any)
	if port["$"] != float64(8080) || port["@enabled"] != "true" {
		t.Errorf("port %v", port)
	}
	dc := inst["dataCenterInfo"].(map[string]any)
	if dc["@class"] != dataCenterClass || dc["name"] != "MyOwn" {
		t.Errorf("dataCenterInfo %v", dc)
	}
	if md := inst["metadata"].(map[string]any); md["zone"] != "z<1>" || md["port.http"] != "8080" {
		t.Errorf("metadata %v", md)
	}
	if lease := inst["leaseInfo"].(map[string]any); lease["durationInSecs"] != float64(90) {
		t.Errorf("leaseInfo %v", lease)
	}
}

func TestEncodeApplicationsXML(t *testing.T) {
	body := EncodeApplications(XML, 7, "UP_1_", sampleApps())
	var doc struct {
		XMLName     xml.Name `xml:"applications"`
		Version     int      `xml:"versions__delta"`
		Hash        string   `xml:"apps__hashcode"`
		Application []struct {
			Name     string `xml:"name"`
			Instance []struct {
				ID       string `xml:"instanceId"`
				Status   string `xml:"status"`
				Override string `xml:"overriddenstatus"`
				Port     struct {
					Enabled string `xml:"enabled,attr"`
					Number  int    `xml:",chardata"`
				} `xml:"port"`
				DC struct {
					Class string `xml:"class,attr"`
					Name  string `xml:"name"`
				} `xml:"dataCenterInfo"`
				Zone   string `xml:"metadata>zone"`
				Action string `xml:"actionType"`
			} `xml:"instance"`
		} `xml:"application"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, body)
	}
	if doc.Version != 7 || doc.Hash != "UP_1_" || len(doc.Application) != 1 {
		t.Fatalf("wrapper: %+v", doc)
	}
	inst := doc.Application[0].Instance[0]
	if inst.ID != "o-1.shop" || inst.Status != "UP" || inst.Override != "UNKNOWN" || inst.Port.Number != 8080 ||
		inst.Port.Enabled != "true" || inst.DC.Class != dataCenterClass || inst.DC.Name != "MyOwn" || inst.Zone != "z<1>" || inst.Action != "ADDED" {
		t.Errorf("instance %+v", inst)
	}
}

func TestEncodeEmptyAndSingle(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"empty json", EncodeApplications(JSON, 0, "", nil), `{"applications":{"versions__delta":"0","apps__hashcode":"","application":[]}}`},
		{"empty xml", EncodeApplications(XML, 0, "", nil), `<applications><versions__delta>0</versions__delta><apps__hashcode></apps__hashcode></applications>`},
		{"application json", EncodeApplication(JSON, &Application{Name: "X"}), `{"application":{"name":"X","instance":[]}}`},
		{"application xml", EncodeApplication(XML, &Application{Name: "X"}), `<application><name>X</name></application>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.got) != tc.want {
				t.Errorf("got %s\nwant %s", tc.got, tc.want)
			}
		})
	}
	inst := sampleApps()[0].Instances[0]
	if s := string(EncodeInstance(JSON, inst)); !strings.HasPrefix(s, `{"instance":{"instanceId":"o-1.shop"`) {
		t.Errorf("instance json %s", s)
	}
	if s := string(EncodeInstance(XML, inst)); !strings.HasPrefix(s, `<instance><instanceId>o-1.shop</instanceId>`) {
		t.Errorf("instance xml %s", s)
	}
}
