// The default IInt8Calibrator::getBatchTensors: buffers of the inputs' shapes filled by getBatch.
#include "kiln/calibrator.h"

#include "kiln/error.h"

namespace kiln {

bool IInt8Calibrator::getBatchTensors(const std::vector<CalibrationInput>& inputs,
                                      std::vector<Tensor>& batch) {
  batch.clear();
  std::vector<void*> bindings;
  std::vector<const char*> names;
  for (const CalibrationInput& in : inputs) {
    for (int64_t d : in.dims) {
      if (d < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    "calibration input '" + in.name + "' has a dynamic shape " +
                        shapeToString(in.dims) +
                        ": give it an optimization profile (its opt shape is the batch's)");
      }
    }
    batch.emplace_back(in.dtype, in.dims);
    bindings.push_back(batch.back().raw());
    names.push_back(in.name.c_str());
  }
  return getBatch(bindings.data(), names.data(), static_cast<int32_t>(inputs.size()));
}

}  // namespace kiln
