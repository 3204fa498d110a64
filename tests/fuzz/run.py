"""``make fuzz``: run the graph fuzzer for a time or a number of graphs, print its seed, the
graphs checked per second per frontend, the claims exercised, and every failure shrunk to a
minimal graph (written to FUZZ_OUT, default tests/fuzz/regressions/found/, to be turned into
a named regression case in tests/fuzz/regressions/).

    python -m tests.fuzz.run [--seconds S | --examples N] [--seed S] [--frontends onnx,tf,caffe]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

ROUND = 50  # graphs per hypothesis run: each run has its own seed (base seed + round)


def _frontends():
    from tests.fuzz.onnx_check import check_onnx_graph
    from tests.fuzz.onnx_graphs import onnx_graphs

    table = {"onnx": (onnx_graphs(max_ops=8), check_onnx_graph, _save_onnx)}
    try:
        from tests.fuzz.tf_graphs import check_tf_graph, save_tf_graph, tf_graphs
        table["tf"] = (tf_graphs(), check_tf_graph, save_tf_graph)
    except ImportError:  # TensorFlow absent: the ONNX and Caffe fuzzers still run
        pass
    try:
        from tests.fuzz.caffe_nets import caffe_nets, check_caffe_net, save_caffe_net
        table["caffe"] = (caffe_nets(), check_caffe_net, save_caffe_net)
    except ImportError:  # OpenCV absent
        pass
    return table


def _save_onnx(graph, path: Path) -> Path:
    import onnx

    target = path.with_suffix(".onnx.txt")
    target.write_text(onnx.printer.to_text(graph.model) + "\n")
    return target


def failure_class(message: str) -> str:
    """A failure without its names and numbers: one line per class."""
    first = message.splitlines()[0] if message else ""
    return re.sub(r"'[^']*'|\d+(\.\d+)?", "#", first)[:160]


def run_round(frontend, strategy, check, examples: int, round_seed: int, tally: Counter):
    last = {}

    @seed(round_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(graph):
        try:
            verdict = check(graph)
        except Exception as exc:  # the source runtime rejects the graph: a generator bug
            last["graph"], last["failures"] = graph, [f"invalid graph: {exc}"]
            raise
        tally[f"{frontend} checked"] += 1
        tally[f"{frontend} {'converted' if verdict.converted else 'refused'}"] += 1
        for node in getattr(graph, "nodes", {}).values():
            tally[f"claim {frontend} {node.op}"] += 1
        if verdict.failures:
            last["graph"], last["failures"] = graph, verdict.failures
        assert not verdict.failures, "\n".join(verdict.failures)

    try:
        one()
    except Exception:
        if not last:
            raise  # the generator itself failed
        return last  # the last failing graph hypothesis ran is the shrunk one
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get(
        "FUZZ_SECONDS") or 0))
    parser.add_argument("--examples", type=int, default=int(os.environ.get(
        "FUZZ_EXAMPLES") or 0))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED") or 0)
                        or int.from_bytes(os.urandom(4), "little"))
    parser.add_argument("--frontends", default=os.environ.get("FUZZ_FRONTENDS",
                                                              "onnx,tf,caffe"))
    parser.add_argument("--out", default=os.environ.get(
        "FUZZ_OUT", "tests/fuzz/regressions/found"))
    args = parser.parse_args(argv)
    if not args.seconds and not args.examples:
        args.seconds = 60.0
    print(f"fuzz seed {args.seed} (rerun with FUZZ_SEED={args.seed})", flush=True)
    table = _frontends()
    wanted = [f for f in args.frontends.split(",") if f]
    missing = [f for f in wanted if f not in table]
    if missing:
        print(f"frontend(s) not available: {missing}", file=sys.stderr)
        return 2
    tally: Counter = Counter()
    spent: Counter = Counter()
    classes: dict[str, str] = {}
    out = Path(args.out)
    start, rnd = time.monotonic(), 0
    while True:
        done = sum(tally[f"{f} checked"] for f in wanted)
        if args.examples and done >= args.examples:
            break
        if args.seconds and time.monotonic() - start >= args.seconds:
            break
        frontend = wanted[rnd % len(wanted)]
        strategy, check, save = table[frontend]
        t0 = time.monotonic()
        found = run_round(frontend, strategy, check, ROUND, args.seed + rnd, tally)
        spent[frontend] += time.monotonic() - t0
        if found:
            key = failure_class(found["failures"][0])
            if key not in classes:
                out.mkdir(parents=True, exist_ok=True)
                path = save(found["graph"], out / f"{frontend}-{args.seed}-{rnd}")
                classes[key] = f"{frontend}: {found['failures'][0][:300]}  [{path}]"
                print(f"FAILURE {classes[key]}", flush=True)
        rnd += 1
    for f in wanted:
        n = tally[f"{f} checked"]
        rate = n / spent[f] if spent[f] else 0.0
        print(f"{f}: {n} graphs ({tally[f'{f} converted']} converted, "
              f"{tally[f'{f} refused']} refused) in {spent[f]:.0f} s: {rate:.1f} graphs/s")
    print(exercised_claims(tally, wanted))
    print(f"{len(classes)} distinct failure class(es)")
    for line in classes.values():
        print(f"  {line}")
    return 1 if classes else 0


def exercised_claims(tally: Counter, frontends) -> str:
    from nhwc_onnx.support.claims import source_op_support

    lines = []
    for f in frontends:
        names = [e.op for e in source_op_support(f)]
        hit = [n for n in names if tally[f"claim {f} {n}"]]
        lines.append(f"{f}: claims exercised {len(hit)} of {len(names)}; not: "
                     f"{', '.join(sorted(set(names) - set(hit)))}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
