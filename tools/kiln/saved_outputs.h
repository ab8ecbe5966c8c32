// Tensors saved by an engine as .npy files: the folder `kiln run --output-dir` or
// `python -m kiln.tools.dump_ort --out` writes (outputs.json naming each file), or any folder of
// .npy files named after their tensors. `kiln compare --ref-outputs` reads them.
#pragma once
#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::cli {

struct SavedOutputs {
  NamedTensors outputs;
  /// NAME=FILE for each input the manifest lists (what the outputs were computed from).
  std::vector<std::string> inputFiles;
  std::string engine;                // the manifest's "engine", else "saved outputs"
  std::vector<std::string> skipped;  // entries not read (.pb files), with why
};

/// Reads DIR/outputs.json and the .npy files it lists, or without it every DIR/*.npy (tensor =
/// file name without .npy). Throws naming the folder or file when one cannot be read.
SavedOutputs readSavedOutputs(const std::string& dir);

}  // namespace kiln::cli
