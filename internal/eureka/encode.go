package eureka

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strconv"
)

// Format is a response's media type.
type Format int

// The formats Eureka's server answers in.
const (
	XML Format = iota // Eureka's default when the Accept header does not ask for JSON
	JSON
)

// ContentType is the Content-Type of a format.
func (f Format) ContentType() string {
	if f == JSON {
		return "application/json"
	}
	return "application/xml"
}

func (f Format) String() string {
	if f == JSON {
		return "json"
	}
	return "xml"
}

// Eureka's constant fields.
const (
	dataCenterClass = "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"
	dataCenterName  = "MyOwn"
	emptyMapClass   = "java.util.Collections$EmptyMap"
)

// EncodeApplications is the body of /apps, /apps/delta, /vips/{VIP} and /svips/{SVIP}:
// Eureka's Applications wrapper.
func EncodeApplications(f Format, version int64, hashCode string, apps []*Application) []byte {
	var b bytes.Buffer
	if f == JSON {
		b.WriteString(`{"applications":{"versions__delta":`)
		jsonString(&b, strconv.FormatInt(version, 10))
		b.WriteString(`,"apps__hashcode":`)
		jsonString(&b, hashCode)
		b.WriteString(`,"application":[`)
		for i, app := range apps {
			if i > 0 {
				b.WriteByte(',')
			}
			appJSON(&b, app)
		}
		b.WriteString("]}}")
		return b.Bytes()
	}
	b.WriteString("<applications><versions__delta>")
	b.WriteString(strconv.FormatInt(version, 10))
	b.WriteString("</versions__delta><apps__hashcode>")
	xmlText(&b, hashCode)
	b.WriteString("</apps__hashcode>")
	for _, app := range apps {
		appXML(&b, app)
	}
	b.WriteString("</applications>")
	return b.Bytes()
}

// EncodeApplication is the body of /apps/{APP}.
func EncodeApplication(f Format, app *Application) []byte {
	var b bytes.Buffer
	if f == JSON {
		b.WriteString(`{"application":`)
		appJSON(&b, app)
		b.WriteByte('}')
		return b.Bytes()
	}
	appXML(&b, app)
	return b.Bytes()
}

// EncodeInstance is the body of /apps/{APP}/{ID} and /instances/{ID}.
func EncodeInstance(f Format, inst *Instance) []byte {
	var b bytes.Buffer
	if f == JSON {
		b.WriteString(`{"instance":`)
		instanceJSON(&b, inst)
		b.WriteByte('}')
		return b.Bytes()
	}
	instanceXML(&b, inst)
	return b.Bytes()
}

func appJSON(b *bytes.Buffer, app *Application) {
	b.WriteString(`{"name":`)
	jsonString(b, app.Name)
	b.WriteString(`,"instance":[`)
	for i, inst := range app.Instances {
		if i > 0 {
			b.WriteByte(',')
		}
		instanceJSON(b, inst)
	}
	b.WriteString("]}")
}

// instanceJSON writes an instance as Eureka's Jackson codec does (EurekaJacksonCodec):
// numbers as numbers except the timestamps and flags it writes as strings.
func instanceJSON(b *bytes.Buffer, inst *Instance) {
	field := func(name, value string) {
		b.WriteString(`"` + name + `":`)
		jsonString(b, value)
		b.WriteByte(',')
	}
	b.WriteByte('{')
	field("instanceId", inst.ID)
	field("hostName", inst.HostName)
	field("app", inst.App)
	field("ipAddr", inst.IPAddr)
	field("status", inst.Status)
	field("overriddenStatus", StatusUnknown)
	b.WriteString(`"port":{"$":` + strconv.Itoa(int(inst.Port)) + `,"@enabled":"` + strconv.FormatBool(inst.PortEnabled) + `"},`)
	b.WriteString(`"securePort":{"$":` + strconv.Itoa(int(inst.SecurePort)) + `,"@enabled":"` + strconv.FormatBool(inst.SecurePortEnabled) + `"},`)
	b.WriteString(`"countryId":1,"dataCenterInfo":{"@class":`)
	jsonString(b, dataCenterClass)
	b.WriteString(`,"name":"` + dataCenterName + `"},`)
	b.WriteString(`"leaseInfo":{"renewalIntervalInSecs":` + strconv.Itoa(RenewalIntervalSecs) +
		`,"durationInSecs":` + strconv.Itoa(LeaseDurationSecs) +
		`,"registrationTimestamp":` + strconv.FormatInt(inst.RegisteredMillis, 10) +
		`,"lastRenewalTimestamp":` + strconv.FormatInt(inst.UpdatedMillis, 10) +
		`,"evictionTimestamp":0,"serviceUpTimestamp":` + strconv.FormatInt(inst.RegisteredMillis, 10) + `},`)
	b.WriteString(`"metadata":{`)
	if len(inst.Metadata) == 0 {
		b.WriteString(`"@class":`)
		jsonString(b, emptyMapClass)
	}
	for i, kv := range inst.Metadata {
		if i > 0 {
			b.WriteByte(',')
		}
		jsonString(b, kv[0])
		b.WriteByte(':')
		jsonString(b, kv[1])
	}
	b.WriteString("},")
	field("homePageUrl", inst.HomePageURL)
	field("statusPageUrl", inst.StatusPageURL)
	field("healthCheckUrl", inst.HealthCheckURL)
	field("vipAddress", inst.VIPAddress)
	field("secureVipAddress", inst.SecureVIPAddress)
	field("isCoordinatingDiscoveryServer", "false")
	field("lastUpdatedTimestamp", strconv.FormatInt(inst.UpdatedMillis, 10))
	b.WriteString(`"lastDirtyTimestamp":`)
	jsonString(b, strconv.FormatInt(inst.UpdatedMillis, 10))
	if inst.Action != "" {
		b.WriteString(`,"actionType":`)
		jsonString(b, string(inst.Action))
	}
	b.WriteByte('}')
}

func appXML(b *bytes.Buffer, app *Application) {
	b.WriteString("<application><name>")
	xmlText(b, app.Name)
	b.WriteString("</name>")
	for _, inst := range app.Instances {
		instanceXML(b, inst)
	}
	b.WriteString("</application>")
}

// instanceXML writes an instance as Eureka's XStream converter does (Converters.InstanceInfoConverter).
func instanceXML(b *bytes.Buffer, inst *Instance) {
	elem := func(name, value string) {
		b.WriteString("<" + name + ">")
		xmlText(b, value)
		b.WriteString("</" + name + ">")
	}
	b.WriteString("<instance>")
	elem("instanceId", inst.ID)
	elem("hostName", inst.HostName)
	elem("app", inst.App)
	elem("ipAddr", inst.IPAddr)
	elem("status", inst.Status)
	elem("overriddenstatus", StatusUnknown)
	b.WriteString(`<port enabled="` + strconv.FormatBool(inst.PortEnabled) + `">` + strconv.Itoa(int(inst.Port)) + "</port>")
	b.WriteString(`<securePort enabled="` + strconv.FormatBool(inst.SecurePortEnabled) + `">` + strconv.Itoa(int(inst.SecurePort)) + "</securePort>")
	elem("countryId", "1")
	b.WriteString(`<dataCenterInfo class="` + dataCenterClass + `"><name>` + dataCenterName + "</name></dataCenterInfo>")
	b.WriteString("<leaseInfo>")
	elem("renewalIntervalInSecs", strconv.Itoa(RenewalIntervalSecs))
	elem("durationInSecs", strconv.Itoa(LeaseDurationSecs))
	elem("registrationTimestamp", strconv.FormatInt(inst.RegisteredMillis, 10))
	elem("lastRenewalTimestamp", strconv.FormatInt(inst.UpdatedMillis, 10))
	elem("evictionTimestamp", "0")
	elem("serviceUpTimestamp", strconv.FormatInt(inst.RegisteredMillis, 10))
	b.WriteString("</leaseInfo>")
	if len(inst.Metadata) == 0 {
		b.WriteString(`<metadata class="` + emptyMapClass + `"/>`)
	} else {
		b.WriteString("<metadata>")
		for _, kv := range inst.Metadata {
			elem(kv[0], kv[1]) // keys are registrar's own: valid XML names (metadataKey)
		}
		b.WriteString("</metadata>")
	}
	elem("homePageUrl", inst.HomePageURL)
	elem("statusPageUrl", inst.StatusPageURL)
	elem("healthCheckUrl", inst.HealthCheckURL)
	elem("vipAddress", inst.VIPAddress)
	elem("secureVipAddress", inst.SecureVIPAddress)
	elem("isCoordinatingDiscoveryServer", "false")
	elem("lastUpdatedTimestamp", strconv.FormatInt(inst.UpdatedMillis, 10))
	elem("lastDirtyTimestamp", strconv.FormatInt(inst.UpdatedMillis, 10))
	if inst.Action != "" {
		elem("actionType", string(inst.Action))
	}
	b.WriteString("</instance>")
}

func jsonString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

func xmlText(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s)) // a bytes.Buffer never fails
}
