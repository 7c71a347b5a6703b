"""Parses OpenMetrics text from stdin with prometheus_client's parser (which refuses what the
format does not allow) and prints its samples as JSON: [[name, labels, value], ...]."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

samples = [
    [sample.name, sample.labels, sample.value]
    for family in text_string_to_metric_families(sys.stdin.read())
    for sample in family.samples
]
json.dump(samples, sys.stdout)
