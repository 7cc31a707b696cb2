// Package metrics reads a process's Prometheus /metrics (the text exposition format) for
// tests: every sample as name, labels and value, with sums over label sets.
package metrics

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one series of the text format: name{labels} value. Labels is the text between
// the braces as exposed (`a="1",b="2"`), empty for a series without labels.
type Sample struct {
	Name, Labels string
	Value        float64
}

// Series is the sample's name{labels}, as exposed.
func (s Sample) Series() string {
	if s.Labels == "" {
		return s.Name
	}
	return s.Name + "{" + s.Labels + "}"
}

// Samples are the samples of one scrape.
type Samples []Sample

// Parse reads the text format; comment (HELP, TYPE) and malformed lines are skipped.
func Parse(r io.Reader) (Samples, error) {
	var out Samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		out = append(out, Sample{Name: name, Labels: strings.TrimSuffix(labels, "}"), Value: v})
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// Scrape reads http://addr/metrics (bounded by ctx and 30 s).
func Scrape(ctx context.Context, addr string) (Samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	return Parse(resp.Body)
}

// Sum adds up the samples of the family name over every label set.
func (ss Samples) Sum(name string) float64 {
	var sum float64
	for _, s := range ss {
		if s.Name == name {
			sum += s.Value
		}
	}
	return sum
}

// BySeries maps each series (name{labels}, as exposed) to its value.
func (ss Samples) BySeries() map[string]float64 {
	out := make(map[string]float64, len(ss))
	for _, s := range ss {
		out[s.Series()] = s.Value
	}
	return out
}
