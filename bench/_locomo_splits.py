"""LoCoMo dev recall@5 on a tuning split and a held-out split, for choosing index options.

Tune on conv-26, conv-30 and conv-41; confirm on conv-42 and conv-43. Each argument set
is ``[label, backend, options]``; the vectors backend shares one vector file across runs
(``/tmp/locomo-splits.vectors.db``), so each turn is embedded once per embedder::

    python -m bench._locomo_splits '[["default", "sqlite", {}],
                                     ["hybrid", "vectors", {"dense_weight": 0.3}]]'

Prints, per set and split, recall@5 (plain FTS5 beside it), multi-hop recall@5 and the
search time per question.
"""

from __future__ import annotations

import json
import sys
import time

from bench.bench_locomo import DATA, evaluate

TUNE = frozenset({"conv-26", "conv-30", "conv-41"})


def main(argv: list[str]) -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    splits = {
        "tune": [s for s in data if s["sample_id"] in TUNE],
        "held-out": [s for s in data if s["sample_id"] not in TUNE],
    }
    for label, backend, options in json.loads(argv[0]):
        if backend == "vectors":
            options = {"vector_path": "/tmp/locomo-splits.vectors.db", **options}
        line = [f"{label:<28}"]
        for name, part in splits.items():
            started = time.perf_counter()
            ours, plain, _, seconds = evaluate(part, options, backend=backend)
            n = ours.count("all")
            line.append(
                f"{name} r@5 {ours.mean('all', 'recall@5'):.3f} "
                f"(fts {plain.mean('all', 'recall@5'):.3f}) "
                f"multi-hop {ours.mean('multi-hop', 'recall@5'):.3f} "
                f"{seconds / n * 1e3:.1f} ms/q {time.perf_counter() - started:.0f} s"
            )
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
