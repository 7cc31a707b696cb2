#!/usr/bin/env python3
"""Median and spread (min, max) of the numbers of several make bench-xds runs."""
import json, statistics, sys

runs = [json.load(open(p)) for p in sys.argv[1:]]
def pick(key, sub=None):
    vals = [r[key][sub] if sub else r[key] for r in runs]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "runs": vals}
print(json.dumps({
    "runs": len(runs), "dates": [r["date"] for r in runs], "commits": [r["commit"] for r in runs],
    "machine": [r["machine"] for r in runs],
    "api_write_to_all_acks_p50_ms": pick("api_write_to_all_acks_ms", "p50"),
    "api_write_to_all_acks_p99_ms": pick("api_write_to_all_acks_ms", "p99"),
    "api_write_to_publish_p50_ms": pick("api_write_to_publish_ms", "p50"),
    "api_write_to_publish_p99_ms": pick("api_write_to_publish_ms", "p99"),
    "publish_to_all_acks_p50_ms": pick("publish_to_all_acks_ms", "p50"),
    "publish_to_all_acks_p99_ms": pick("publish_to_all_acks_ms", "p99"),
    "eds_responses_per_change_per_client": pick("eds_responses_per_change_per_client"),
    "cla_per_change_per_client": pick("cla_per_change_per_client"),
    "cla_per_response": pick("cla_per_response"),
    "bytes_per_cla": pick("bytes_per_cla"),
    "achieved_write_rate_per_s": pick("achieved_write_rate_per_s"),
    "definitions": runs[0].get("definitions", ""),
    "bytes_per_response": pick("bytes_per_response"),
    "changes": pick("changes"),
    "note": runs[0]["machine"]["note"],
}, indent=2))
