// `kiln bench MODEL --serve`: a persistent benchmark worker driven by commands on stdin, so that a
// harness can alternate short batches of kiln and another engine without reloading the model.
#pragma once
#include <string>

#include "model_runner.h"

namespace kiln::cli {

/// Runs the worker protocol on stdin/stdout (one JSON object per output line):
///   (start)  -> {"event":"started","pid":P}      the harness reads the baseline RSS now
///   load     -> {"event":"loaded","inputs":[..]}  model opened, inputs made
///   run K    -> {"event":"ran","latencies_ms":[..K values..]}
///   quit     -> exits 0 (also at end of input)
/// Errors print {"event":"error","message":...} and return 1; bad commands are errors.
int serveBench(const std::string& model, int threads, const InputOptions& in);

}  // namespace kiln::cli
