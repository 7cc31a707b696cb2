package eureka

import (
	"errors"
	"strconv"
	"strings"
)

// errNotAcceptable: the Accept header allows neither JSON nor XML.
var errNotAcceptable = errors.New("not acceptable: this server answers application/json or application/xml")

const typeApplication = "application"

// maxAcceptRanges bounds the media ranges of an Accept header considered.
const maxAcceptRanges = 32

// Negotiate picks the response format from an Accept header. An absent header, or one that
// accepts anything, gets XML as from Eureka's server; JSON when it is preferred (higher q,
// or listed first at equal q). Ranges that do not parse are ignored; an error when no range
// allows either format.
func Negotiate(accept string) (Format, error) {
	if strings.TrimSpace(accept) == "" {
		return XML, nil
	}
	best, bestQ, found := XML, -1.0, false
	for i, r := range strings.Split(accept, ",") {
		if i == maxAcceptRanges {
			break
		}
		params := strings.Split(r, ";")
		mt := strings.ToLower(strings.TrimSpace(params[0]))
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" {
			continue
		}
		q := 1.0
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				q = f
			}
		}
		if q <= 0 {
			continue
		}
		var f Format
		switch {
		case typ == typeApplication && (sub == "json" || strings.HasSuffix(sub, "+json")):
			f = JSON
		case (typ == typeApplication || typ == "text") && (sub == "xml" || strings.HasSuffix(sub, "+xml")):
			f = XML
		case typ == "*" && sub == "*", typ == typeApplication && sub == "*", typ == "text" && sub == "*":
			f = XML
		default:
			continue
		}
		if q > bestQ {
			best, bestQ, found = f, q, true
		}
	}
	if !found {
		return XML, errNotAcceptable
	}
	return best, nil
}
