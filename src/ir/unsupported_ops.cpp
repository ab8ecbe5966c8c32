// Reasons for the operators kiln refuses on purpose (unsupported_ops.h).
#include "ir/unsupported_ops.h"

namespace kiln::ir {

std::string whyUnsupported(const std::string& domain, const std::string& opType) {
  if (domain != "ai.onnx.ml") return "";
  if (opType == "DictVectorizer" || opType == "CastMap")
    return "its input is a map(int64|string, ...), and kiln's operators read tensors, sequences "
           "of tensors and optionals, not maps (kiln writes maps, as ZipMap's output, but reads "
           "none); feed the features as a tensor instead";
  return "";
}

}  // namespace kiln::ir
