// Reasons for the operators kiln refuses on purpose (unsupported_ops.h).
#include "ir/unsupported_ops.h"

namespace kiln::ir {

std::string whyUnsupported(const std::string& domain, const std::string& opType) {
  if (domain != "ai.onnx.ml") return "";
  if (opType == "ZipMap")
    return "its output is a seq(map(int64|string, float)), and kiln's values are tensors, "
           "sequences of tensors and optionals, with no map; export the classifier without "
           "ZipMap (skl2onnx: convert_sklearn(model, ..., options={id(model): {'zipmap': "
           "False}})) to get the probabilities as a float tensor (N, classes)";
  if (opType == "DictVectorizer" || opType == "CastMap")
    return "its input is a map(int64|string, ...), and kiln's values are tensors, sequences of "
           "tensors and optionals, with no map; feed the features as a tensor instead";
  return "";
}

}  // namespace kiln::ir
