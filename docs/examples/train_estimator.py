#!/usr/bin/env python3
"""Train a latency estimator in PyTorch and export it as TorchScript for basin.

    basin records export --records tuning.db --out data.jsonl     # or data.csv, data.parquet
    /usr/bin/python3 docs/examples/train_estimator.py data.jsonl model.pt
    basin estimator eval --records tuning.db --estimator model.pt

The contract basin loads (docs/estimators.md): forward(features [B, S, F] float32,
mask [B, S] float32) -> scores [B], lower = predicted faster, and an integer attribute
`feature_version` equal to the feature-set version in the export's header line.
"""
import argparse
import csv
import json
import random

import torch


class Estimator(torch.nn.Module):
    def __init__(self, num_features: int, feature_version: int, mean, std):
        super().__init__()
        self.feature_version = feature_version
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.encoder = torch.nn.Sequential(
            torch.nn.Linear(num_features, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU())
        self.head = torch.nn.Linear(64, 1)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        z = self.encoder((features - self.mean) / self.std) * mask.unsqueeze(-1)
        return self.head(z.sum(1)).squeeze(-1)


def batch(samples, num_features):
    stores = max(s["stores"] for s in samples)
    x = torch.zeros(len(samples), stores, num_features)
    m = torch.zeros(len(samples), stores)
    for i, s in enumerate(samples):
        x[i, : s["stores"]] = torch.tensor(s["features"])
        m[i, : s["stores"]] = 1
    return x, m


def programs_of(columns, rows):
    """Programs from the rows of the CSV or Parquet export: a row per store, the
    features after the program's columns and the machine's (`machine.*`)."""
    first = columns.index("store") + 1
    while columns[first].startswith("machine."):
        first += 1
    at = {name: i for i, name in enumerate(columns)}
    programs, version = {}, None
    for row in rows:
        p = programs.setdefault(int(row[at["program"]]), {
            "task": row[at["task"]], "stores": int(row[at["stores"]]),
            "latency_us": float(row[at["latency_us"]]), "features": []})
        p["features"].append([float(v) for v in row[first:]])
        version = int(row[at["feature_version"]])
    return columns[first:], version, [programs[k] for k in sorted(programs)]


def load(path):
    """The export's feature names, feature-set version and programs (dicts with "task",
    "stores", "features" [stores][features] and "latency_us"), from JSON lines, CSV or
    Parquet (which needs pyarrow)."""
    if path.endswith(".parquet"):
        import pyarrow.parquet
        table = pyarrow.parquet.read_table(path)
        columns = table.column_names
        data = [table.column(c).to_pylist() for c in columns]
        return programs_of(columns, zip(*data))
    if not path.endswith(".csv"):
        with open(path) as f:
            header = json.loads(f.readline())
            return header["feature_names"], header["feature_version"], [json.loads(line) for line in f]
    with open(path, newline="") as f:
        reader = csv.reader(f)
        columns = next(reader)
        return programs_of(columns, reader)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data", help="the output of `basin records export`")
    ap.add_argument("out", help="the TorchScript file to write (.pt)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--print-scores", type=int, default=0, help="print the scores of the first N samples")
    args = ap.parse_args()
    names, version, samples = load(args.data)
    nf = len(names)
    torch.manual_seed(0)
    random.seed(0)
    rows = torch.cat([torch.tensor(s["features"]) for s in samples])
    model = Estimator(nf, version, rows.mean(0), rows.std(0) + 0.1)
    by_task = {}
    for s in samples:
        by_task.setdefault(s["task"], []).append(s)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(args.epochs):
        for group in by_task.values():
            random.shuffle(group)
            for at in range(0, len(group), 128):
                chunk = group[at : at + 128]
                if len(chunk) < 2:
                    continue
                x, m = batch(chunk, nf)
                lat = torch.tensor([s["latency_us"] for s in chunk]).log()
                score = model(x, m)
                faster = (lat[:, None] < lat[None, :]).float()  # faster programs should score lower
                loss = (torch.nn.functional.softplus(score[:, None] - score[None, :]) * faster).sum() / faster.sum().clamp(min=1)
                opt.zero_grad()
                loss.backward()
                opt.step()
    model.eval()
    torch.jit.script(model).save(args.out)
    if args.print_scores:
        with torch.no_grad():
            x, m = batch(samples[: args.print_scores], nf)
            print(json.dumps(model(x, m).tolist()))


if __name__ == "__main__":
    main()
