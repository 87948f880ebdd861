// Calibration on arrival (docs/estimators.md, "A new machine"): the shipped estimator
// was trained on other machines' measurements, and ranks a new machine's programs
// worse. Calibration measures a designed sample of programs here, across the operator
// families of the dataset tool, and fine-tunes the estimator on them; the result is
// saved per machine (its description and code generation) in basin's cache, where
// estimator_file() finds it for every later tuning run on this machine.
//
// The sample: for each task, a pool of random valid programs ranked by the estimator,
// measured in turn from its best-ranked (the programs a search measures, and the pairs
// it separates least) and from positions spread over the rest of its ranking (so that
// the update sees the whole range), a few compiled ahead at a time until the task's
// equal share of the budget is spent. Tasks are measured in an order that visits every
// operator family before any twice.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/util/hardware.h"
#include "models/estimator.h"
#include "records/records.h"

namespace basin::models {

// basin's cache (basin::cache_dir, core/util/hardware.h).
using basin::cache_dir;

// Where a calibration for this machine and code generation (machine_description and
// codegen_version of "llvm") is kept: DIR/calibration/SLUG, holding `KIND.bin` (the
// calibrated estimator), `KIND.json` (what it was calibrated from) and `records.db` (the
// programs measured, kept so that a second calibration adds to them).
std::string calibration_dir();
// The calibrated estimator of `kind` ("ensemble" or "mlp") for this machine, when one
// exists, was made from the shipped weights now installed, and calibration is in use
// (use_calibration); else empty.
std::string calibrated_estimator_path(const std::string& kind);
// Whether estimator_file() returns a calibrated estimator for "ensemble" and "mlp"
// (default true; `--no-calibrate` turns it off for the process).
void set_use_calibration(bool on);
bool use_calibration();
// True when the shipped CPU weights were trained on this kind of machine (its CPU
// name, family, model and vector instruction set are listed in
// models/weights/hosts.txt): such a machine needs no calibration.
bool shipped_weights_know_this_host();

struct CalibrateOptions {
  double budget_seconds = 120;         // measuring (feature extraction and ranking included)
  std::string kind = "ensemble";       // the shipped estimator adapted: "ensemble" or "mlp"
  std::string tasks = "suite";         // dataset_tasks() list
  std::vector<std::string> task_keys;  // instead of `tasks`, when not empty
  int pool = 192;                      // random programs ranked per task
  uint64_t seed = 1;
  double timeout_seconds = 5;  // per program
  int epochs = 2;              // passes of the update over the sample (the MLP; the trees get epochs / 0.2 rounds)
  // Measured programs go here (must outlive the call); null: calibration_dir()'s
  // records.db.
  search::RecordStore* store = nullptr;
  std::string out;  // the calibrated estimator; empty: calibrated_estimator_path's place
  std::function<void(const std::string& line)> log;
};

struct CalibrateResult {
  int measured = 0;  // programs measured now
  int samples = 0;   // this machine's programs the update trained on (earlier ones included)
  int tasks = 0;     // tasks measured now
  int families = 0;  // operator families among them
  double measure_seconds = 0, train_seconds = 0;
  std::string out, records;
  // The shipped estimator and the calibrated one on the sample (in-sample: a check that
  // the update learned, not a held-out figure; docs/estimators.md has those).
  double before = 0, after = 0;
};

// Measures the sample into the records, fine-tunes the shipped estimator of opt.kind on
// every program of this machine the records hold, and saves it. Throws basin::Error
// when the kind has no shipped weights or nothing could be measured.
CalibrateResult calibrate(const CalibrateOptions& opt);

// The operator family of a task key, for reports per family: the task's operator, or
// for a fused task the heaviest operator inside it (conv2d, depthwise_conv2d,
// conv_transpose2d, dense, matmul, batch_matmul, attention, softmax, the norms,
// pooling; else "elementwise").
std::string task_family(const std::string& task_key);

}  // namespace basin::models
